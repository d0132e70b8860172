package entrypoint

// Black-box tests of the spool against a hostile neighbour or a strange
// file: another user's file, a file that is not regular, bounds that are
// the task's own, a poison entry, an almost full disk, a corrupt file
// salvaged leaf by leaf, a locked file (docs/spool.md, docs/security.md).

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/spool"
	bolt "go.etcd.io/bbolt"
)

// `spool flush` on a file another process holds locked does not report
// "pending":0: the count is unknown, and the exit status says so.
func TestFlushLockedFile(t *testing.T) {
	m := newRegMonitor(t, "503")
	k := newTask(t)
	spoolPending(t, k, m, "locked-1")
	f, err := os.OpenFile(k.SpoolPath(), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	m.SetScript("200")
	k.Setenv("PADDLE_MONITOR_URL", m.URL)
	r := spoolRun(k, "flush")
	if r.Code == 0 {
		t.Errorf("exit 0 on a locked spool")
	}
	var line map[string]any
	if err := json.Unmarshal([]byte(r.Stdout), &line); err != nil {
		t.Fatalf("stdout %q", r.Stdout)
	}
	if p, ok := line["pending"]; !ok || p != nil {
		t.Errorf("pending %v, want null (unknown) while the file is locked: %s", p, r.Stdout)
	}
	if line["locked"] != true {
		t.Errorf("no locked:true in %s", r.Stdout)
	}
}

// runAs runs the entrypoint copy at path as uid/gid with env and args.
func runAs(t *testing.T, path string, uid, gid uint32, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := exec.CommandContext(ctx, path, args...)
	c.Env = env
	c.Dir = "/"
	c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	start := time.Now()
	err := c.Run()
	if ctx.Err() != nil {
		t.Fatalf("%v did not finish within 30s\n%s", args, stderr.String())
	}
	return result{Stdout: stdout.String(), Stderr: stderr.String(), Code: exitCode(err), Elapsed: time.Since(start)}
}

// sharedSpoolDir is a 1777 directory, like the image's
// /var/lib/paddle-entrypoint, with a copy of the entrypoint every user can
// run.
func sharedSpoolDir(t *testing.T) (dir, entrypoint string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to play several users")
	}
	top, entrypoint := privDir(t)
	dir = filepath.Join(top, "spool")
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	return dir, entrypoint
}

// userEnv is the environment of a start as a user with spool path.
func userEnv(monitor, spoolPath string, extra ...string) []string {
	return append([]string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"PADDLE_LABELS_FILE=/nonexistent/labels",
		"PADDLE_SPOOL_PATH=" + spoolPath,
		"PADDLE_MONITOR_URL=" + monitor,
		"PADDLE_REGISTER_BUDGET=1s",
	}, extra...)
}

