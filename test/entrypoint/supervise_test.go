package entrypoint

// Black-box tests of supervise mode (docs/supervise.md): the command as a
// child of the entrypoint, what it inherits, exit statuses, signals,
// reaping (as a subreaper here; as PID 1 in supervise_pid1_test.go), and
// the completion report with its spool, budget and heartbeat.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/test/harness"
)

// supTask is a task in supervise mode.
func supTask(t *testing.T, args ...string) *task {
	t.Helper()
	return newTask(t, args...).Setenv("PADDLE_ENTRYPOINT_MODE", "supervise")
}

// live is an entrypoint running in the background, its stdout read line by
// line.
type live struct {
	t      *testing.T
	cmd    *exec.Cmd
	lines  chan string
	stderr *syncBuffer
	done   chan struct{}
	code   int
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startLive starts c (an entrypoint, or a wrapper of one).
func startLive(t *testing.T, c *exec.Cmd) *live {
	t.Helper()
	l := &live{t: t, cmd: c, lines: make(chan string, 1000), stderr: &syncBuffer{}, done: make(chan struct{})}
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c.Stderr = l.stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			l.lines <- sc.Text()
		}
		close(l.lines)
		l.code = exitCode(c.Wait())
		close(l.done)
	}()
	t.Cleanup(func() {
		for _, pid := range descendants(c.Process.Pid) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		c.Process.Kill()
		select {
		case <-l.done:
		case <-time.After(5 * time.Second):
			t.Errorf("stdout still open 5s after the entrypoint was killed")
		}
	})
	return l
}

// next returns the next line of stdout, failing after 10 s.
func (l *live) next(after ...any) string {
	l.t.Helper()
	select {
	case s, ok := <-l.lines:
		if !ok {
			l.t.Fatalf("stdout ended%v; stderr:\n%s", after, l.stderr.String())
		}
		return s
	case <-time.After(10 * time.Second):
		l.t.Fatalf("no line on stdout within 10s%v; stderr:\n%s", after, l.stderr.String())
	}
	return ""
}

// wait returns the exit status, failing after 20 s.
func (l *live) wait() int {
	l.t.Helper()
	for {
		select {
		case _, ok := <-l.lines:
			if ok {
				continue
			}
			select {
			case <-l.done:
				return l.code
			case <-time.After(20 * time.Second):
			}
		case <-time.After(20 * time.Second):
		}
		l.t.Fatalf("entrypoint did not exit within 20s; stderr:\n%s", l.stderr.String())
	}
}

// readyPID reads sigcatch's "ready <pid>" line.
func readyPID(l *live) int {
	l.t.Helper()
	line := l.next()
	var pid int
	if _, err := fmt.Sscanf(line, "ready %d", &pid); err != nil {
		l.t.Fatalf("want a ready line, got %q", line)
	}
	return pid
}

func TestSuperviseChildInherits(t *testing.T) {
	// A caller that blocks SIGTERM and SIGUSR1 and ignores SIGHUP, and
	// passes descriptor 3: the command starts as in exec mode, but as the
	// entrypoint's child.
	argv := []string{bin.report, "plain", "with space", "", "nl\nhere", "\xff non-UTF-8", "--lr", "0.1"}
	k := supTask(t)
	k.Setenv("WEIRD", "a=b=c \x01\xff")
	k.Setenv("PADDLE_TASK_ID", "sup-1")
	cwd := t.TempDir()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := exec.CommandContext(ctx, bin.sigwrap, append([]string{"-b", "15", "-b", "10", "-i", "1", "--", bin.entrypoint}, argv...)...)
	c.Env, c.Dir, c.ExtraFiles = k.Env, cwd, []*os.File{r}
	var stderr bytes.Buffer
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	rep := parseReport(t, string(out))
	if rep.PPID != c.Process.Pid || rep.PID == c.Process.Pid {
		t.Errorf("command PID %d, parent %d; entrypoint PID %d: want the entrypoint's child", rep.PID, rep.PPID, c.Process.Pid)
	}
	if !slices.Equal(rep.Argv, argv) {
		t.Errorf("argv %q, want %q", rep.Argv, argv)
	}
	// Exec mode's environment: the caller's, PADDLE_TASK_ID, and the OTel
	// resource attributes.
	otel, _ := rep.Getenv("OTEL_RESOURCE_ATTRIBUTES")
	if !strings.Contains(otel, "paddle.task.id=sup-1") {
		t.Errorf("OTEL_RESOURCE_ATTRIBUTES %q lacks the task id", otel)
	}
	wantEnv := append(slices.Clone(k.Env[:len(k.Env)-1]), "PADDLE_TASK_ID=sup-1", "OTEL_RESOURCE_ATTRIBUTES="+otel)
	if !slices.Equal(rep.Env, wantEnv) {
		t.Errorf("environment:\n got %q\nwant %q", rep.Env, wantEnv)
	}
	if rep.Cwd != cwd {
		t.Errorf("cwd %q, want %q", rep.Cwd, cwd)
	}
	if rep.SigBlk != "0000000000000000" {
		t.Errorf("SigBlk = %s, want no blocked signal", rep.SigBlk)
	}
	checkIgnored(t, rep.SigIgn, callerIgnored(t)|1<<(syscall.SIGHUP-1))
	direct := exec.CommandContext(ctx, bin.report)
	direct.ExtraFiles = []*os.File{r}
	dout, err := direct.Output()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fdNumbers(rep), fdNumbers(parseReport(t, string(dout))); got != want || !strings.Contains(got, " 3 ") {
		t.Errorf("descriptors through the supervisor %q, started directly %q", got, want)
	}
}

