package entrypoint

// Black-box tests of the node's drainer (spool flush --all --watch): a
// file swapped for a FIFO, stored payloads checked again, the entries of a
// corrupt file renamed aside delivered (docs/spool.md, Operator commands).

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/spool"
)

// A user who keeps swapping their spool file for a FIFO cannot freeze the
// node's drainer: it keeps delivering the other files and stops on SIGTERM.
func TestDrainerFIFOSwap(t *testing.T) {
	m := newRegMonitor(t, "503")
	dir := t.TempDir()
	good := newTask(t)
	good.Setenv("PADDLE_SPOOL_PATH", filepath.Join(dir, "spool-0.db"))
	spoolPending(t, good, m, "drain-a")
	m.SetScript("200")

	fifo := filepath.Join(dir, "spool-1000.db")
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	swapDone := make(chan struct{})
	go func() { // swap a FIFO and a regular file in, as fast as it goes
		defer close(swapDone)
		tmpF, tmpR := filepath.Join(dir, "fifo.tmp"), filepath.Join(dir, "reg.tmp")
		for i := 0; ctx.Err() == nil; i++ {
			if i%2 == 0 {
				syscall.Mkfifo(tmpF, 0o600)
				os.Rename(tmpF, fifo)
			} else {
				os.WriteFile(tmpR, nil, 0o600)
				os.Rename(tmpR, fifo)
			}
			time.Sleep(time.Millisecond)
		}
	}()
	d := newTask(t, "spool", "flush", "--all", "--watch", "--interval", "20ms")
	d.Setenv("PADDLE_SPOOL_PATH", filepath.Join(dir, "spool-0.db"))
	d.Setenv("PADDLE_MONITOR_URL", m.URL)
	c := d.Command(ctx)
	var stderr bytes.Buffer
	c.Stderr = &stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Process.Kill()
	for ctx.Err() == nil && len(m.Delivered()) == 0 {
		time.Sleep(20 * time.Millisecond)
	}
	// Later entries are delivered too: the drainer is not stuck.
	time.Sleep(2 * time.Second) // many passes over the swapping file
	m.SetScript("503")
	spoolPending(t, good, m, "drain-b")
	m.SetScript("200")
	for ctx.Err() == nil && len(m.Delivered()) < 2 {
		time.Sleep(20 * time.Millisecond)
	}
	if got := m.Delivered(); len(got) < 2 {
		t.Errorf("drainer delivered %v, want drain-a and drain-b", got)
	}
	c.Process.Signal(syscall.SIGTERM)
	start := time.Now()
	done := make(chan int, 1)
	go func() { done <- exitCode(c.Wait()) }()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("drainer exit %d on SIGTERM\n%s", code, stderr.String())
		}
		t.Logf("drainer stopped %v after SIGTERM", time.Since(start))
	case <-time.After(5 * time.Second):
		t.Errorf("drainer ignored SIGTERM for 5s\n%s", stderr.String())
	}
	cancel()
	<-swapDone
}