// A spool file that another user pre-created in the shared directory (or
// made writable by others) is not used: uid 1000's start does not read it,
// write it, rename it or send what was planted in it, and neither does
// root's drainer; the start still runs its command.
func TestSpoolForeignFile(t *testing.T) {
	dir, ep := sharedSpoolDir(t)
	m := newRegMonitor(t, "503")
	victim := filepath.Join(dir, "spool-1000.db")
	// uid 2000 plants an entry in uid 1000's spool path, then opens it to all.
	r := runAs(t, ep, 2000, 2000, userEnv(m.URL, victim, "PADDLE_TASK_ID=planted-by-2000", "PADDLE_LABEL_NOTE=mine"), "/bin/true")
	if r.Code != 0 {
		t.Fatalf("planting start: exit %d\n%s", r.Code, r.Stderr)
	}
	if err := os.Chmod(victim, 0o666); err != nil {
		t.Fatal(err)
	}
	planted, err := os.ReadFile(victim)
	if err != nil || len(planted) == 0 {
		t.Fatalf("no planted file: %v", err)
	}
	m.SetScript("200")
	before := len(m.Requests())

	r = runAs(t, ep, 1000, 1000, userEnv(m.URL, victim, "PADDLE_TASK_ID=victim-1000"), "/bin/true")
	if r.Code != 0 {
		t.Fatalf("victim start: exit %d\n%s", r.Code, r.Stderr)
	}
	if !strings.Contains(r.Stderr, "not trusted") {
		t.Errorf("no log says the spool file is not trusted:\n%s", r.Stderr)
	}
	// The spool file is refused on the spool's first use: a start whose
	// registration fails.
	m.SetScript("503")
	r = runAs(t, ep, 1000, 1000, userEnv(m.URL, victim, "PADDLE_TASK_ID=victim-1000-b"), "/bin/true")
	if r.Code != 0 || !strings.Contains(r.Stderr, "not trusted") {
		t.Errorf("second victim start: exit %d\n%s", r.Code, r.Stderr)
	}
	m.SetScript("200")
	for _, args := range [][]string{{"spool", "list"}, {"spool", "stats"}, {"spool", "flush"}} {
		r := runAs(t, ep, 1000, 1000, userEnv(m.URL, victim), args...)
		if r.Code == 0 || strings.Contains(r.Stdout, "planted-by-2000") || strings.Contains(r.Stdout, "mine") {
			t.Errorf("uid 1000 %v: exit %d, stdout %q", args, r.Code, r.Stdout)
		}
	}
	// Root's drainer: spool-1000.db belongs to uid 1000, and this one does not.
	r = runAs(t, ep, 0, 0, userEnv(m.URL, filepath.Join(dir, "spool-0.db")), "spool", "flush", "--all")
	if r.Code == 0 {
		t.Errorf("drainer exit 0 although a spool file was refused\n%s", r.Stderr)
	}
	for _, req := range m.Requests()[before:] {
		if strings.Contains(string(req.Body), "planted-by-2000") || req.Key() == "planted-by-2000" {
			t.Errorf("the planted entry was sent: key %q", req.Key())
		}
	}
	if got, _ := os.ReadFile(victim); !bytes.Equal(got, planted) {
		t.Errorf("the other user's file was changed")
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("directory holds %v; nothing may be renamed or created beside the refused file", names)
	}
	// Made private again, it is still uid 2000's file, not uid 1000's.
	os.Chmod(victim, 0o644)
	if r := runAs(t, ep, 1000, 1000, userEnv(m.URL, victim), "spool", "list"); r.Code == 0 || strings.Contains(r.Stdout, "mine") {
		t.Errorf("uid 1000 read uid 2000's file: exit %d, %q", r.Code, r.Stdout)
	}
}