func TestSuperviseUmaskAndLimits(t *testing.T) {
	k := supTask(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := exec.CommandContext(ctx, "/bin/sh", "-c", `umask 027; ulimit -Sn 300; ulimit -Hn 700; exec "$@"`, "sh", bin.entrypoint, bin.report)
	c.Env = k.Env
	out, err := c.Output()
	if err != nil {
		t.Fatal(err)
	}
	rep := parseReport(t, string(out))
	if rep.Umask != "0027" || !strings.Contains(strings.Join(rep.Limits, "\n"), "Max open files            300                  700") {
		t.Errorf("umask %s, limits:\n%s", rep.Umask, strings.Join(rep.Limits, "\n"))
	}
}

// exitMatrix is tini's and dumb-init's exit-status check: every status
// 0-255 passes through.
func exitMatrix(t *testing.T, wrap func(*task) *task) {
	for code := 0; code <= 255; code++ {
		k := wrap(supTask(t, "/bin/sh", "-c", "exit "+strconv.Itoa(code)))
		if r := k.Run(); r.Code != code {
			t.Fatalf("command exited %d, supervisor %d\n%s", code, r.Code, r.Stderr)
		}
	}
}

// fatalSignals kill a shell that sends them to itself.
var fatalSignals = []syscall.Signal{
	syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGILL, syscall.SIGTRAP, syscall.SIGABRT,
	syscall.SIGBUS, syscall.SIGFPE, syscall.SIGKILL, syscall.SIGUSR1, syscall.SIGSEGV, syscall.SIGUSR2,
	syscall.SIGPIPE, syscall.SIGALRM, syscall.SIGTERM, syscall.SIGXCPU, syscall.SIGVTALRM, syscall.SIGSYS,
}

// signalMatrix: a command killed by signal N makes the supervisor exit 128+N.
func signalMatrix(t *testing.T, wrap func(*task) *task) {
	for _, s := range fatalSignals {
		k := wrap(supTask(t, "/bin/sh", "-c", fmt.Sprintf("kill -%d $$", int(s))))
		if r := k.Run(); r.Code != 128+int(s) {
			t.Errorf("command killed by %v: supervisor exit %d, want %d\n%s", s, r.Code, 128+int(s), r.Stderr)
		}
	}
}

func asIs(k *task) *task { return k }

func TestSuperviseExitCodes(t *testing.T) {
	t.Run("0-255", func(t *testing.T) { exitMatrix(t, asIs) })
	t.Run("128+signal", func(t *testing.T) { signalMatrix(t, asIs) })
	t.Run("cannot start", func(t *testing.T) {
		dir := t.TempDir()
		notExec := dir + "/not-executable"
		os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644)
		badInterp := dir + "/bad-interpreter"
		os.WriteFile(badInterp, []byte("#!/nonexistent/sh\n"), 0o755)
		for args, want := range map[string]int{"no-such-command-xyz": 127, notExec: 126, badInterp: 127, dir: 126} {
			if r := supTask(t, args).Run(); r.Code != want {
				t.Errorf("%s: exit %d, want %d\n%s", args, r.Code, want, r.Stderr)
			}
		}
	})
	t.Run("exec stays the default", func(t *testing.T) {
		k := newTask(t, bin.report)
		c := k.Command(context.Background())
		out, err := c.Output()
		if err != nil {
			t.Fatal(err)
		}
		if rep := parseReport(t, string(out)); rep.PID != c.Process.Pid {
			t.Errorf("without PADDLE_ENTRYPOINT_MODE the command ran as PID %d, not in place of %d", rep.PID, c.Process.Pid)
		}
	})
	t.Run("--supervise and --mode", func(t *testing.T) {
		for _, args := range [][]string{{"--supervise"}, {"--mode", "supervise"}, {"--mode=supervise"}} {
			k := newTask(t, append(args, bin.report)...)
			c := k.Command(context.Background())
			out, err := c.Output()
			if err != nil {
				t.Fatal(err)
			}
			if rep := parseReport(t, string(out)); rep.PPID != c.Process.Pid {
				t.Errorf("%q: command's parent %d, entrypoint %d", args, rep.PPID, c.Process.Pid)
			}
		}
		if r := newTask(t, "--mode", "exec", "--supervise", "/bin/true").Run(); r.Code != 2 {
			t.Errorf("--mode exec --supervise: exit %d, want the usage error 2", r.Code)
		}
		if r := newTask(t, "--mode", "watch", "/bin/true").Run(); r.Code != 2 {
			t.Errorf("--mode watch: exit %d, want 2", r.Code)
		}
	})
}

