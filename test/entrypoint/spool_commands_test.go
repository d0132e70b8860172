package entrypoint

// Black-box tests of `paddle-entrypoint spool list|stats|flush|requeue|purge`
// (docs/contract.md, section 6). Pending entries are made the way a node
// makes them: by starts whose monitor was down.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/spool"
)

// spoolPending makes one pending entry per task id in k's spool, by starts
// against a monitor answering 503 (so the monitor saw each first try).
func spoolPending(t *testing.T, k *task, m *regMonitor, ids ...string) {
	t.Helper()
	m.SetScript("503")
	for _, id := range ids {
		s := *k
		s.Args = []string{"/bin/true"}
		s.Env = slices.Clone(k.Env)
		s.Setenv("PADDLE_MONITOR_URL", m.URL)
		s.Setenv("PADDLE_REGISTER_BUDGET", "200ms")
		s.Setenv("PADDLE_TASK_ID", id)
		if r := s.Run(); r.Code != 0 || !strings.Contains(r.Stderr, "outcome=spooled") {
			t.Fatalf("start of %s: exit %d\n%s", id, r.Code, r.Stderr)
		}
	}
}

// firstKeys returns the Idempotency-Key of each first try, by body task_id.
func firstKeys(m *regMonitor) map[string]string {
	keys := map[string]string{}
	for _, r := range m.Requests() {
		var b struct {
			TaskID string `json:"task_id"`
		}
		json.Unmarshal(r.Body, &b)
		if _, seen := keys[b.TaskID]; !seen {
			keys[b.TaskID] = r.Key()
		}
	}
	return keys
}

func TestSpoolFlush(t *testing.T) {
	m := newRegMonitor(t, "503")
	k := newTask(t)
	spoolPending(t, k, m, "sp-1", "sp-2", "sp-3")
	keys := firstKeys(m)
	k.Setenv("PADDLE_MONITOR_URL", m.URL)

	t.Run("monitor still down", func(t *testing.T) {
		r := spoolRun(k, "flush")
		if r.Code != 1 {
			t.Errorf("exit %d with entries left pending, want 1\n%s", r.Code, r.Stderr)
		}
		wantStats(t, k, 3, 0)
	})
	t.Run("monitor back", func(t *testing.T) {
		m.SetScript("200")
		r := spoolRun(k, "flush")
		if r.Code != 0 {
			t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
		}
		if got := m.Delivered(); !slices.Equal(got, []string{"sp-1", "sp-2", "sp-3"}) {
			t.Errorf("delivered %v, want the three, oldest first", got)
		}
		for id, key := range keys {
			if key != id {
				t.Errorf("%s: first try's Idempotency-Key %q", id, key)
			}
		}
		var line map[string]any
		if err := json.Unmarshal([]byte(r.Stdout), &line); err != nil || line["delivered"] != 3.0 || line["pending"] != 0.0 {
			t.Errorf("flush printed %q", r.Stdout)
		}
		wantStats(t, k, 0, 0)
	})
	t.Run("nothing left", func(t *testing.T) {
		before := len(m.Requests())
		if r := spoolRun(k, "flush"); r.Code != 0 {
			t.Errorf("exit %d\n%s", r.Code, r.Stderr)
		}
		if len(m.Requests()) != before {
			t.Error("an empty spool sent something")
		}
	})
}

// Entries go to the monitor the flushing process is configured with, not
// to the one they first failed on.
func TestSpoolFlushUsesConfiguredMonitor(t *testing.T) {
	old := newRegMonitor(t, "503")
	k := newTask(t)
	spoolPending(t, k, old, "sp-moved")
	before := len(old.Requests())
	current := newRegMonitor(t, "200")
	k.Setenv("PADDLE_MONITOR_URL", current.URL)
	if r := spoolRun(k, "flush"); r.Code != 0 {
		t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
	}
	if got := current.Delivered(); !slices.Equal(got, []string{"sp-moved"}) {
		t.Errorf("configured monitor got %v", got)
	}
	if len(old.Requests()) != before {
		t.Error("the old monitor was asked again")
	}
}