// plant writes entries into a spool file as any program could: through
// the spool package, with whatever task id and payload it likes, as
// written for no token (as the tests' starts write theirs).
func plant(t *testing.T, path string, entries ...spool.Entry) {
	t.Helper()
	s := spool.New(spool.Options{Path: path})
	for _, e := range entries {
		if e.Fingerprint == "" {
			e.Fingerprint = spool.FingerprintNone
		}
		if _, err := s.Registrations().Enqueue(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}
}

// Every stored payload is checked again before it is sent (name rule,
// sensitive data, the node's policy), and is sent with its own task_id as
// the Idempotency-Key, whatever key the entry around it claims. A payload
// that fails goes to the dead letters with the reason.
func TestStoredPayloadRechecked(t *testing.T) {
	for _, how := range []string{"flush", "start backlog"} {
		t.Run(how, func(t *testing.T) {
			m := newRegMonitor(t, "200")
			k := regTask(t, m.URL, 5*time.Second)
			pol := filepath.Join(k.Dir, "policy.json")
			os.WriteFile(pol, []byte(`{"mode":"warn","labels":{"project":{"allow":["vision","default"]}}}`), 0o644)
			k.Setenv("PADDLE_POLICY_FILE", pol)
			raw := func(s string) json.RawMessage { return json.RawMessage(s) }
			plant(t, k.SpoolPath(),
				spool.Entry{TaskID: "claimed-key", Payload: raw(`{"task_id":"real-id","project":"vision"}`)},
				spool.Entry{TaskID: "card", Payload: raw(`{"task_id":"card","project":"vision","labels":{"note":"4111_1111_1111_1111"}}`)},
				spool.Entry{TaskID: "denied", Payload: raw(`{"task_id":"denied","project":"admin"}`)},
				spool.Entry{TaskID: "forged", Payload: raw(`{"task_id":"forged","task_name":"a\nb"}`)},
				spool.Entry{TaskID: "no-id", Payload: raw(`{"project":"vision"}`)},
			)
			var r result
			if how == "flush" {
				r = spoolRun(k, "flush")
			} else {
				k.Setenv("PADDLE_TASK_ID", "the-start")
				r = k.Run()
			}
			if r.Code != 0 {
				t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
			}
			var keys []string
			for _, req := range m.Requests() {
				keys = append(keys, req.Key())
				if strings.Contains(string(req.Body), "4111") || strings.Contains(string(req.Body), "admin") {
					t.Errorf("refused payload sent: %s", req.Body)
				}
			}
			want := []string{"real-id"}
			if how != "flush" {
				want = []string{"the-start", "real-id"}
			}
			if !slicesEqual(keys, want) {
				t.Errorf("monitor saw keys %v, want %v", keys, want)
			}
			dead, _ := spoolList(t, k, true)
			reasons := map[string]string{}
			for _, e := range dead {
				reasons[e.TaskID] = e.Answer
			}
			for id, why := range map[string]string{"card": "sensitive", "denied": "project", "forged": "name rule", "no-id": "task_id"} {
				if !strings.Contains(reasons[id], why) || !strings.Contains(reasons[id], "not sent") {
					t.Errorf("dead letter %s: answer %q, want the reason (%s)", id, reasons[id], why)
				}
			}
			if strings.Contains(r.Stderr, "4111") {
				t.Errorf("the card number was logged")
			}
			wantStats(t, k, 0, 4)
		})
	}
}

func slicesEqual(a, b []string) bool {
	return strings.Join(a, "\x00") == strings.Join(b, "\x00")
}

// The node's drainer delivers what can be salvaged from a corrupt file
// renamed aside, then marks it drained; `spool list` on such a file reads
// it and renames nothing.
func TestDrainerDeliversAside(t *testing.T) {
	m := newRegMonitor(t, "200")
	dir := t.TempDir()
	src := filepath.Join(dir, "src.db")
	oldSpool(t, src, 30, time.Now())
	b, _ := os.ReadFile(src)
	os.Remove(src)
	b[pageHeaderSizeForTest+60] ^= 1 // meta page 0's checksum
	aside := filepath.Join(dir, "spool-0.db.corrupt-1700000000")
	os.WriteFile(aside, b, 0o600)

	k := newTask(t)
	k.Setenv("PADDLE_SPOOL_PATH", aside)
	for i := 0; i < 2; i++ {
		r := spoolRun(k, "list")
		if r.Code != 0 || strings.Count(r.Stdout, "\n") != 30 {
			t.Fatalf("spool list on the aside file: exit %d, %d lines\n%s", r.Code, strings.Count(r.Stdout, "\n"), r.Stderr)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 || ents[0].Name() != filepath.Base(aside) {
		t.Fatalf("spool list renamed or created files: %v", ents)
	}
	// The fixture is of the previous format (no fingerprint): --legacy.
	d := newTask(t, "spool", "flush", "--all", "--legacy")
	d.Setenv("PADDLE_SPOOL_PATH", filepath.Join(dir, "spool-0.db"))
	d.Setenv("PADDLE_MONITOR_URL", m.URL)
	r := d.Run()
	if r.Code != 0 {
		t.Errorf("drainer exit %d\n%s", r.Code, r.Stderr)
	}
	if got := m.Delivered(); len(got) != 30 || got[0] != "old-000001" || got[29] != "old-000030" {
		t.Errorf("delivered %d entries: %v", len(got), got)
	}
	if _, err := os.Stat(aside + ".drained"); err != nil {
		t.Errorf("the aside file was not marked drained: %v", err)
	}
	if r := d.Run(); r.Code != 0 || len(m.Delivered()) != 30 {
		t.Errorf("second pass: exit %d, %d delivered in all", r.Code, len(m.Delivered()))
	}
}