// forwarded are the signals a supervisor passes on (SIGTERM last: it ends
// sigcatch). Signals 32, 33 and 34 (glibc's own and SIGRTMIN), and
// SIGPROF (the Go runtime's profiler's), are never handed to a Go program,
// so they are not forwarded (docs/supervise.md).
func forwarded() []syscall.Signal {
	var out []syscall.Signal
	for n := 1; n <= 64; n++ {
		s := syscall.Signal(n)
		if n == 32 || n == 33 || n == 34 || s == syscall.SIGPROF || s == syscall.SIGTERM || s == syscall.SIGKILL || s == syscall.SIGSTOP || dropped[s] {
			continue
		}
		out = append(out, s)
	}
	return out
}

var dropped = map[syscall.Signal]bool{
	syscall.SIGCHLD: true, syscall.SIGURG: true, syscall.SIGTTIN: true, syscall.SIGTTOU: true,
	syscall.SIGSEGV: true, syscall.SIGBUS: true, syscall.SIGILL: true, syscall.SIGFPE: true,
	syscall.SIGTRAP: true, syscall.SIGSYS: true, syscall.SIGABRT: true,
}

// checkForwarding sends every signal to the supervisor (PID sup) and reads
// what sigcatch (PID child) received: dumb-init's proxies_signals_test, and
// tini's, for every signal. The command's SIGTERM handler decides the exit.
//
// A signal the caller ignored (this test process's parent may ignore SIGHUP)
// stays ignored and is not forwarded: it joins the dropped ones.
func checkForwarding(t *testing.T, l *live, sup, child int) {
	ignored := callerIgnored(t)
	notForwarded := maps.Clone(dropped)
	for _, s := range forwarded() {
		if ignored&(1<<(s-1)) != 0 {
			notForwarded[s] = true
			continue
		}
		if err := syscall.Kill(sup, s); err != nil {
			t.Fatal(err)
		}
		if got, want := l.next(" after", s, int(s)), fmt.Sprintf("%d %d", child, int(s)); got != want {
			t.Fatalf("sent %v (%d): the command printed %q, want %q", s, int(s), got, want)
		}
	}
	for s := range notForwarded {
		if err := syscall.Kill(sup, s); err != nil {
			t.Fatal(err)
		}
	}
	syscall.Kill(sup, syscall.SIGUSR1)
	if got, want := l.next(), fmt.Sprintf("%d %d", child, int(syscall.SIGUSR1)); got != want {
		t.Fatalf("after the signals that are never forwarded, the command printed %q, want only the marker %q", got, want)
	}
	syscall.Kill(sup, syscall.SIGTERM)
	if got := l.next(); got != fmt.Sprintf("%d %d", child, int(syscall.SIGTERM)) {
		t.Fatalf("SIGTERM: the command printed %q", got)
	}
	if code := l.wait(); code != 3 {
		t.Errorf("exit %d, want 3 (the command's SIGTERM handler's choice)\n%s", code, l.stderr.String())
	}
}

func TestSuperviseForwardsSignals(t *testing.T) {
	k := supTask(t, bin.sigcatch)
	k.Setenv("SIGCATCH_TERM_EXIT", "3")
	l := startLive(t, k.Command(context.Background()))
	checkForwarding(t, l, l.cmd.Process.Pid, readyPID(l))
}

func TestSuperviseSignalGroup(t *testing.T) {
	t.Run("group", func(t *testing.T) {
		k := supTask(t, bin.sigcatch, "-f")
		k.Setenv("PADDLE_SIGNAL_GROUP", "1")
		l := startLive(t, k.Command(context.Background()))
		pids := []int{readyPID(l), readyPID(l)}
		syscall.Kill(l.cmd.Process.Pid, syscall.SIGUSR1)
		got := []string{l.next(), l.next()}
		slices.Sort(got)
		want := []string{fmt.Sprintf("%d 10", pids[0]), fmt.Sprintf("%d 10", pids[1])}
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("SIGUSR1 to the supervisor: %q, want both processes of the group %q", got, want)
		}
		syscall.Kill(l.cmd.Process.Pid, syscall.SIGTERM)
		l.next()
		l.next()
		if code := l.wait(); code != 0 {
			t.Errorf("exit %d", code)
		}
	})
	t.Run("flag", func(t *testing.T) {
		k := newTask(t, "--supervise", "--signal-group", bin.sigcatch, "-f")
		l := startLive(t, k.Command(context.Background()))
		readyPID(l)
		readyPID(l)
		syscall.Kill(l.cmd.Process.Pid, syscall.SIGTERM)
		l.next()
		l.next()
		if code := l.wait(); code != 0 {
			t.Errorf("exit %d", code)
		}
	})
	t.Run("child only by default", func(t *testing.T) {
		k := supTask(t, bin.sigcatch, "-f")
		l := startLive(t, k.Command(context.Background()))
		a, b := readyPID(l), readyPID(l)
		// The command is whichever is the supervisor's child.
		main, forked := a, b
		if ppid(t, b) == l.cmd.Process.Pid {
			main, forked = b, a
		}
		defer syscall.Kill(forked, syscall.SIGKILL)
		syscall.Kill(l.cmd.Process.Pid, syscall.SIGUSR1)
		if got := l.next(); got != fmt.Sprintf("%d 10", main) {
			t.Fatalf("SIGUSR1: %q, want the command %d only", got, main)
		}
		syscall.Kill(forked, syscall.SIGUSR2)
		if got := l.next(); got != fmt.Sprintf("%d 12", forked) {
			t.Errorf("the command's own child printed %q first: it got the supervisor's SIGUSR1", got)
		}
	})
}