// `spool flush --all --watch`: the node-level drainer. It drains every
// per-UID spool file of the directory, keeps draining new entries, and
// exits 0 on SIGTERM.
func TestSpoolFlushAllWatch(t *testing.T) {
	m := newRegMonitor(t, "503")
	dir := t.TempDir()
	a, b := newTask(t), newTask(t)
	a.Setenv("PADDLE_SPOOL_PATH", filepath.Join(dir, "spool-1000.db"))
	b.Setenv("PADDLE_SPOOL_PATH", filepath.Join(dir, "spool-1001.db"))
	spoolPending(t, a, m, "uid1000-a")
	spoolPending(t, b, m, "uid1001-a")
	os.WriteFile(filepath.Join(dir, "notes.db"), []byte("not a spool"), 0o600)

	d := newTask(t, "spool", "flush", "--all", "--watch", "--interval", "200ms")
	d.Setenv("PADDLE_SPOOL_PATH", filepath.Join(dir, "spool-0.db"))
	d.Setenv("PADDLE_MONITOR_URL", m.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := d.Command(ctx)
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Process.Kill()
	// waitDrained waits until both spools hold nothing pending (the
	// monitor records a request before the drainer has its answer), then
	// checks what the monitor was given.
	waitDrained := func(ids ...string) {
		t.Helper()
		for ctx.Err() == nil {
			if spoolStats(t, a)["pending"] == 0 && spoolStats(t, b)["pending"] == 0 {
				got := m.Delivered()
				slices.Sort(got)
				if !slices.Equal(got, ids) {
					t.Fatalf("delivered %v, want %v", got, ids)
				}
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("drainer did not deliver %v; stderr:\n%s", ids, stderr.String())
	}
	time.Sleep(500 * time.Millisecond) // a few passes against a monitor that is down
	m.SetScript("200")
	waitDrained("uid1000-a", "uid1001-a")

	spoolPending(t, a, m, "uid1000-b") // a later start, with the monitor down again
	m.SetScript("200")
	waitDrained("uid1000-a", "uid1000-b", "uid1001-a")

	c.Process.Signal(syscall.SIGTERM)
	start := time.Now()
	if code := exitCode(c.Wait()); code != 0 {
		t.Errorf("drainer exit %d on SIGTERM, want 0\n%s", code, stderr.String())
	}
	if lag := time.Since(start); lag > 2*time.Second {
		t.Errorf("drainer took %v to stop", lag)
	}
	wantStats(t, a, 0, 0)
	wantStats(t, b, 0, 0)
	if got, _ := os.ReadFile(filepath.Join(dir, "notes.db")); string(got) != "not a spool" {
		t.Error("a file that is not spool-*.db was touched")
	}
	if _, err := os.Stat(filepath.Join(dir, "spool-0.db")); !os.IsNotExist(err) {
		t.Error("the drainer created its own spool file")
	}
	for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		if !json.Valid([]byte(line)) {
			t.Errorf("drainer printed a line that is not JSON: %q", line)
		}
	}
}

// A spool file that does not exist reads as empty, and is not created.
func TestSpoolMissingFile(t *testing.T) {
	k := newTask(t)
	path := filepath.Join(k.Dir, "absent", "spool-0.db")
	k.Setenv("PADDLE_SPOOL_PATH", path)
	k.Setenv("PADDLE_MONITOR_URL", regDownURL(t))
	for _, args := range [][]string{{"list"}, {"list", "--dead"}, {"stats"}, {"flush"}, {"flush", "--all"}, {"requeue"}, {"purge", "--dead"}} {
		r := spoolRun(k, args...)
		if r.Code != 0 {
			t.Errorf("spool %v: exit %d\n%s", args, r.Code, r.Stderr)
		}
		if args[0] == "list" && r.Stdout != "" {
			t.Errorf("spool %v printed %q", args, r.Stdout)
		}
	}
	if st := spoolStats(t, k); st["pending"] != 0 || st["dead"] != 0 || st["dropped"] != 0 || len(st) < 3 {
		t.Errorf("stats %v, want pending, dead and dropped all 0", st)
	}
	if _, err := os.Stat(filepath.Dir(path)); !os.IsNotExist(err) {
		t.Error("reading a missing spool created its directory")
	}
}

// Dead letters: listed with their answer, moved back by requeue, deleted by
// purge --dead.
func TestSpoolDeadLetters(t *testing.T) {
	m := newRegMonitor(t, "422")
	k := regTask(t, m.URL, time.Second)
	k.Setenv("PADDLE_TASK_ID", "sp-dead-1")
	if r := k.Run(); r.Code != 0 {
		t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
	}
	dead, _ := spoolList(t, k, true)
	if len(dead) != 1 || dead[0].TaskID != "sp-dead-1" || !strings.Contains(dead[0].Answer, "422") || dead[0].Payload["task_id"] != "sp-dead-1" {
		t.Fatalf("dead letters %+v", dead)
	}
	if pending, _ := spoolList(t, k, false); len(pending) != 0 {
		t.Errorf("pending %v, want none", taskIDs(pending))
	}

	r := spoolRun(k, "requeue")
	if r.Code != 0 || strings.TrimSpace(r.Stdout) != `{"requeued":1}` {
		t.Errorf("requeue: exit %d, stdout %q", r.Code, r.Stdout)
	}
	wantStats(t, k, 1, 0)

	// Still refused: flush buries it again and says so by its exit status.
	if r := spoolRun(k, "flush"); r.Code != 0 {
		t.Errorf("flush: exit %d (nothing pending is left)\n%s", r.Code, r.Stderr)
	}
	wantStats(t, k, 0, 1)

	r = spoolRun(k, "purge", "--dead")
	if r.Code != 0 || strings.TrimSpace(r.Stdout) != `{"purged":1}` {
		t.Errorf("purge: exit %d, stdout %q", r.Code, r.Stdout)
	}
	wantStats(t, k, 0, 0)
}

func TestSpoolUsageErrors(t *testing.T) {
	cases := []struct {
		args []string
		env  []string
	}{
		{[]string{"spool"}, nil},
		{[]string{"spool", "bogus"}, nil},
		{[]string{"spool", "list", "extra"}, nil},
		{[]string{"spool", "list", "--bogus"}, nil},
		{[]string{"spool", "stats", "--watch"}, nil},
		{[]string{"spool", "list", "--all"}, nil},
		{[]string{"spool", "purge"}, nil},
		{[]string{"spool", "flush"}, nil}, // no monitor configured
		{[]string{"spool", "flush", "--interval", "0s"}, []string{"PADDLE_MONITOR_URL=http://127.0.0.1:9"}},
		{[]string{"spool", "flush", "--interval", "soon"}, []string{"PADDLE_MONITOR_URL=http://127.0.0.1:9"}},
		{[]string{"spool", "stats"}, []string{"PADDLE_SPOOL_PATH=off"}},
		{[]string{"spool", "stats", "--spool-max", "many"}, nil},
	}
	for _, c := range cases {
		t.Run(fmt.Sprint(c.args, c.env), func(t *testing.T) {
			k := newTask(t, c.args...)
			for _, kv := range c.env {
				key, v, _ := strings.Cut(kv, "=")
				k.Setenv(key, v)
			}
			r := k.Run()
			if r.Code != 2 || r.Stdout != "" || r.Stderr == "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want a usage error (2)", r.Code, r.Stdout, r.Stderr)
			}
		})
	}
}