// A symbolic link or a FIFO at a spool path: `spool stats|list|flush`
// answer at once with an error, and a start runs its command.
func TestSpoolNotRegular(t *testing.T) {
	m := newRegMonitor(t, "503")
	for _, kind := range []string{"fifo", "symlink"} {
		t.Run(kind, func(t *testing.T) {
			k := newTask(t)
			k.Setenv("PADDLE_MONITOR_URL", m.URL)
			k.Setenv("PADDLE_REGISTER_BUDGET", "500ms")
			k.Timeout = 10 * time.Second
			target := filepath.Join(k.Dir, "target.db")
			os.WriteFile(target, nil, 0o600)
			var err error
			if kind == "fifo" {
				err = syscall.Mkfifo(k.SpoolPath(), 0o600)
			} else {
				err = os.Symlink(target, k.SpoolPath())
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, args := range [][]string{{"stats"}, {"list"}, {"list", "--dead"}, {"flush"}, {"requeue"}, {"purge", "--dead"}} {
				r := spoolRun(k, args...)
				if r.Code != 1 || !strings.Contains(r.Stderr, "not trusted") {
					t.Errorf("spool %v: exit %d\n%s", args, r.Code, r.Stderr)
				}
			}
			k.Args = []string{"/bin/true"}
			if r := k.Run(); r.Code != 0 {
				t.Errorf("start: exit %d\n%s", r.Code, r.Stderr)
			}
			if fi, err := os.Lstat(k.SpoolPath()); err != nil || fi.Mode().IsRegular() {
				t.Errorf("the %s at the spool path was replaced", kind)
			}
			if b, _ := os.ReadFile(target); len(b) != 0 {
				t.Errorf("the symbolic link's target was written")
			}
		})
	}
}

// A task's PADDLE_SPOOL_MAX and PADDLE_SPOOL_MAX_AGE bound only what it
// adds; the node's bounds come from the drainer's flags.
func TestTaskBoundsOwnEntriesOnly(t *testing.T) {
	m := newRegMonitor(t, "503")
	k := newTask(t)
	spoolPending(t, k, m, "other-1", "other-2")

	small := *k
	small.Env = append([]string(nil), k.Env...)
	small.Setenv("PADDLE_SPOOL_MAX", "1")
	small.Setenv("PADDLE_SPOOL_MAX_AGE", "1ns")
	spoolPendingAllowLost(t, &small, m, "greedy")
	quick := *k
	quick.Env = append([]string(nil), k.Env...)
	quick.Setenv("PADDLE_SPOOL_MAX_AGE", "1ns")
	spoolPending(t, &quick, m, "short-lived")
	spoolPending(t, k, m, "later")
	// An entry past its own bound moves to the dead letters when the queue
	// is next read (a flush, a start's backlog).
	k.Setenv("PADDLE_MONITOR_URL", m.URL)
	if r := spoolRun(k, "flush"); r.Code != 1 {
		t.Errorf("flush exit %d\n%s", r.Code, r.Stderr)
	}

	pending, _ := spoolList(t, k, false)
	if ids := taskIDs(pending); !slicesEqual(ids, []string{"other-1", "other-2", "later"}) {
		t.Errorf("pending %v: other tasks' entries must survive a task's own bounds", ids)
	}
	dead, _ := spoolList(t, k, true)
	if ids := taskIDs(dead); !slicesEqual(ids, []string{"short-lived"}) || dead[0].Answer != "expired" {
		t.Errorf("dead %+v, want short-lived expired by its own bound", dead)
	}
	if st := spoolStats(t, k); st["dropped"] != 1 {
		t.Errorf("stats %v, want the greedy task's own entry counted as dropped", st)
	}
	// The node's drainer with --spool-max 2 applies it to every entry.
	if r := spoolRun(k, "flush", "--spool-max", "2"); r.Code != 1 {
		t.Errorf("flush exit %d\n%s", r.Code, r.Stderr)
	}
	pending, _ = spoolList(t, k, false)
	if ids := taskIDs(pending); !slicesEqual(ids, []string{"other-2", "later"}) {
		t.Errorf("after the drainer's --spool-max 2: pending %v", ids)
	}
}

// spoolPendingAllowLost is spoolPending for a start whose own bound may
// keep its entry out.
func spoolPendingAllowLost(t *testing.T, k *task, m *regMonitor, id string) {
	t.Helper()
	s := *k
	s.Args = []string{"/bin/true"}
	s.Env = append([]string(nil), k.Env...)
	s.Setenv("PADDLE_MONITOR_URL", m.URL)
	s.Setenv("PADDLE_REGISTER_BUDGET", "200ms")
	s.Setenv("PADDLE_TASK_ID", id)
	if r := s.Run(); r.Code != 0 {
		t.Fatalf("start of %s: exit %d\n%s", id, r.Code, r.Stderr)
	}
}

// oldSpool writes n pending entries queued long ago straight into a bbolt
// file, in one transaction, as a node's spool looks after months.
func oldSpool(t *testing.T, path string, n int, queued time.Time) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		p, _ := tx.CreateBucketIfNotExists([]byte("pending"))
		tx.CreateBucketIfNotExists([]byte("dead"))
		tx.CreateBucketIfNotExists([]byte("meta"))
		for i := 1; i <= n; i++ {
			id := fmt.Sprintf("old-%06d", i)
			v := fmt.Sprintf(`{"id":%d,"record_version":1,"task_id":%q,"payload":{"task_id":%q,"task_name":"x"},"queued_at":%q,"attempts":1}`,
				i, id, id, queued.UTC().Format(time.RFC3339Nano))
			if err := p.Put(binary.BigEndian.AppendUint64(nil, uint64(i)), []byte(v)); err != nil {
				return err
			}
		}
		return p.SetSequence(uint64(n))
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A poison entry (one the monitor answers 5xx forever) does not stall the
// entries behind it, in a flush or in a start's backlog; one retried long
// enough becomes a dead letter.
func TestPoisonEntry(t *testing.T) {
	url, delivered := poisonMonitor(t)
	k := regTask(t, url, 3*time.Second)
	raw := func(id string) spool.Entry {
		return spool.Entry{TaskID: id, Payload: json.RawMessage(`{"task_id":"` + id + `"}`)}
	}
	plant(t, k.SpoolPath(), raw("poison-1"), raw("ok-1"), raw("ok-2"))
	r := spoolRun(k, "flush")
	if r.Code != 1 {
		t.Errorf("flush exit %d, want 1 (poison-1 left pending)\n%s", r.Code, r.Stderr)
	}
	if got := delivered(); !slicesEqual(got, []string{"ok-1", "ok-2"}) {
		t.Errorf("flush delivered %v, want ok-1 and ok-2 past the poison entry", got)
	}
	plant(t, k.SpoolPath(), raw("ok-3"))
	k.Setenv("PADDLE_TASK_ID", "start-1")
	if r := k.Run(); r.Code != 0 {
		t.Fatalf("start exit %d\n%s", r.Code, r.Stderr)
	}
	if got := delivered(); !slicesEqual(got, []string{"ok-1", "ok-2", "start-1", "ok-3"}) {
		t.Errorf("after a start: delivered %v, want its backlog past the poison entry", got)
	}
	old := raw("poison-old")
	old.Attempts = 40
	old.QueuedAt = time.Now().Add(-48 * time.Hour)
	plant(t, k.SpoolPath(), old)
	spoolRun(k, "flush")
	dead, _ := spoolList(t, k, true)
	if len(dead) != 1 || dead[0].TaskID != "poison-old" || !strings.Contains(dead[0].Answer, "gave up") {
		t.Errorf("dead %+v, want poison-old given up", dead)
	}
	if p, _ := spoolList(t, k, false); !slicesEqual(taskIDs(p), []string{"poison-1"}) {
		t.Errorf("pending %v, want poison-1 only", taskIDs(p))
	}
}

// poisonMonitor answers 500 to any body naming a "poison" task, 200 to
// the rest, and records the task ids it delivered.
func poisonMonitor(t *testing.T) (url string, delivered func() []string) {
	t.Helper()
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), "poison") {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		mu.Lock()
		got = append(got, r.Header.Get("Idempotency-Key"))
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), got...)
	}
}