// descendants returns the processes below pid, from /proc.
func descendants(pid int) []int {
	parent := map[int]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			parent[n] = ppid(nil, n)
		}
	}
	var out []int
	for n := range parent {
		for p := parent[n]; p > 1; p = parent[p] {
			if p == pid {
				out = append(out, n)
				break
			}
		}
	}
	return out
}

// ppid returns the parent of pid, from /proc.
func ppid(t *testing.T, pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	n, _ := strconv.Atoi(f[1])
	return n
}

func TestSuperviseReapsOrphans(t *testing.T) {
	// Not PID 1: the supervisor is a child subreaper, so the command's
	// orphan is re-parented to it, and reaped when it exits.
	k := supTask(t, bin.sigcatch, "-o")
	l := startLive(t, k.Command(context.Background()))
	// sigcatch prints its own SIGCHLD (its child exits at once), its ready
	// line and its orphan's pid, in any order.
	var orphan, ready int
	for orphan == 0 || ready == 0 {
		line := l.next()
		fmt.Sscanf(line, "orphan %d", &orphan)
		fmt.Sscanf(line, "ready %d", &ready)
	}
	sup := l.cmd.Process.Pid
	deadline := time.Now().Add(10 * time.Second)
	adopted := false
	for time.Now().Before(deadline) {
		p := ppid(t, orphan)
		if p == 0 {
			break // exited and reaped
		}
		adopted = adopted || p == sup
		time.Sleep(20 * time.Millisecond)
	}
	if !adopted {
		t.Errorf("the orphan %d was never re-parented to the supervisor %d", orphan, sup)
	}
	if ppid(t, orphan) != 0 {
		t.Errorf("the orphan %d is still there (a zombie?) 10s later", orphan)
	}
	syscall.Kill(sup, syscall.SIGTERM)
	if code := l.wait(); code != 0 {
		t.Errorf("exit %d", code)
	}
}

func TestSuperviseSignalBeforeStart(t *testing.T) {
	// A hung GPU probe holds the start; SIGTERM then ends it with 143, and
	// nothing is registered: the command never ran.
	m := newSupMonitor(t)
	k := gpuTask(t, 1, bin.report)
	k.Setenv("PADDLE_ENTRYPOINT_MODE", "supervise")
	k.Setenv("FAKE_NVML_MODE", "init_hang")
	k.Setenv("PADDLE_GPU_TIMEOUT", "20s")
	k.Setenv("PADDLE_MONITOR_URL", m.URL)
	l := startLive(t, k.Command(context.Background()))
	time.Sleep(300 * time.Millisecond) // let it reach the probe; an earlier signal ends it the same way
	syscall.Kill(l.cmd.Process.Pid, syscall.SIGTERM)
	if code := l.wait(); code != 143 {
		t.Errorf("exit %d, want 143\n%s", code, l.stderr.String())
	}
	if n := len(m.requests("")); n != 0 {
		t.Errorf("%d requests reached the monitor for a command that never ran", n)
	}
	if st := spoolStats(t, k); st["pending"]+st["completions_pending"] != 0 {
		t.Errorf("spool %v, want nothing", st)
	}
}

// supMonitor is a monitor for supervise mode: each endpoint answers with
// its own status, or "hang" (accept, never answer).
type supMonitor struct {
	*httptest.Server
	mu      sync.Mutex
	answers map[string]string // path -> answer; default 201
	reqs    []regRequest
	paths   []string
	stop    chan struct{}
}

func newSupMonitor(t *testing.T) *supMonitor {
	m := &supMonitor{answers: map[string]string{}, stop: make(chan struct{})}
	m.Server = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(func() { close(m.stop); m.Server.Close() })
	return m
}

func (m *supMonitor) answer(path, a string) *supMonitor {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.answers[path] = a
	return m
}

func (m *supMonitor) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	m.mu.Lock()
	a := m.answers[r.URL.Path]
	m.reqs = append(m.reqs, regRequest{At: time.Now(), Header: r.Header.Clone(), Body: body, Answer: a})
	m.paths = append(m.paths, r.URL.Path)
	m.mu.Unlock()
	switch a {
	case "hang":
		select {
		case <-r.Context().Done():
		case <-m.stop:
		}
		return
	case "":
		a = "201"
	}
	code, _ := strconv.Atoi(a)
	w.WriteHeader(code)
}

// requests returns the requests to path ("" : all).
func (m *supMonitor) requests(path string) []regRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []regRequest
	for i, r := range m.reqs {
		if path == "" || m.paths[i] == path {
			out = append(out, r)
		}
	}
	return out
}

