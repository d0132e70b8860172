package entrypoint

// Black-box tests of the spool commands on spools of every size and shape
// (docs/security.md, A shared spool directory): they finish, and a SIGTERM or SIGINT ends
// them with 128+N within 3 s, leaving a file that passes bbolt's own
// consistency check.

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// shapeEntry is one record of a spool fixture: dead or pending, with a
// payload padded to pad bytes (past a 4 KiB page it takes overflow pages).
type shapeEntry struct {
	dead bool
	pad  int
}

// writeShape writes a spool file of the documented format (record version
// 1, docs/spool.md) straight with bbolt, ids in order from the pending
// bucket's sequence, and returns the task ids written.
func writeShape(t *testing.T, path string, entries []shapeEntry) []string {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var ids []string
	err = db.Update(func(tx *bolt.Tx) error {
		pending, err := tx.CreateBucketIfNotExists([]byte("pending"))
		if err != nil {
			return err
		}
		dead, err := tx.CreateBucketIfNotExists([]byte("dead"))
		if err != nil {
			return err
		}
		if _, err := tx.CreateBucketIfNotExists([]byte("meta")); err != nil {
			return err
		}
		now := time.Now().UTC()
		for i, e := range entries {
			seq, _ := pending.NextSequence()
			id := fmt.Sprintf("shape-%05d", i)
			ids = append(ids, id)
			payload, _ := json.Marshal(map[string]any{"task_id": id, "task_name": "shape", "project": "p", "owner": "o", "gpu_count": 0, "pad": strings.Repeat("x", e.pad)})
			rec := map[string]any{"id": seq, "record_version": 1, "task_id": id, "payload": json.RawMessage(payload), "queued_at": now, "attempts": 1, "last_error": "monitor answered 403 Forbidden"}
			bk := pending
			if e.dead {
				rec["answer"], rec["dead_at"], bk = "monitor answered 403 Forbidden", now, dead
			}
			v, _ := json.Marshal(rec)
			if err := bk.Put(binary.BigEndian.AppendUint64(nil, seq), v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// checkBolt runs bbolt's consistency check (what `bbolt check` does) on a
// spool file.
func checkBolt(t *testing.T, path string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("bbolt open %s: %v", path, err)
	}
	defer db.Close()
	db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			t.Errorf("bbolt check %s: %v", path, err)
		}
		return nil
	})
}

func deadShape(n, pad int) []shapeEntry {
	out := make([]shapeEntry, n)
	for i := range out {
		out[i] = shapeEntry{dead: true, pad: pad + (i*977)%max(pad, 1)}
	}
	return out
}

// The spool commands finish on spools whose buckets span many pages, and
// whose dead-letter bucket the requeue empties in one transaction (before:
// `spool requeue` of six ordinary dead letters spun forever in bbolt's
// Cursor.Last, holding the lock).
func TestSpoolCommandsFinishOnAnyShape(t *testing.T) {
	shapes := []struct {
		name    string
		entries []shapeEntry
	}{
		{"six dead letters of 800 bytes", deadShape(6, 800)},
		{"one dead letter", deadShape(1, 100)},
		{"dead letters over several pages each", deadShape(40, 9000)},
		{"three thousand dead letters", deadShape(3000, 300)},
		{"pending and dead mixed", func() []shapeEntry {
			var es []shapeEntry
			for i := range 2000 {
				es = append(es, shapeEntry{dead: i%3 != 0, pad: 100 + i%2000})
			}
			return es
		}()},
	}
	for _, sh := range shapes {
		t.Run(sh.name, func(t *testing.T) {
			m := newRegMonitor(t, "200")
			k := newTask(t)
			k.Setenv("PADDLE_MONITOR_URL", m.URL)
			k.Timeout = 60 * time.Second
			ids := writeShape(t, k.SpoolPath(), sh.entries)
			dead := 0
			for _, e := range sh.entries {
				if e.dead {
					dead++
				}
			}
			wantStats(t, k, len(ids)-dead, dead)
			r := spoolRun(k, "requeue")
			if r.Code != 0 || strings.TrimSpace(r.Stdout) != fmt.Sprintf(`{"requeued":%d}`, dead) {
				t.Fatalf("spool requeue: exit %d, stdout %q\n%s", r.Code, r.Stdout, r.Stderr)
			}
			t.Logf("requeue of %d dead letters: %v (the whole process)", dead, r.Elapsed)
			checkBolt(t, k.SpoolPath())
			wantStats(t, k, len(ids), 0)
			if es, _ := spoolList(t, k, false); len(es) != len(ids) {
				t.Errorf("spool list: %d entries, want %d", len(es), len(ids))
			}
			// Bury them all again through the binary: the monitor refuses.
			// The fixture is of the previous format (no fingerprint):
			// only flush --legacy sends it.
			m.SetScript("403")
			if r := spoolRun(k, "flush", "--legacy"); r.Code != 0 {
				t.Fatalf("spool flush against a refusing monitor: exit %d\n%s", r.Code, r.Stderr)
			}
			checkBolt(t, k.SpoolPath())
			wantStats(t, k, 0, len(ids))
			if r := spoolRun(k, "requeue"); r.Code != 0 {
				t.Fatalf("second requeue: exit %d\n%s", r.Code, r.Stderr)
			}
			m.SetScript("200")
			if r := spoolRun(k, "flush", "--legacy"); r.Code != 0 {
				t.Fatalf("spool flush: exit %d\n%s", r.Code, r.Stderr)
			}
			checkBolt(t, k.SpoolPath())
			wantStats(t, k, 0, 0)
			if r := spoolRun(k, "purge", "--dead"); r.Code != 0 || strings.TrimSpace(r.Stdout) != `{"purged":0}` {
				t.Errorf("purge: exit %d, %q", r.Code, r.Stdout)
			}
			// And a purge that empties a multi-page dead bucket.
			writeShape(t, k.SpoolPath(), deadShape(50, 5000))
			if r := spoolRun(k, "purge", "--dead"); r.Code != 0 || strings.TrimSpace(r.Stdout) != `{"purged":50}` {
				t.Errorf("purge: exit %d, %q\n%s", r.Code, r.Stdout, r.Stderr)
			}
			checkBolt(t, k.SpoolPath())
		})
	}
}

// A spool command answers SIGTERM and SIGINT with 128+N within 3 s, while it
// waits for another process's lock and while it works through a large
// spool; what it was doing is rolled back whole or committed whole.
func TestSpoolCommandsAnswerSignals(t *testing.T) {
	m := newRegMonitor(t, "hang")
	t.Run("waiting for the lock", func(t *testing.T) {
		for _, sub := range [][]string{{"requeue"}, {"purge", "--dead"}, {"flush", "--legacy"}, {"list"}, {"stats"}} {
			for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
				k := newTask(t, append([]string{"spool"}, sub...)...)
				k.Setenv("PADDLE_MONITOR_URL", m.URL)
				writeShape(t, k.SpoolPath(), deadShape(6, 800))
				before, _ := os.ReadFile(k.SpoolPath())
				f, err := os.OpenFile(k.SpoolPath(), os.O_RDWR, 0)
				if err != nil {
					t.Fatal(err)
				}
				syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
				code, lag, stderr := signalAfter(t, k, 150*time.Millisecond, sig)
				f.Close()
				if code != 128+int(sig) || lag > 3*time.Second {
					t.Errorf("spool %v, %v while it waits for the lock: exit %d after %v, want %d within 3s\n%s", sub, sig, code, lag, 128+int(sig), stderr)
				}
				if after, _ := os.ReadFile(k.SpoolPath()); !bytes.Equal(before, after) {
					t.Errorf("spool %v changed the file it never locked", sub)
				}
			}
		}
	})
	t.Run("working through a large spool", func(t *testing.T) {
		const n = 10000
		for _, delay := range []time.Duration{0, 20 * time.Millisecond, 60 * time.Millisecond, 150 * time.Millisecond, 400 * time.Millisecond} {
			for _, sub := range [][]string{{"requeue"}, {"list", "--dead"}, {"flush", "--legacy"}} {
				k := newTask(t, append([]string{"spool"}, sub...)...)
				k.Setenv("PADDLE_MONITOR_URL", m.URL)
				sh := deadShape(n, 400)
				sh[0].dead = false // one pending entry, for flush to hang on
				writeShape(t, k.SpoolPath(), sh)
				code, lag, stderr := signalAfter(t, k, delay, syscall.SIGTERM)
				if (code != 143 && code != 0) || lag > 3*time.Second {
					t.Errorf("spool %v, SIGTERM after %v: exit %d after %v, want 143 (or 0, done before it) within 3s\n%s", sub, delay, code, lag, stderr)
				}
				checkBolt(t, k.SpoolPath())
				st := spoolStats(t, k)
				if st["pending"]+st["dead"] != n || (st["dead"] != n-1 && st["dead"] != 0) {
					t.Errorf("spool %v stopped after %v: stats %v, want all %d entries, requeued all or none", sub, delay, st, n)
				}
			}
		}
	})
}

// signalAfter starts k, sends sig after delay, and returns the exit status
// and how long after the signal the process ended.
func signalAfter(t *testing.T, k *task, delay time.Duration, sig syscall.Signal) (code int, lag time.Duration, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := k.Command(ctx)
	var errb bytes.Buffer
	c.Stderr = &errb
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	time.Sleep(delay)
	sent := time.Now()
	c.Process.Signal(sig)
	var err error
	select {
	case err = <-done:
	case <-time.After(20 * time.Second):
		c.Process.Kill()
		err = <-done
	}
	return exitCode(err), time.Since(sent), errb.String()
}
