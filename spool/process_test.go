package spool

// Tests that need more than one process: a writer killed with SIGKILL,
// writers in several processes, a lock held elsewhere, an unprivileged user.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// helper returns a command running this test binary as the named helper.
func helper(t *testing.T, name string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append([]string{helperEnv + "=" + name}, env...)...)
	return cmd
}

// crashPad is how much padding the crash writer gives task n: varied, up to
// a few pages, so that commits split pages and use overflow pages.
func crashPad(n int) int { return (n * 977) % 9000 }

// crashWriter enqueues entries until it is killed, printing each task id
// once Enqueue has returned.
func crashWriter(path, prefix string) int {
	s := New(Options{Path: path, MaxEntries: 1 << 20, LockTimeout: 10 * time.Second})
	out := bufio.NewWriter(os.Stdout)
	for n := 0; ; n++ {
		id := prefix + "-" + strconv.Itoa(n)
		if _, err := s.Registrations().Enqueue(context.Background(), Entry{TaskID: id, Payload: body(id, crashPad(n))}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Fprintln(out, id)
		out.Flush()
	}
}

func TestSpoolCrashSafety(t *testing.T) {
	if testing.Short() {
		t.Skip("kills 20 writer processes")
	}
	path := filepath.Join(t.TempDir(), "spool-0.db")
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	acked := map[string]bool{}
	for iter := range 20 {
		cmd := helper(t, "crash-writer", "SPOOL_TEST_PATH="+path, "SPOOL_TEST_PREFIX=w"+strconv.Itoa(iter))
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan []string)
		go func() {
			b, _ := io.ReadAll(stdout)
			lines <- strings.Fields(string(b))
		}()
		time.Sleep(time.Duration(5+rng.IntN(46)) * time.Millisecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		for _, id := range <-lines {
			acked[id] = true
		}
		if err := cmd.Wait(); err == nil || stderr.Len() > 0 {
			t.Fatalf("writer %d ended with %v, not by the kill: %s", iter, err, stderr.String())
		}
	}
	t.Logf("%d entries acknowledged by writers killed at random", len(acked))
	if len(acked) == 0 {
		t.Fatal("no writer got an entry in before being killed: the test proves nothing")
	}

	// bbolt's own consistency check: every page reachable once, no page
	// both free and in use.
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatalf("the file does not open after the kills: %v", err)
	}
	var problems []error
	err = db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			problems = append(problems, err)
		}
		return errors.Join(problems...)
	})
	db.Close()
	if err != nil {
		t.Fatalf("bbolt check: %v", err)
	}
	fi, _ := os.Stat(path)
	if err := checkMeta(openFile(t, path), fi.Size()); err != nil {
		t.Fatalf("meta pages after the kills: %v", err)
	}

	s, lb := testSpool(t, Options{Path: path})
	es, err := s.Registrations().List(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	if aside := asideFiles(t, path); len(aside) > 0 {
		t.Fatalf("a killed writer left a file taken for corrupt: %v\n%s", aside, lb)
	}
	seen := map[string]bool{}
	for _, e := range es {
		if seen[e.TaskID] {
			t.Errorf("%s is there twice", e.TaskID)
		}
		seen[e.TaskID] = true
		n, err := strconv.Atoi(e.TaskID[strings.IndexByte(e.TaskID, '-')+1:])
		if err != nil {
			t.Fatalf("unexpected task id %q", e.TaskID)
		}
		if want := body(e.TaskID, crashPad(n)); string(e.Payload) != string(want) {
			t.Errorf("%s: payload of %d bytes differs from the %d bytes written", e.TaskID, len(e.Payload), len(want))
		}
	}
	for id := range acked {
		if !seen[id] {
			t.Errorf("%s was acknowledged by Enqueue but is gone", id)
		}
	}
	if st := stats(t, s); st.Pending != len(es) || st.Dead != 0 || st.Dropped != 0 {
		t.Errorf("stats %+v disagree with the %d entries listed", st, len(es))
	}
	t.Logf("%d entries in the file (%d acknowledged, the rest committed just before a kill)", len(es), len(acked))
}