// waitFor polls until the monitor received n requests to path.
func (m *supMonitor) waitFor(t *testing.T, path string, n int) []regRequest {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if rs := m.requests(path); len(rs) >= n {
			return rs
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the monitor did not receive %d requests to %s", n, path)
	return nil
}

func TestSuperviseCompletion(t *testing.T) {
	m := newSupMonitor(t)
	k := gpuTask(t, 2, "/bin/sh", "-c", "sleep 0.3; exit 3")
	k.Setenv("PADDLE_ENTRYPOINT_MODE", "supervise")
	k.Setenv("PADDLE_MONITOR_URL", m.URL)
	k.Setenv("PADDLE_GPU_SAMPLE", "0")
	k.Setenv("PADDLE_TASK_ID", "done-1")
	tok := k.Dir + "/token"
	os.WriteFile(tok, []byte("s3cret\n"), 0o600)
	k.Setenv("PADDLE_MONITOR_TOKEN_FILE", tok)
	before := time.Now()
	r := k.Run()
	after := time.Now()
	if r.Code != 3 {
		t.Fatalf("exit %d, want the command's 3\n%s", r.Code, r.Stderr)
	}
	all := m.requests("")
	if len(all) != 2 || m.paths[0] != "/v1/task/register" || m.paths[1] != "/v1/task/complete" {
		t.Fatalf("requests to %q, want the registration then the completion", m.paths)
	}
	c := all[1]
	for h, want := range map[string]string{
		"Content-Type": "application/json", "Idempotency-Key": "done-1/complete",
		"Authorization": "Bearer s3cret", "User-Agent": "paddle-entrypoint/",
	} {
		if got := c.Header.Get(h); !strings.HasPrefix(got, want) {
			t.Errorf("%s: %q, want %q", h, got, want)
		}
	}
	var body map[string]any
	if err := json.Unmarshal(c.Body, &body); err != nil {
		t.Fatal(err)
	}
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range body {
			if !yield(k) {
				return
			}
		}
	})
	wantKeys := []string{"duration_seconds", "end_time", "exit_code", "gpu_count", "gpu_seconds", "gpus", "schema_version", "start_time", "task_id"}
	if !slices.Equal(keys, wantKeys) {
		t.Errorf("completion keys %q, want %q (no signal, no gate, no metrics)", keys, wantKeys)
	}
	labels := labelMap(t, k.LabelsFile())
	dur := body["duration_seconds"].(float64)
	if body["schema_version"] != 1.0 || body["task_id"] != "done-1" || body["exit_code"] != 3.0 || body["gpu_count"] != 2.0 ||
		fmt.Sprint(int64(body["start_time"].(float64))) != labels["start_time"] {
		t.Errorf("completion %s; labels start_time %s", c.Body, labels["start_time"])
	}
	if dur < 0.3 || dur > after.Sub(before).Seconds() {
		t.Errorf("duration_seconds %v outside [0.3, %v]", dur, after.Sub(before).Seconds())
	}
	if gs := body["gpu_seconds"].(float64); math.Abs(gs-2*dur) > 1e-9 {
		t.Errorf("gpu_seconds %v, want 2 × %v", gs, dur)
	}
	end := int64(body["end_time"].(float64))
	if end < before.Unix() || end > after.Unix() {
		t.Errorf("end_time %d outside the run", end)
	}
	gpus, _ := json.Marshal(body["gpus"])
	want := fmt.Sprintf(`[{"energy_estimated":false,"energy_joules":null,"idle_share":null,"memory_used_peak_bytes":null,"samples":0,"share":1,"util_mean":null,"util_p95":null,"uuid":%q},{"energy_estimated":false,"energy_joules":null,"idle_share":null,"memory_used_peak_bytes":null,"samples":0,"share":1,"util_mean":null,"util_p95":null,"uuid":%q}]`, fakeUUID(0), fakeUUID(1))
	if string(gpus) != want {
		t.Errorf("gpus %s\nwant %s", gpus, want)
	}
	// The labels file ends with the end.
	lines := readLabels(t, k.LabelsFile())
	if got := strings.Join(lines[len(lines)-2:], "\n"); got != fmt.Sprintf("end_time=%d\nexit_code=3", end) {
		t.Errorf("labels file ends with %q", got)
	}
	if st := spoolStats(t, k); st["pending"]+st["completions_pending"] != 0 {
		t.Errorf("spool %v after delivery, want empty", st)
	}
}

func TestSuperviseCompletionSignal(t *testing.T) {
	m := newSupMonitor(t)
	k := supTask(t, "/bin/sh", "-c", "kill -9 $$")
	k.Setenv("PADDLE_MONITOR_URL", m.URL)
	if r := k.Run(); r.Code != 137 {
		t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
	}
	var body struct {
		ExitCode int     `json:"exit_code"`
		Signal   string  `json:"signal"`
		GPUs     []any   `json:"gpus"`
		GPUSecs  float64 `json:"gpu_seconds"`
	}
	json.Unmarshal(m.waitFor(t, "/v1/task/complete", 1)[0].Body, &body)
	if body.ExitCode != 137 || body.Signal != "SIGKILL" || body.GPUs == nil || len(body.GPUs) != 0 || body.GPUSecs != 0 {
		t.Errorf("completion %+v", body)
	}
	if m := labelMap(t, k.LabelsFile()); m["exit_code"] != "137" {
		t.Errorf("labels exit_code %q", m["exit_code"])
	}
}