// A start on an almost full disk leaves no half-written spool file that
// the next start would call corrupt.
func TestAlmostFullDisk(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small file system")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", dir).Run() })
	filler := filepath.Join(dir, "filler")
	// Leave 8 KiB: less than the 16 KiB a new bbolt file needs.
	if err := os.WriteFile(filler, make([]byte, 56<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	k := regTask(t, regDownURL(t), time.Second)
	k.Setenv("PADDLE_SPOOL_PATH", filepath.Join(dir, "spool.db"))
	k.Setenv("PADDLE_TASK_ID", "full-1")
	if r := k.Run(); r.Code != 0 {
		t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
	}
	os.Remove(filler)
	k.Setenv("PADDLE_TASK_ID", "full-2")
	r := k.Run()
	if r.Code != 0 {
		t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
	}
	if strings.Contains(r.Stderr, "corrupt") {
		t.Errorf("the next start found a corrupt file:\n%s", r.Stderr)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.Name() != "spool.db" {
			t.Errorf("left in the spool directory: %s", e.Name())
		}
	}
	k.Setenv("PADDLE_SPOOL_PATH", filepath.Join(dir, "spool.db"))
	r = spoolRun(k, "list")
	if !strings.Contains(r.Stdout, `"task_id":"full-2"`) {
		t.Errorf("full-2 not pending: %q\n%s", r.Stdout, r.Stderr)
	}
}

// Salvage of a corrupt spool keeps every readable leaf: a zeroed page in
// 501 entries loses only that page's entries; a truncated file keeps the
// entries of the pages that are still there.
func TestSalvageEveryLeaf(t *testing.T) {
	for _, c := range []struct {
		name   string
		damage func(b []byte) []byte
		least  int
	}{
		{"one zeroed leaf page", func(b []byte) []byte {
			leaves := leafPages(b)
			id := leaves[len(leaves)/2]
			clear(b[id*4096 : (id+1)*4096])
			return b
		}, 501 - 40},
		{"truncated to half", func(b []byte) []byte { return b[:len(b)/2/4096*4096] }, 150},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := newTask(t)
			oldSpool(t, k.SpoolPath(), 501, time.Now())
			b, err := os.ReadFile(k.SpoolPath())
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(k.SpoolPath(), c.damage(b), 0o600)
			st := spoolStats(t, k)
			t.Logf("%s: %d of 501 entries salvaged", c.name, st["pending"])
			if st["pending"] < c.least || st["pending"] > 501 {
				t.Errorf("salvaged %d of 501 pending entries, want at least %d", st["pending"], c.least)
			}
			p, _ := spoolList(t, k, false)
			for i := 1; i < len(p); i++ {
				if p[i].TaskID <= p[i-1].TaskID {
					t.Fatalf("salvaged entries out of order: %s after %s", p[i].TaskID, p[i-1].TaskID)
				}
			}
		})
	}
}

// leafPages returns the ids of the bbolt leaf pages of a file (4 KiB pages).
func leafPages(b []byte) []int {
	var ids []int
	for id := 2; (id+1)*4096 <= len(b); id++ {
		p := b[id*4096:]
		if binary.NativeEndian.Uint64(p) == uint64(id) && binary.NativeEndian.Uint16(p[8:]) == 0x02 {
			ids = append(ids, id)
		}
	}
	return ids
}

const pageHeaderSizeForTest = 16