// Settings come from flags as in run mode: --spool-path names the file.
func TestSpoolSettingsFromFlags(t *testing.T) {
	m := newRegMonitor(t, "503")
	k := newTask(t)
	spoolPending(t, k, m, "sp-flag-1")
	other := newTask(t) // its own PADDLE_SPOOL_PATH is elsewhere and empty
	r := spoolRun(other, "list", "--spool-path", k.SpoolPath())
	if r.Code != 0 || !strings.Contains(r.Stdout, `"task_id":"sp-flag-1"`) {
		t.Errorf("exit %d, stdout %q\n%s", r.Code, r.Stdout, r.Stderr)
	}
}

// requeue and purge --dead act on every kind of entry the file holds: the
// dead registrations and the dead completions, in one transaction, and
// print the count of both together. A requeued completion comes back as
// new (no attempts, no answer), and is still sent only after its task's
// registration.
func TestSpoolRequeuePurgeEveryKind(t *testing.T) {
	k := newTask(t)
	ctx := context.Background()
	s := spool.New(spool.Options{Path: k.SpoolPath()})
	dead := func() {
		t.Helper()
		for _, id := range []string{"kind-a", "kind-b"} {
			e := spool.Entry{TaskID: id, Payload: []byte(`{"task_id":"` + id + `"}`), Fingerprint: spool.FingerprintNone}
			if err := s.Registrations().BuryNew(ctx, e, "400 Bad Request"); err != nil {
				t.Fatal(err)
			}
			if err := s.Completions().BuryNew(ctx, e, "422 Unprocessable Entity"); err != nil {
				t.Fatal(err)
			}
		}
		e := spool.Entry{TaskID: "kind-c", Payload: []byte(`{"task_id":"kind-c"}`), Fingerprint: spool.FingerprintNone}
		if err := s.Completions().BuryNew(ctx, e, "400 Bad Request"); err != nil {
			t.Fatal(err)
		}
	}
	counts := func() [4]int {
		t.Helper()
		st := spoolStats(t, k)
		return [4]int{st["pending"], st["dead"], st["completions_pending"], st["completions_dead"]}
	}

	dead()
	if got := counts(); got != [4]int{0, 2, 0, 3} {
		t.Fatalf("before: pending, dead, completions pending, completions dead = %v, want [0 2 0 3]", got)
	}
	r := spoolRun(k, "requeue")
	if r.Code != 0 || strings.TrimSpace(r.Stdout) != `{"requeued":5}` {
		t.Fatalf("requeue: exit %d, stdout %q\n%s", r.Code, r.Stdout, r.Stderr)
	}
	if got := counts(); got != [4]int{2, 0, 3, 0} {
		t.Errorf("after requeue: %v, want [2 0 3 0]", got)
	}
	c := *k
	c.Args = []string{"spool", "list", "--completions"}
	r = c.Run()
	if r.Code != 0 {
		t.Fatalf("list --completions: exit %d\n%s", r.Code, r.Stderr)
	}
	var ids []string
	for _, line := range strings.Split(strings.TrimSpace(r.Stdout), "\n") {
		var e spoolEntry
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("list --completions: %q: %v", line, err)
		}
		if e.Attempts != 0 || e.Answer != "" {
			t.Errorf("requeued completion %s: attempts %d, answer %q; want 0 and none", e.TaskID, e.Attempts, e.Answer)
		}
		ids = append(ids, e.TaskID)
	}
	if !slices.Equal(ids, []string{"kind-a", "kind-b", "kind-c"}) {
		t.Errorf("requeued completions %q, want kind-a, kind-b, kind-c", ids)
	}

	// Purge: the dead letters of both kinds; the pending entries stay.
	dead()
	r = spoolRun(k, "purge", "--dead")
	if r.Code != 0 || strings.TrimSpace(r.Stdout) != `{"purged":5}` {
		t.Fatalf("purge --dead: exit %d, stdout %q\n%s", r.Code, r.Stdout, r.Stderr)
	}
	if got := counts(); got != [4]int{2, 0, 3, 0} {
		t.Errorf("after purge: %v, want [2 0 3 0]", got)
	}
}