func TestSuperviseMonitorDownThenFlush(t *testing.T) {
	// Refused: the registration and the completion stay in the spool, and
	// spool flush sends them later, the registration first.
	k := supTask(t, "/bin/true")
	k.Setenv("PADDLE_MONITOR_URL", regDownURL(t))
	k.Setenv("PADDLE_TASK_ID", "later-1")
	if r := k.Run(); r.Code != 0 {
		t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
	}
	if st := spoolStats(t, k); st["pending"] != 1 || st["completions_pending"] != 1 {
		t.Fatalf("spool %v, want the registration and the completion", st)
	}
	m := newSupMonitor(t)
	k.Setenv("PADDLE_MONITOR_URL", m.URL)
	if r := spoolRun(k, "flush"); r.Code != 0 {
		t.Fatalf("flush: exit %d\n%s", r.Code, r.Stderr)
	}
	if !slices.Equal(m.paths, []string{"/v1/task/register", "/v1/task/complete"}) {
		t.Errorf("flush sent %q", m.paths)
	}
	if k := m.requests("/v1/task/complete")[0].Key(); k != "later-1/complete" {
		t.Errorf("Idempotency-Key %q", k)
	}
	if st := spoolStats(t, k); st["pending"]+st["completions_pending"] != 0 {
		t.Errorf("spool %v after flush", st)
	}
}

func TestSuperviseCompletionWaitsForRegistration(t *testing.T) {
	// The monitor refuses registrations with 503 but would take the
	// completion: the completion is not sent before its registration.
	m := newSupMonitor(t).answer("/v1/task/register", "503")
	k := supTask(t, "/bin/true")
	k.Setenv("PADDLE_MONITOR_URL", m.URL)
	if r := k.Run(); r.Code != 0 {
		t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
	}
	if n := len(m.requests("/v1/task/complete")); n != 0 {
		t.Errorf("%d completions sent before the registration was delivered", n)
	}
	// A later start (exec mode) delivers the backlog: registration, then completion.
	m.answer("/v1/task/register", "201")
	if r := newTask(t, "/bin/true").Setenv("PADDLE_MONITOR_URL", m.URL).Setenv("PADDLE_SPOOL_PATH", k.SpoolPath()).Run(); r.Code != 0 {
		t.Fatal(r.Stderr)
	}
	if st := spoolStats(t, k); st["pending"]+st["completions_pending"] != 0 {
		t.Errorf("spool %v after a later start, want drained", st)
	}
}

func TestSuperviseWriteAhead(t *testing.T) {
	// The completion is in the spool before its first attempt: killed
	// while that attempt hangs, the supervisor loses nothing.
	m := newSupMonitor(t).answer("/v1/task/complete", "hang")
	k := supTask(t, "/bin/true")
	k.Setenv("PADDLE_MONITOR_URL", m.URL)
	k.Setenv("PADDLE_TASK_ID", "wal-1")
	k.Setenv("PADDLE_COMPLETE_BUDGET", "20s")
	l := startLive(t, k.Command(context.Background()))
	m.waitFor(t, "/v1/task/complete", 1)
	l.cmd.Process.Signal(syscall.SIGKILL)
	l.wait()
	r := spoolRun(k, "list", "--completions")
	var e spoolEntry
	if err := json.Unmarshal([]byte(r.Stdout), &e); err != nil || e.TaskID != "wal-1" || e.Payload["exit_code"] != 0.0 {
		t.Errorf("spooled completions: %q (%v)", r.Stdout, err)
	}
}

func TestSuperviseCompleteBudget(t *testing.T) {
	// A monitor that never answers: the supervisor exits within the
	// completion budget of the command's end, with the command's status,
	// and both reports are in the spool.
	m := newSupMonitor(t).answer("/v1/task/register", "hang").answer("/v1/task/complete", "hang")
	k := supTask(t, "/bin/sh", "-c", "exit 5")
	k.Setenv("PADDLE_MONITOR_URL", m.URL)
	k.Setenv("PADDLE_COMPLETE_BUDGET", "1s")
	r := k.Run()
	if r.Code != 5 {
		t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
	}
	// Start-up, the command and the budget; the margin is for a loaded machine.
	if r.Elapsed > 1*time.Second+regMargin+time.Second {
		t.Errorf("took %v with a 1s completion budget", r.Elapsed)
	}
	if st := spoolStats(t, k); st["pending"] != 1 || st["completions_pending"] != 1 {
		t.Errorf("spool %v, want the registration and the completion kept", st)
	}
}