func openFile(t *testing.T, path string) *os.File {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// concurrentWriter enqueues 10 entries from each of 4 goroutines.
func concurrentWriter(path, prefix string) int {
	if err := writeConcurrently(path, prefix, 4, 10); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func writeConcurrently(path, prefix string, goroutines, each int) error {
	s := New(Options{Path: path, MaxEntries: 10000, LockTimeout: 30 * time.Second})
	var wg sync.WaitGroup
	errs := make(chan error, goroutines*each)
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				id := fmt.Sprintf("%s-%d-%d", prefix, g, i)
				if _, err := s.Registrations().Enqueue(context.Background(), Entry{TaskID: id, Payload: body(id, 100)}); err != nil {
					errs <- fmt.Errorf("%s: %w", id, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return errors.Join(slices.Collect(func(yield func(error) bool) {
		for err := range errs {
			if !yield(err) {
				return
			}
		}
	})...)
}

func TestSpoolConcurrentWriters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "spool-0.db")
	const procs = 3
	var cmds []*exec.Cmd
	var outs []*strings.Builder
	for p := range procs {
		cmd := helper(t, "writer", "SPOOL_TEST_PATH="+path, "SPOOL_TEST_PREFIX=p"+strconv.Itoa(p))
		out := &strings.Builder{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, outs = append(cmds, cmd), append(outs, out)
	}
	// This process writes too, from as many goroutines.
	if err := writeConcurrently(path, "local", 4, 10); err != nil {
		t.Error(err)
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("writer process %d: %v\n%s", i, err, outs[i])
		}
	}
	s, _ := testSpool(t, Options{Path: path})
	es, err := s.Registrations().List(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, prefix := range []string{"local", "p0", "p1", "p2"} {
		for g := range 4 {
			for i := range 10 {
				want = append(want, fmt.Sprintf("%s-%d-%d", prefix, g, i))
			}
		}
	}
	got := taskIDs(es)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("%d entries after concurrent writers, want %d", len(got), len(want))
	}
	ids := map[uint64]bool{}
	for _, e := range es {
		if ids[e.ID] {
			t.Errorf("id %d given twice", e.ID)
		}
		ids[e.ID] = true
	}
}

// holdLock takes the spool file's lock the way another process's bbolt
// does: flock(2) on a descriptor of its own.
func holdLock(t *testing.T, path string, how int) (release func()) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	return func() { f.Close() }
}

func TestSpoolLockedFile(t *testing.T) {
	ctx := context.Background()
	const timeout = 300 * time.Millisecond
	const margin = 700 * time.Millisecond // a loaded CI machine

	for _, content := range []string{"valid", "corrupt"} {
		t.Run(content, func(t *testing.T) {
			s, lb := testSpool(t, Options{LockTimeout: timeout})
			path := s.Path()
			enqueue(t, s, "before")
			if content == "corrupt" {
				if err := os.WriteFile(path, []byte(strings.Repeat("not bbolt ", 1000)), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			before, _ := os.ReadFile(path)
			release := holdLock(t, path, syscall.LOCK_EX)

			for _, op := range []struct {
				name string
				run  func() error
			}{
				{"Enqueue", func() error {
					_, err := s.Registrations().Enqueue(ctx, Entry{TaskID: "x", Payload: body("x", 1)})
					return err
				}},
				{"Stats", func() error { _, err := s.Registrations().Stats(ctx); return err }},
				{"Oldest", func() error { _, err := s.Registrations().Oldest(ctx, 1); return err }},
				{"Delete", func() error { return s.Registrations().Delete(ctx, 1) }},
			} {
				start := time.Now()
				err := op.run()
				took := time.Since(start)
				if !errors.Is(err, ErrLocked) {
					t.Errorf("%s with the lock held elsewhere: %v, want ErrLocked", op.name, err)
				}
				if took < timeout-10*time.Millisecond || took > timeout+margin {
					t.Errorf("%s gave up after %v, want about %v", op.name, took, timeout)
				}
			}

			// A context deadline shorter than the lock timeout wins.
			long := New(Options{Path: path, LockTimeout: time.Minute})
			dctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			start := time.Now()
			_, err := long.Registrations().Enqueue(dctx, Entry{TaskID: "x", Payload: body("x", 1)})
			cancel()
			if took := time.Since(start); !errors.Is(err, ErrLocked) || took > 100*time.Millisecond+margin {
				t.Errorf("Enqueue with a 100ms context: %v after %v", err, took)
			}
			// A cancelled context (a signal) stops the wait at once.
			cctx, cancel := context.WithCancel(ctx)
			go func() { time.Sleep(50 * time.Millisecond); cancel() }()
			start = time.Now()
			_, err = long.Registrations().Enqueue(cctx, Entry{TaskID: "x", Payload: body("x", 1)})
			if took := time.Since(start); !errors.Is(err, context.Canceled) || took > 50*time.Millisecond+margin {
				t.Errorf("Enqueue cancelled after 50ms: %v after %v", err, took)
			}

			release()
			after, _ := os.ReadFile(path)
			if string(before) != string(after) || len(asideFiles(t, path)) > 0 {
				t.Fatalf("a locked file was changed or renamed aside:\n%s", lb)
			}
			// Once free, the spool works again (the corrupt one is renamed now).
			enqueue(t, s, "after")
		})
	}
}

// Readers share the lock; a writer waits for them.
func TestSpoolSharedLock(t *testing.T) {
	s, _ := testSpool(t, Options{LockTimeout: 200 * time.Millisecond})
	enqueue(t, s, "a")
	release := holdLock(t, s.Path(), syscall.LOCK_SH)
	defer release()
	if st, err := s.Registrations().Stats(context.Background()); err != nil || st.Pending != 1 {
		t.Errorf("Stats under another reader's lock: %+v, %v", st, err)
	}
	if es, err := s.Registrations().List(context.Background(), false); err != nil || len(es) != 1 {
		t.Errorf("List under another reader's lock: %v, %v", es, err)
	}
	if _, err := s.Registrations().Enqueue(context.Background(), Entry{TaskID: "b", Payload: body("b", 1)}); !errors.Is(err, ErrLocked) {
		t.Errorf("Enqueue under a reader's lock: %v, want ErrLocked", err)
	}
}

func TestSpoolUnavailablePath(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "a-file")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, _ := testSpool(t, Options{Path: filepath.Join(file, "spool-0.db")})
	_, err := s.Registrations().Enqueue(context.Background(), Entry{TaskID: "a", Payload: body("a", 1)})
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, syscall.ENOTDIR) {
		t.Errorf("Enqueue below a regular file: %v, want ErrUnavailable (ENOTDIR)", err)
	}
	if _, err := s.Registrations().Stats(context.Background()); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Stats below a regular file: %v, want ErrUnavailable", err)
	}
}