func TestSuperviseStartDoesNotWaitForMonitor(t *testing.T) {
	// Blackholed: exec mode would wait its 5s registration budget; the
	// command starts at once in supervise mode.
	m := newSupMonitor(t).answer("/v1/task/register", "hang")
	k := supTask(t, bin.sigcatch)
	k.Setenv("PADDLE_MONITOR_URL", m.URL)
	k.Setenv("PADDLE_REGISTER_BUDGET", "5s")
	k.Setenv("PADDLE_COMPLETE_BUDGET", "200ms")
	start := time.Now()
	l := startLive(t, k.Command(context.Background()))
	readyPID(l)
	if d := time.Since(start); d >= 5*time.Second {
		t.Errorf("the command started %v after the entrypoint: it waited for the monitor", d)
	} else {
		t.Logf("command ready %v after start with a blackholed monitor", d)
	}
	if len(m.requests("/v1/task/register")) > 1 {
		t.Error("more than one registration attempt in flight")
	}
	syscall.Kill(l.cmd.Process.Pid, syscall.SIGTERM)
	l.next()
	l.wait()
}

func TestSuperviseHeartbeat(t *testing.T) {
	m := newSupMonitor(t)
	k := supTask(t, "/bin/sh", "-c", "sleep 1")
	k.Setenv("PADDLE_MONITOR_URL", m.URL)
	k.Setenv("PADDLE_HEARTBEAT", "200ms")
	k.Setenv("PADDLE_TASK_ID", "hb-1")
	if r := k.Run(); r.Code != 0 {
		t.Fatal(r.Stderr)
	}
	hb := m.requests("/v1/task/heartbeat")
	if len(hb) < 2 || len(hb) > 6 {
		t.Fatalf("%d heartbeats in a 1s run every 200ms", len(hb))
	}
	comp := m.requests("/v1/task/complete")
	for _, h := range hb {
		var b map[string]any
		json.Unmarshal(h.Body, &b)
		if len(b) != 2 || b["task_id"] != "hb-1" || b["time"] == nil {
			t.Errorf("heartbeat body %s", h.Body)
		}
		if len(comp) == 1 && h.At.After(comp[0].At) {
			t.Error("heartbeat after the completion")
		}
	}
	// Off by default.
	m2 := newSupMonitor(t)
	supTask(t, "/bin/sh", "-c", "sleep 0.5").Setenv("PADDLE_MONITOR_URL", m2.URL).Run()
	if n := len(m2.requests("/v1/task/heartbeat")); n != 0 {
		t.Errorf("%d heartbeats without PADDLE_HEARTBEAT", n)
	}
}

func TestSuperviseNoMonitor(t *testing.T) {
	k := supTask(t, "/bin/true")
	if r := k.Run(); r.Code != 0 || r.Stdout != "" {
		t.Fatalf("exit %d, stdout %q", r.Code, r.Stdout)
	}
	if _, err := os.Stat(k.SpoolPath()); err == nil {
		t.Error("spool file created without a monitor")
	}
}

func TestSuperviseGPUEfficiency(t *testing.T) {
	// The fake driver answers 0 %, 100 %, 0 %, ... and 1000, 3000, 1000,
	// ... bytes used: every figure follows from the number of samples n.
	m := newSupMonitor(t)
	k := gpuTask(t, 1, "/bin/sh", "-c", "sleep 1")
	k.Setenv("PADDLE_ENTRYPOINT_MODE", "supervise")
	k.Setenv("PADDLE_MONITOR_URL", m.URL)
	k.Setenv("PADDLE_GPU_SAMPLE", "100ms")
	k.Setenv("FAKE_NVML_UTIL", "0,100")
	k.Setenv("FAKE_NVML_USED", "1000,3000")
	if r := k.Run(); r.Code != 0 {
		t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
	}
	var body struct {
		GPUs []struct {
			UUID      string   `json:"uuid"`
			Samples   int      `json:"samples"`
			UtilMean  *float64 `json:"util_mean"`
			UtilP95   *float64 `json:"util_p95"`
			MemPeak   *uint64  `json:"memory_used_peak_bytes"`
			IdleShare *float64 `json:"idle_share"`
		} `json:"gpus"`
	}
	json.Unmarshal(m.waitFor(t, "/v1/task/complete", 1)[0].Body, &body)
	if len(body.GPUs) != 1 || body.GPUs[0].UUID != fakeUUID(0) {
		t.Fatalf("gpus %+v", body.GPUs)
	}
	g := body.GPUs[0]
	n := g.Samples
	if n < 3 || n > 12 || g.UtilMean == nil || g.UtilP95 == nil || g.MemPeak == nil || g.IdleShare == nil {
		t.Fatalf("%d samples in a 1s run every 100ms: %+v", n, g)
	}
	zeros := (n + 1) / 2
	if want := 100 * float64(n-zeros) / float64(n); math.Abs(*g.UtilMean-want) > 1e-9 {
		t.Errorf("util_mean %v, want %v", *g.UtilMean, want)
	}
	if *g.UtilP95 != 100 || *g.MemPeak != 3000 {
		t.Errorf("util_p95 %v, peak %v; want 100 and 3000", *g.UtilP95, *g.MemPeak)
	}
	if want := float64(zeros) / float64(n); math.Abs(*g.IdleShare-want) > 1e-9 {
		t.Errorf("idle_share %v, want %v", *g.IdleShare, want)
	}
}

func TestSuperviseGateInCompletion(t *testing.T) {
	m := newSupMonitor(t)
	k := supTask(t, "/bin/true")
	metrics := k.Dir + "/metrics.json"
	os.WriteFile(metrics, []byte(`{"accuracy": 0.9, "loss": {"val": 0.25}}`), 0o644)
	k.Setenv("PADDLE_MONITOR_URL", m.URL)
	k.Setenv("PADDLE_GATE", "accuracy>=0.95")
	k.Setenv("PADDLE_GATE_FILE", metrics)
	if r := k.Run(); r.Code != 1 {
		t.Fatalf("exit %d, want the gate's 1\n%s", r.Code, r.Stderr)
	}
	var body struct {
		ExitCode int                `json:"exit_code"`
		Gate     map[string]any     `json:"gate"`
		Metrics  map[string]float64 `json:"metrics"`
	}
	json.Unmarshal(m.waitFor(t, "/v1/task/complete", 1)[0].Body, &body)
	if body.ExitCode != 0 || body.Gate["expr"] != "accuracy>=0.95" || body.Gate["passed"] != false || body.Gate["reason"] == "" ||
		len(body.Metrics) != 2 || body.Metrics["accuracy"] != 0.9 || body.Metrics["loss.val"] != 0.25 {
		t.Errorf("completion %+v", body)
	}
}

func TestSuperviseTerminalForeground(t *testing.T) {
	// On a terminal (script(1) gives the entrypoint one as its controlling
	// terminal) the command leads its own process group, which is the
	// terminal's foreground group: a Ctrl-C reaches the command once.
	scriptBin := harness.Tool(t, "script")
	k := supTask(t)
	inner := bin.entrypoint + ` /bin/sh -c 'echo "fg $$ $(cut -d" " -f5,8 /proc/$$/stat)"'`
	c := exec.Command(scriptBin, "-qec", inner, "/dev/null")
	c.Env = k.Env
	out, err := c.Output()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var pid, pgrp, tpgid int
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "fg ") {
			fmt.Sscanf(strings.TrimSpace(line), "fg %d %d %d", &pid, &pgrp, &tpgid)
		}
	}
	if pid == 0 || pgrp != pid || tpgid != pid {
		t.Errorf("command pid %d, process group %d, terminal's foreground group %d; want all three equal\n%s", pid, pgrp, tpgid, out)
	}
}

func TestSuperviseDrainsBacklogWhileRunning(t *testing.T) {
	// A task that could not report leaves its registration and completion
	// in the spool; the next supervised task on the node, once its own
	// registration is delivered, sends them while its command runs,
	// registration first.
	old := supTask(t, "/bin/true")
	old.Setenv("PADDLE_MONITOR_URL", regDownURL(t))
	old.Setenv("PADDLE_TASK_ID", "old-1")
	if r := old.Run(); r.Code != 0 {
		t.Fatal(r.Stderr)
	}
	m := newSupMonitor(t)
	k := supTask(t, "/bin/sh", "-c", "sleep 1")
	k.Setenv("PADDLE_MONITOR_URL", m.URL)
	k.Setenv("PADDLE_SPOOL_PATH", old.SpoolPath())
	k.Setenv("PADDLE_TASK_ID", "new-1")
	if r := k.Run(); r.Code != 0 {
		t.Fatal(r.Stderr)
	}
	var keys []string
	for _, r := range m.requests("") {
		keys = append(keys, r.Key())
	}
	want := []string{"new-1", "old-1", "old-1/complete", "new-1/complete"}
	if !slices.Equal(keys, want) {
		t.Errorf("Idempotency-Keys in order %q, want %q", keys, want)
	}
	if st := spoolStats(t, k); st["pending"]+st["completions_pending"] != 0 {
		t.Errorf("spool %v, want drained", st)
	}
}

func TestSuperviseForwardedSignalKills(t *testing.T) {
	// dumb-init's exit_status_test: a signal sent to the supervisor kills a
	// command that does not handle it, and the supervisor exits 128+N.
	ignored := callerIgnored(t)
	for _, s := range []syscall.Signal{syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGUSR1,
		syscall.SIGUSR2, syscall.SIGALRM, syscall.SIGTERM, syscall.SIGVTALRM} {
		if ignored&(1<<(s-1)) != 0 {
			continue // stays ignored, for the command too
		}
		k := supTask(t, "/bin/sh", "-c", "echo ready; exec sleep 30")
		l := startLive(t, k.Command(context.Background()))
		if l.next() != "ready" {
			t.Fatal("no ready line")
		}
		// sh has exec'd sleep once the line is out, or is about to: either
		// dies of the default action.
		syscall.Kill(l.cmd.Process.Pid, s)
		if code := l.wait(); code != 128+int(s) {
			t.Errorf("%v: supervisor exit %d, want %d\n%s", s, code, 128+int(s), l.stderr.String())
		}
	}
}