// unprivileged runs as uid 65534 in a tree root prepared (see
// TestSpoolUnprivileged) and reports every failed expectation on stderr.
func unprivileged(dir string) int {
	ctx := context.Background()
	var fails []string
	fail := func(format string, a ...any) { fails = append(fails, fmt.Sprintf(format, a...)) }
	entry := Entry{TaskID: "u", Payload: body("u", 1)}
	sp := func(path string) *Spool {
		return New(Options{Path: path, MaxEntries: 10, LockTimeout: 200 * time.Millisecond})
	}

	// A directory this user cannot write: the file cannot be created.
	if _, err := sp(filepath.Join(dir, "rootdir", "spool-65534.db")).Registrations().Enqueue(ctx, entry); !errors.Is(err, ErrUnavailable) || !errors.Is(err, os.ErrPermission) {
		fail("Enqueue in an unwritable directory: %v", err)
	}
	// nor the directory.
	if _, err := sp(filepath.Join(dir, "rootdir", "sub", "spool-65534.db")).Registrations().Enqueue(ctx, entry); !errors.Is(err, ErrUnavailable) {
		fail("Enqueue needing a directory it cannot make: %v", err)
	}
	// Another user's spool, readable: not trusted, so not even read (its
	// entries are that user's labels), and never written.
	valid := sp(filepath.Join(dir, "rootdir", "spool-0.db"))
	if es, err := valid.Registrations().List(ctx, false); !errors.Is(err, ErrUntrusted) || len(es) != 0 {
		fail("List of another user's readable spool: %v, %v", es, err)
	}
	if _, err := valid.Registrations().Enqueue(ctx, entry); !errors.Is(err, ErrUnavailable) {
		fail("Enqueue into a read-only spool: %v", err)
	}
	if err := valid.Registrations().Delete(ctx, 1); !errors.Is(err, ErrUnavailable) {
		fail("Delete in a read-only spool: %v", err)
	}
	// Not even readable.
	if _, err := sp(filepath.Join(dir, "rootdir", "spool-private.db")).Registrations().Stats(ctx); !errors.Is(err, ErrUnavailable) {
		fail("Stats of an unreadable spool: %v", err)
	}
	// A corrupt file it may not rename.
	corrupt := sp(filepath.Join(dir, "rootdir", "spool-corrupt.db"))
	if _, err := corrupt.Registrations().Stats(ctx); !errors.Is(err, ErrUnavailable) || !errors.Is(err, ErrUntrusted) {
		fail("Stats of a corrupt file it may not rename: %v", err)
	}
	if _, err := corrupt.Registrations().Enqueue(ctx, entry); !errors.Is(err, ErrUnavailable) {
		fail("Enqueue into a corrupt file it may not rename: %v", err)
	}
	if len(fails) > 0 {
		fmt.Fprintln(os.Stderr, strings.Join(fails, "\n"))
		return 1
	}
	return 0
}

func TestSpoolUnprivileged(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to prepare files of another user and drop privileges")
	}
	// Directories 65534 can traverse, unlike t.TempDir's.
	top, err := os.MkdirTemp("", "spool-unpriv-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(top) })
	if err := os.Chmod(top, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(top, "spool.test")
	exe, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, exe, 0o755); err != nil {
		t.Fatal(err)
	}
	rootdir := filepath.Join(top, "rootdir")
	if err := os.Mkdir(rootdir, 0o755); err != nil {
		t.Fatal(err)
	}
	s, _ := testSpool(t, Options{Path: filepath.Join(rootdir, "spool-0.db")})
	enqueue(t, s, "root-entry")
	if err := os.Chmod(s.Path(), 0o644); err != nil {
		t.Fatal(err)
	}
	s2, _ := testSpool(t, Options{Path: filepath.Join(rootdir, "spool-private.db")})
	enqueue(t, s2, "private")
	if err := os.WriteFile(filepath.Join(rootdir, "spool-corrupt.db"), []byte(strings.Repeat("garbage ", 100)), 0o644); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, rootdir)

	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=unprivileged", "SPOOL_TEST_DIR="+top)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("as uid 65534: %v\n%s", err, out)
	}
	if after := snapshot(t, rootdir); !maps.Equal(before, after) {
		t.Errorf("files changed, created or renamed:\nbefore %v\nafter  %v", before, after)
	}
}

// snapshot maps each file's name in dir to its content.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, e := range ents {
		b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		m[e.Name()] = string(b)
	}
	return m
}
