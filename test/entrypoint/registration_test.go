package entrypoint

// Black-box tests of registration (docs/contract.md, section 5) and of the
// spool as a start uses it (section 6): the built entrypoint against a
// monitor the test runs on 127.0.0.1.

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// regMargin bounds, in the tests, what a start may take past its budget.
// It is generous for a loaded CI machine; the margin measured on an idle
// one is logged by TestRegisterMonitorDown and stated in docs/registration.md.
const regMargin = time.Second

// regRequest is one request the test monitor received.
type regRequest struct {
	At     time.Time
	Header http.Header
	Body   []byte
	Answer string
}

// Key returns the request's Idempotency-Key.
func (r regRequest) Key() string { return r.Header.Get("Idempotency-Key") }

// regMonitor is a monitor whose answers follow a script, one entry per
// request with the last one repeated: a status ("503"), a status with a
// Retry-After ("429 Retry-After=1"), "hang" (accept and never answer),
// "reset" (close the connection without an answer) or "echo-auth NNN"
// (answer NNN with the Authorization header in the body).
type regMonitor struct {
	*httptest.Server
	mu        sync.Mutex
	script    []string
	reqs      []regRequest
	onRequest func(n int) // called before answering request n (1-based)
	done      chan struct{}
	// scriptFrom is the number of requests received before the script.
	scriptFrom int
}

func newRegMonitor(t *testing.T, script ...string) *regMonitor {
	t.Helper()
	m := &regMonitor{script: script, done: make(chan struct{})}
	m.Server = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(m.close)
	return m
}

// newRegMonitorTLS is a monitor on https with httptest's certificate.
func newRegMonitorTLS(t *testing.T, script ...string) *regMonitor {
	t.Helper()
	m := &regMonitor{script: script, done: make(chan struct{})}
	m.Server = httptest.NewUnstartedServer(http.HandlerFunc(m.serve))
	m.Server.Config.ErrorLog = log.New(io.Discard, "", 0) // failed handshakes are the point
	m.Server.StartTLS()
	t.Cleanup(m.close)
	return m
}

func (m *regMonitor) close() {
	close(m.done)
	m.Server.Close()
}

// SetScript replaces the answers to come.
func (m *regMonitor) SetScript(script ...string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.script = script
	m.scriptFrom = len(m.reqs)
}

func (m *regMonitor) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	m.mu.Lock()
	n := len(m.reqs) + 1
	i := min(n-m.scriptFrom, len(m.script)) - 1
	answer := m.script[i]
	m.reqs = append(m.reqs, regRequest{At: time.Now(), Header: r.Header.Clone(), Body: body, Answer: answer})
	hook := m.onRequest
	m.mu.Unlock()
	if hook != nil {
		hook(n)
	}
	if r.Method != http.MethodPost || r.URL.Path != "/v1/task/register" {
		http.Error(w, "no such endpoint", http.StatusNotFound)
		return
	}
	status, retryAfter, _ := strings.Cut(answer, " Retry-After=")
	switch {
	case status == "hang":
		select {
		case <-r.Context().Done():
		case <-m.done:
		}
		return
	case status == "reset":
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.(*net.TCPConn).SetLinger(0)
			conn.Close()
		}
		return
	case strings.HasPrefix(status, "echo-auth "):
		code, _ := strconv.Atoi(strings.TrimPrefix(status, "echo-auth "))
		w.WriteHeader(code)
		io.WriteString(w, "unexpected credentials: "+r.Header.Get("Authorization"))
		return
	}
	if retryAfter != "" {
		w.Header().Set("Retry-After", retryAfter)
	}
	code, _ := strconv.Atoi(status)
	w.WriteHeader(code)
	fmt.Fprintf(w, `{"status":%d}`, code)
}

// Requests returns what the monitor received so far.
func (m *regMonitor) Requests() []regRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.reqs)
}

// Delivered returns the Idempotency-Keys of the requests answered 2xx or
// 409, in order.
func (m *regMonitor) Delivered() []string {
	var keys []string
	for _, r := range m.Requests() {
		if code, err := strconv.Atoi(strings.Fields(r.Answer)[0]); err == nil && (code/100 == 2 || code == 409) {
			keys = append(keys, r.Key())
		}
	}
	return keys
}

// regDownURL is a monitor address that refuses connections.
func regDownURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

// regTask is a start of /bin/true (or args) registering with the monitor
// at url, within budget.
func regTask(t *testing.T, url string, budget time.Duration, args ...string) *task {
	t.Helper()
	if len(args) == 0 {
		args = []string{"/bin/true"}
	}
	k := newTask(t, args...)
	k.Setenv("PADDLE_MONITOR_URL", url)
	k.Setenv("PADDLE_REGISTER_BUDGET", budget.String())
	return k
}

// spoolRun runs `paddle-entrypoint spool ARGS...` with k's settings.
func spoolRun(k *task, args ...string) result {
	k.t.Helper()
	c := *k
	c.Args = append([]string{"spool"}, args...)
	return c.Run()
}

// spoolEntry is one line of `spool list`.
type spoolEntry struct {
	ID        uint64         `json:"id"`
	Version   int            `json:"record_version"`
	TaskID    string         `json:"task_id"`
	Payload   map[string]any `json:"payload"`
	QueuedAt  time.Time      `json:"queued_at"`
	Attempts  int            `json:"attempts"`
	LastError string         `json:"last_error"`
	Answer    string         `json:"answer"`
}

// spoolList returns the entries `spool list` prints, failing the test
// unless it exits 0 with one JSON object per line.
func spoolList(t *testing.T, k *task, dead bool) ([]spoolEntry, string) {
	t.Helper()
	args := []string{"list"}
	if dead {
		args = append(args, "--dead")
	}
	r := spoolRun(k, args...)
	if r.Code != 0 {
		t.Fatalf("spool %v: exit %d\n%s", args, r.Code, r.Stderr)
	}
	var out []spoolEntry
	for _, line := range strings.Split(strings.TrimSuffix(r.Stdout, "\n"), "\n") {
		if line == "" {
			continue
		}
		var e spoolEntry
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("spool list line %q: %v", line, err)
		}
		if e.Payload == nil {
			t.Errorf("spool list line without a payload object: %s", line)
		}
		out = append(out, e)
	}
	return out, r.Stdout
}

// spoolStats returns what `spool stats` prints.
func spoolStats(t *testing.T, k *task) map[string]int {
	t.Helper()
	r := spoolRun(k, "stats")
	var st map[string]int
	if r.Code != 0 || json.Unmarshal([]byte(r.Stdout), &st) != nil {
		t.Fatalf("spool stats: exit %d, stdout %q\n%s", r.Code, r.Stdout, r.Stderr)
	}
	return st
}

func wantStats(t *testing.T, k *task, pending, dead int) {
	t.Helper()
	st := spoolStats(t, k)
	if st["pending"] != pending || st["dead"] != dead {
		t.Errorf("spool stats %v, want pending %d, dead %d", st, pending, dead)
	}
}

func taskIDs(es []spoolEntry) []string {
	var ids []string
	for _, e := range es {
		ids = append(ids, e.TaskID)
	}
	return ids
}

func TestRegisterMonitorUp(t *testing.T) {
	m := newRegMonitor(t, "200")
	k := regTask(t, m.URL, 5*time.Second, bin.report)
	tokenFile := filepath.Join(k.Dir, "token")
	os.WriteFile(tokenFile, []byte("tok-up-123\n"), 0o600)
	for kv := range strings.SplitSeq("PADDLE_TASK_ID=reg-up-1 PADDLE_TASK_NAME=resnet50 PADDLE_PROJECT=vision "+
		"PADDLE_OWNER=ann@example.com PADDLE_PRIORITY=HIGH PADDLE_DURATION_EST=2h PADDLE_ENV=qa "+
		"PADDLE_TRAINER_ID=0 PADDLE_TRAINERS_NUM=4 PADDLE_LABEL_COST_CENTER=cc-1024 "+
		"PADDLE_MONITOR_TOKEN_FILE="+tokenFile, " ") {
		key, v, _ := strings.Cut(kv, "=")
		k.Setenv(key, v)
	}
	r := k.Run()
	if r.Code != 0 {
		t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
	}
	parseReport(t, r.Stdout) // the command ran
	t.Logf("monitor up: the command ran %v after the entrypoint started", r.Elapsed)

	reqs := m.Requests()
	if len(reqs) != 1 {
		t.Fatalf("monitor received %d requests, want 1", len(reqs))
	}
	req := reqs[0]
	for h, want := range map[string]string{
		"Content-Type":    "application/json",
		"Idempotency-Key": "reg-up-1",
		"Authorization":   "Bearer tok-up-123",
	} {
		if got := req.Header.Get(h); got != want {
			t.Errorf("header %s: %q, want %q", h, got, want)
		}
	}
	if ua := req.Header.Get("User-Agent"); !strings.HasPrefix(ua, "paddle-entrypoint/") {
		t.Errorf("User-Agent %q", ua)
	}

	var body map[string]any
	if err := json.Unmarshal(req.Body, &body); err != nil {
		t.Fatalf("body is not a JSON object: %v\n%s", err, req.Body)
	}
	labels := labelMap(t, k.LabelsFile())
	startTime, _ := strconv.ParseFloat(labels["start_time"], 64)
	want := map[string]any{
		"task_name": "resnet50", "project": "vision", "owner": "ann@example.com",
		"schema_version": 1.0, "task_id": "reg-up-1", "start_time": startTime,
		"hostname": labels["hostname"], "priority": "high", "duration_est": 7200.0,
		"trainer_id": 0.0, "trainers_num": 4.0, "invalid_labels": []any{"env"},
		"labels": map[string]any{"cost_center": "cc-1024"},
	}
	for key, v := range want {
		if got := body[key]; fmt.Sprint(got) != fmt.Sprint(v) {
			t.Errorf("body %s: %#v, want %#v", key, got, v)
		}
	}
	gpus, ok := body["gpus"].([]any)
	count, isNum := body["gpu_count"].(float64)
	if !ok || !isNum || int(count) != len(gpus) || labels["gpu_count"] != strconv.Itoa(len(gpus)) {
		t.Errorf("gpu_count %#v and gpus %#v disagree (labels file: %s)", body["gpu_count"], body["gpus"], labels["gpu_count"])
	}
	allowed := []string{"task_name", "project", "owner", "gpu_count", "schema_version", "task_id", "start_time",
		"hostname", "priority", "env", "duration_est", "trainer_id", "trainers_num", "invalid_labels", "labels",
		"gpus", "driver_version"}
	for key := range body {
		if !slices.Contains(allowed, key) {
			t.Errorf("unexpected top-level key %q in the body", key)
		}
	}
	if _, ok := body["env"]; ok {
		t.Error("env sent although it was invalid")
	}

	if _, err := os.Stat(k.SpoolPath()); !os.IsNotExist(err) {
		t.Errorf("spool file exists after a delivered registration (stat: %v)", err)
	}
	if !strings.Contains(r.Stderr, "outcome=delivered") || !strings.Contains(r.Stderr, "attempts=1") {
		t.Errorf("no registration result line:\n%s", r.Stderr)
	}
	if strings.Contains(r.Stderr, "tok-up-123") {
		t.Error("token in the log")
	}
}

func TestRegisterRetriesThenDelivered(t *testing.T) {
	m := newRegMonitor(t, "503", "503", "200")
	k := regTask(t, m.URL, 5*time.Second)
	k.Setenv("PADDLE_TASK_ID", "reg-retry-1")
	r := k.Run()
	if r.Code != 0 || r.Elapsed > 5*time.Second+regMargin {
		t.Fatalf("exit %d after %v\n%s", r.Code, r.Elapsed, r.Stderr)
	}
	reqs := m.Requests()
	if len(reqs) != 3 {
		t.Fatalf("monitor received %d requests, want 3", len(reqs))
	}
	for i, req := range reqs {
		if req.Key() != "reg-retry-1" || !bytes.Equal(req.Body, reqs[0].Body) {
			t.Errorf("try %d: key %q, body %s; want the first try's", i+1, req.Key(), req.Body)
		}
	}
	if !strings.Contains(r.Stderr, "outcome=delivered") || !strings.Contains(r.Stderr, "attempts=3") {
		t.Errorf("no registration result line:\n%s", r.Stderr)
	}
	wantStats(t, k, 0, 0)
}

// The command is exec'd within the budget (plus a margin measured here)
// whatever the monitor does, and the registration is pending afterwards.
func TestRegisterMonitorDown(t *testing.T) {
	const budget = 2 * time.Second
	cases := []struct {
		name string
		url  func(t *testing.T) string
	}{
		{"connection refused", regDownURL},
		{"never answers", func(t *testing.T) string { return newRegMonitor(t, "hang").URL }},
		{"connection reset", func(t *testing.T) string { return newRegMonitor(t, "reset").URL }},
		{"500", func(t *testing.T) string { return newRegMonitor(t, "500").URL }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k := regTask(t, c.url(t), budget)
			k.Setenv("PADDLE_TASK_ID", "reg-down-1")
			r := k.Run()
			if r.Code != 0 {
				t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
			}
			t.Logf("%s: exec after %v with a %v budget (margin %v)", c.name, r.Elapsed, budget, r.Elapsed-budget)
			if r.Elapsed > budget+regMargin {
				t.Errorf("exec after %v, budget %v", r.Elapsed, budget)
			}
			if !strings.Contains(r.Stderr, "outcome=spooled") {
				t.Errorf("no spooled registration line:\n%s", r.Stderr)
			}
			pending, _ := spoolList(t, k, false)
			if len(pending) != 1 || pending[0].TaskID != "reg-down-1" || pending[0].Payload["task_id"] != "reg-down-1" ||
				pending[0].Attempts < 1 || pending[0].LastError == "" || pending[0].Version < 1 {
				t.Errorf("pending %+v, want reg-down-1 with its payload, attempts and last error", pending)
			}
			wantStats(t, k, 1, 0)
		})
	}
}

func TestRegisterPermanentAnswerIsDead(t *testing.T) {
	for _, status := range []string{"400", "501"} {
		t.Run(status, func(t *testing.T) {
			m := newRegMonitor(t, status)
			k := regTask(t, m.URL, 3*time.Second)
			k.Setenv("PADDLE_TASK_ID", "reg-dead-1")
			r := k.Run()
			if r.Code != 0 {
				t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
			}
			if n := len(m.Requests()); n != 1 {
				t.Errorf("monitor asked %d times, want exactly once", n)
			}
			if n := strings.Count(r.Stderr, "level=ERROR"); n != 1 {
				t.Errorf("%d error lines, want 1:\n%s", n, r.Stderr)
			}
			dead, _ := spoolList(t, k, true)
			if len(dead) != 1 || dead[0].TaskID != "reg-dead-1" || !strings.Contains(dead[0].Answer, status) {
				t.Errorf("dead letters %+v, want reg-dead-1 with the answer %s", dead, status)
			}
			wantStats(t, k, 0, 1)
		})
	}
}

func TestRegisterRetryAfter(t *testing.T) {
	m := newRegMonitor(t, "429 Retry-After=1", "200")
	k := regTask(t, m.URL, 5*time.Second)
	if r := k.Run(); r.Code != 0 {
		t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
	}
	reqs := m.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	if gap := reqs[1].At.Sub(reqs[0].At); gap < time.Second {
		t.Errorf("retried %v after 429 with Retry-After: 1", gap)
	}
	wantStats(t, k, 0, 0)
}

// The next start, with the monitor back, delivers the older pending entry
// as well as its own, with the Idempotency-Key of the first try.
func TestRegisterNextStartDeliversBacklog(t *testing.T) {
	m := newRegMonitor(t, "503")
	first := regTask(t, m.URL, 500*time.Millisecond)
	first.Setenv("PADDLE_TASK_ID", "reg-old-1")
	if r := first.Run(); r.Code != 0 {
		t.Fatalf("first start: exit %d\n%s", r.Code, r.Stderr)
	}
	wantStats(t, first, 1, 0)

	m.SetScript("200")
	first.Setenv("PADDLE_TASK_ID", "reg-new-2")
	first.Setenv("PADDLE_REGISTER_BUDGET", "5s")
	if r := first.Run(); r.Code != 0 {
		t.Fatalf("second start: exit %d\n%s", r.Code, r.Stderr)
	}
	if got, want := m.Delivered(), []string{"reg-new-2", "reg-old-1"}; !slices.Equal(got, want) {
		t.Errorf("delivered %v, want %v", got, want)
	}
	var firstBody []byte
	for _, req := range m.Requests() {
		if req.Key() == "reg-old-1" {
			if firstBody == nil {
				firstBody = req.Body
			} else if !bytes.Equal(req.Body, firstBody) {
				t.Errorf("the spooled body changed:\n%s\n%s", firstBody, req.Body)
			}
		}
	}
	wantStats(t, first, 0, 0)
}

// SIGTERM or SIGINT while the entrypoint waits on a hung monitor: spooled,
// and exit 128+signal within half a second.
func TestRegisterSignalWhileWaiting(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			m := newRegMonitor(t, "hang")
			k := regTask(t, m.URL, 10*time.Second)
			k.Setenv("PADDLE_TASK_ID", "reg-sig-1")
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			c := k.Command(ctx)
			var stderr bytes.Buffer
			c.Stderr = &stderr
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			for len(m.Requests()) == 0 && ctx.Err() == nil {
				time.Sleep(5 * time.Millisecond)
			}
			sent := time.Now()
			c.Process.Signal(sig)
			err := c.Wait()
			lag := time.Since(sent)
			t.Logf("%v: exit %v after the signal", sig, lag)
			if code := exitCode(err); code != 128+int(sig) {
				t.Errorf("exit %d, want %d\n%s", code, 128+int(sig), stderr.String())
			}
			if lag > 500*time.Millisecond {
				t.Errorf("exit %v after the signal, want within 0.5s", lag)
			}
			pending, _ := spoolList(t, k, false)
			if len(pending) != 1 || pending[0].TaskID != "reg-sig-1" {
				t.Errorf("pending %+v, want reg-sig-1", pending)
			}
		})
	}
}

// Ten entrypoints at once on one spool with the monitor down: all exec
// within the budget, and all ten registrations are pending.
func TestRegisterConcurrentStartsShareSpool(t *testing.T) {
	const n, budget = 10, 2 * time.Second
	url := regDownURL(t)
	base := regTask(t, url, budget)
	var wg sync.WaitGroup
	elapsed := make([]time.Duration, n)
	codes := make([]int, n)
	for i := range n {
		k := *base
		k.Env = slices.Clone(base.Env)
		k.Setenv("PADDLE_TASK_ID", fmt.Sprintf("reg-many-%02d", i))
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			start := time.Now()
			codes[i] = exitCode(k.Command(ctx).Run())
			elapsed[i] = time.Since(start)
		}()
	}
	wg.Wait()
	t.Logf("ten concurrent starts, budget %v: exec after %v", budget, elapsed)
	for i := range n {
		if codes[i] != 0 || elapsed[i] > budget+regMargin {
			t.Errorf("start %d: exit %d after %v", i, codes[i], elapsed[i])
		}
	}
	pending, _ := spoolList(t, base, false)
	ids := taskIDs(pending)
	slices.Sort(ids)
	var want []string
	for i := range n {
		want = append(want, fmt.Sprintf("reg-many-%02d", i))
	}
	if !slices.Equal(ids, want) {
		t.Errorf("pending %v, want all ten", ids)
	}
}

// A spool file locked by another process (past the lock timeout) does not
// hang a start, whether the monitor is down or up.
func TestRegisterLockedSpool(t *testing.T) {
	const budget = 2 * time.Second
	k := regTask(t, regDownURL(t), 300*time.Millisecond)
	k.Setenv("PADDLE_TASK_ID", "reg-lock-0")
	if r := k.Run(); r.Code != 0 {
		t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
	}
	f, err := os.OpenFile(k.SpoolPath(), os.O_RDWR, 0)
	if err != nil {
		t.Fatalf("spool file not created: %v", err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	m := newRegMonitor(t, "200")
	for name, url := range map[string]string{"monitor down": regDownURL(t), "monitor up": m.URL} {
		t.Run(name, func(t *testing.T) {
			k.Setenv("PADDLE_MONITOR_URL", url)
			k.Setenv("PADDLE_REGISTER_BUDGET", budget.String())
			r := k.Run()
			t.Logf("%s, spool locked: exec after %v", name, r.Elapsed)
			if r.Code != 0 || r.Elapsed > budget+regMargin {
				t.Errorf("exit %d after %v\n%s", r.Code, r.Elapsed, r.Stderr)
			}
			if !strings.Contains(r.Stderr, "level=WARN") {
				t.Errorf("locked spool not warned about:\n%s", r.Stderr)
			}
		})
	}
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	pending, _ := spoolList(t, k, false)
	if ids := taskIDs(pending); !slices.Equal(ids, []string{"reg-lock-0"}) {
		t.Errorf("pending %v, want the entry from before the lock", ids)
	}
}

// A spool file that bbolt rejects is renamed aside, a fresh one is used,
// and the command runs.
func TestRegisterCorruptSpool(t *testing.T) {
	damage := map[string]func(t *testing.T, path string){
		"garbage": func(t *testing.T, path string) {
			b := make([]byte, 64<<10)
			rand.Read(b)
			os.WriteFile(path, b, 0o600)
		},
		"truncated": func(t *testing.T, path string) {
			makeSpool(t, path)
			if err := os.Truncate(path, 100); err != nil {
				t.Fatal(err)
			}
		},
		"damaged meta pages": func(t *testing.T, path string) {
			makeSpool(t, path)
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			// Both meta pages (0 and 1): the magic number and what follows.
			junk := bytes.Repeat([]byte{0xA5}, 48)
			for _, off := range []int64{16, int64(os.Getpagesize()) + 16} {
				f.WriteAt(junk, off)
			}
		},
	}
	for name, spoil := range damage {
		t.Run(name, func(t *testing.T) {
			k := regTask(t, regDownURL(t), time.Second, bin.report)
			k.Setenv("PADDLE_TASK_ID", "reg-fresh-1")
			spoil(t, k.SpoolPath())
			before := time.Now().Unix()
			r := k.Run()
			if r.Code != 0 {
				t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
			}
			parseReport(t, r.Stdout)
			aside, _ := filepath.Glob(k.SpoolPath() + ".corrupt-*")
			if len(aside) != 1 {
				t.Fatalf("renamed aside: %v, want one <path>.corrupt-<unix-time>", aside)
			}
			ts, err := strconv.ParseInt(strings.TrimPrefix(aside[0], k.SpoolPath()+".corrupt-"), 10, 64)
			if err != nil || ts < before-1 || ts > time.Now().Unix()+1 {
				t.Errorf("corrupt file name %s does not end in the unix time", aside[0])
			}
			if !strings.Contains(r.Stderr, "level=ERROR") {
				t.Errorf("no error logged:\n%s", r.Stderr)
			}
			pending, _ := spoolList(t, k, false)
			if ids := taskIDs(pending); !slices.Equal(ids, []string{"reg-fresh-1"}) {
				t.Errorf("fresh spool holds %v, want reg-fresh-1", ids)
			}
		})
	}
}

// makeSpool writes a spool file with one pending entry, through the binary.
func makeSpool(t *testing.T, path string) {
	t.Helper()
	k := regTask(t, regDownURL(t), 200*time.Millisecond)
	k.Setenv("PADDLE_SPOOL_PATH", path)
	if r := k.Run(); r.Code != 0 {
		t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("no spool file: %v", err)
	}
}

func TestRegisterSpoolBounds(t *testing.T) {
	t.Run("PADDLE_SPOOL_MAX bounds what the task adds", func(t *testing.T) {
		k := regTask(t, regDownURL(t), 200*time.Millisecond)
		k.Setenv("PADDLE_SPOOL_MAX", "3")
		for i := 1; i <= 5; i++ {
			k.Setenv("PADDLE_TASK_ID", fmt.Sprintf("reg-max-%d", i))
			if r := k.Run(); r.Code != 0 {
				t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
			}
		}
		pending, _ := spoolList(t, k, false)
		if ids := taskIDs(pending); !slices.Equal(ids, []string{"reg-max-1", "reg-max-2", "reg-max-3"}) {
			t.Errorf("pending %v, want the first three: a task's bound never drops what others left", ids)
		}
		if st := spoolStats(t, k); st["pending"] != 3 || st["dropped"] != 2 {
			t.Errorf("stats %v, want 3 pending, 2 dropped", st)
		}
	})
	t.Run("PADDLE_SPOOL_MAX_AGE moves old entries to the dead letters", func(t *testing.T) {
		k := regTask(t, regDownURL(t), 200*time.Millisecond)
		k.Setenv("PADDLE_SPOOL_MAX_AGE", "1s")
		k.Setenv("PADDLE_TASK_ID", "reg-age-1")
		if r := k.Run(); r.Code != 0 {
			t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
		}
		time.Sleep(1100 * time.Millisecond)
		k.Setenv("PADDLE_TASK_ID", "reg-age-2")
		if r := k.Run(); r.Code != 0 {
			t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
		}
		pending, _ := spoolList(t, k, false)
		dead, _ := spoolList(t, k, true)
		if p, d := taskIDs(pending), taskIDs(dead); !slices.Equal(p, []string{"reg-age-2"}) || !slices.Equal(d, []string{"reg-age-1"}) {
			t.Errorf("pending %v, dead %v; want reg-age-2 pending, reg-age-1 dead", p, d)
		}
	})
}

// A spool that cannot be written, or is off: a warning, and the command runs
// within the budget.
func TestRegisterSpoolUnusable(t *testing.T) {
	const budget = time.Second
	notDir := filepath.Join(t.TempDir(), "file")
	os.WriteFile(notDir, nil, 0o600)
	paths := map[string]string{
		"parent is a file":      filepath.Join(notDir, "spool.db"),
		"read-only file system": "/proc/paddle-entrypoint-test/spool.db",
		"spool off":             "off",
	}
	if os.Geteuid() != 0 {
		ro := filepath.Join(t.TempDir(), "ro")
		os.Mkdir(ro, 0o500)
		paths["unwritable directory"] = filepath.Join(ro, "spool.db")
	}
	for name, path := range paths {
		t.Run(name, func(t *testing.T) {
			k := regTask(t, regDownURL(t), budget, bin.report)
			k.Setenv("PADDLE_SPOOL_PATH", path)
			r := k.Run()
			if r.Code != 0 || r.Elapsed > budget+regMargin {
				t.Fatalf("exit %d after %v\n%s", r.Code, r.Elapsed, r.Stderr)
			}
			parseReport(t, r.Stdout)
			if !strings.Contains(r.Stderr, "level=WARN") || !strings.Contains(r.Stderr, "outcome=lost") {
				t.Errorf("no warning about the lost registration:\n%s", r.Stderr)
			}
			if _, err := os.Stat(k.SpoolPath()); !os.IsNotExist(err) {
				t.Errorf("a spool file appeared at the default test path")
			}
		})
	}
}

func TestRegisterNoMonitor(t *testing.T) {
	k := newTask(t, "/bin/true")
	k.Setenv("PADDLE_ENTRYPOINT_LOG", "debug")
	r := k.Run()
	if r.Code != 0 || r.Elapsed > regMargin {
		t.Fatalf("exit %d after %v\n%s", r.Code, r.Elapsed, r.Stderr)
	}
	if strings.Contains(r.Stderr, "outcome=") {
		t.Errorf("a registration was attempted:\n%s", r.Stderr)
	}
	if _, err := os.Stat(k.SpoolPath()); !os.IsNotExist(err) {
		t.Error("spool file created without a monitor")
	}
}

// The token is read at every attempt and is never logged or stored, not
// even when the monitor echoes it back.
func TestRegisterToken(t *testing.T) {
	m := newRegMonitor(t, "echo-auth 503")
	k := regTask(t, m.URL, 1500*time.Millisecond)
	k.Setenv("PADDLE_ENTRYPOINT_LOG", "debug")
	tokenFile := filepath.Join(k.Dir, "token")
	k.Setenv("PADDLE_MONITOR_TOKEN_FILE", tokenFile)
	os.WriteFile(tokenFile, []byte("tok-ROTATE-1\n"), 0o600)
	m.onRequest = func(n int) {
		if n == 1 {
			// As kubelet rotates a projected token: a new file renamed in.
			os.WriteFile(tokenFile+".new", []byte("tok-ROTATE-2"), 0o600)
			os.Rename(tokenFile+".new", tokenFile)
		}
	}
	r := k.Run()
	if r.Code != 0 {
		t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
	}
	reqs := m.Requests()
	if len(reqs) < 2 {
		t.Fatalf("%d requests, want at least 2", len(reqs))
	}
	if a, b := reqs[0].Header.Get("Authorization"), reqs[1].Header.Get("Authorization"); a != "Bearer tok-ROTATE-1" || b != "Bearer tok-ROTATE-2" {
		t.Errorf("Authorization %q then %q; want the rotated token at the second try", a, b)
	}
	pending, listed := spoolList(t, k, false)
	if len(pending) != 1 || !strings.Contains(pending[0].LastError, "[REDACTED]") {
		t.Errorf("pending %+v: want one entry whose last error shows the redaction", pending)
	}
	spoolBytes, err := os.ReadFile(k.SpoolPath())
	if err != nil {
		t.Fatal(err)
	}
	for what, text := range map[string]string{"stderr": r.Stderr, "spool list": listed, "the spool file": string(spoolBytes)} {
		if strings.Contains(text, "tok-ROTATE") {
			t.Errorf("token in %s", what)
		}
	}
}

// https with PADDLE_MONITOR_CA_FILE: delivered when the file holds the
// monitor's CA; a wrong or missing CA fails and spools, never skipping
// verification.
func TestRegisterTLS(t *testing.T) {
	m := newRegMonitorTLS(t, "200")
	dir := t.TempDir()
	writePEM := func(name string, der []byte) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
		return p
	}
	cases := []struct {
		name    string
		caFile  string
		outcome string
	}{
		{"monitor's CA in the CA file", writePEM("ca.pem", m.Certificate().Raw), "delivered"},
		{"another CA", writePEM("other.pem", otherCADER(t)), "spooled"},
		{"no CA file", "", "spooled"},
		{"missing CA file", filepath.Join(dir, "absent.pem"), "spooled"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := len(m.Requests())
			k := regTask(t, m.URL, time.Second)
			if c.caFile != "" {
				k.Setenv("PADDLE_MONITOR_CA_FILE", c.caFile)
			}
			r := k.Run()
			if r.Code != 0 {
				t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
			}
			if !strings.Contains(r.Stderr, "outcome="+c.outcome) {
				t.Errorf("want outcome %s:\n%s", c.outcome, r.Stderr)
			}
			got := len(m.Requests()) - before
			if c.outcome == "delivered" && got != 1 || c.outcome != "delivered" && got != 0 {
				t.Errorf("%d requests reached the monitor", got)
			}
			if c.outcome == "spooled" {
				wantStats(t, k, 1, 0)
			}
			if strings.Contains(c.name, "missing") && !strings.Contains(r.Stderr, "PADDLE_MONITOR_CA_FILE") {
				t.Errorf("unreadable CA file not reported:\n%s", r.Stderr)
			}
		})
	}
}

// otherCADER returns a self-signed CA certificate that signed nothing the
// test monitor serves.
func otherCADER(t *testing.T) []byte {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "not the monitor's CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// PADDLE_SUBMIT_TIME becomes the registration's submit_time in Unix
// seconds, from Unix seconds or RFC 3339; a value that is neither, or one
// after the start, is dropped like a bad label in warn mode (one warning,
// invalid_labels=submit_time, no submit_time sent) and refuses the start in
// enforce mode (exit 65, nothing sent).
func TestRegisterSubmitTime(t *testing.T) {
	tests := []struct {
		name, value, mode string
		want              any // the body's submit_time; nil: absent
		code              int
	}{
		{"Unix seconds", "1732946400", "", 1732946400.0, 0},
		{"RFC 3339 (Argo's workflow.creationTimestamp)", "2024-11-30T06:00:00Z", "", 1732946400.0, 0},
		{"RFC 3339 with an offset and a fraction", "2024-11-30T14:00:00.5+08:00", "", 1732946400.0, 0},
		{"not a time, warn", "yesterday", "", nil, 0},
		{"after the start, warn", "4102444800", "", nil, 0},
		{"not a time, enforce", "yesterday", "enforce", nil, 65},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newRegMonitor(t, "200")
			k := regTask(t, m.URL, 5*time.Second)
			k.Setenv("PADDLE_SUBMIT_TIME", tt.value)
			if tt.mode != "" {
				k.Setenv("PADDLE_LABELS_MODE", tt.mode)
			}
			r := k.Run()
			if r.Code != tt.code {
				t.Fatalf("exit %d, want %d\n%s", r.Code, tt.code, r.Stderr)
			}
			reqs := m.Requests()
			if tt.code != 0 {
				if len(reqs) != 0 || !strings.Contains(r.Stderr, "PADDLE_SUBMIT_TIME") {
					t.Errorf("enforce: %d requests sent; stderr:\n%s", len(reqs), r.Stderr)
				}
				return
			}
			if len(reqs) != 1 {
				t.Fatalf("monitor received %d requests, want 1", len(reqs))
			}
			var body map[string]any
			if err := json.Unmarshal(reqs[0].Body, &body); err != nil {
				t.Fatal(err)
			}
			got, sent := body["submit_time"]
			labels := labelMap(t, k.LabelsFile())
			if _, inFile := labels["submit_time"]; inFile {
				t.Error("submit_time written to the labels file")
			}
			if tt.want == nil {
				if sent {
					t.Errorf("submit_time %v sent for %q", got, tt.value)
				}
				if labels["invalid_labels"] != "submit_time" || fmt.Sprint(body["invalid_labels"]) != "[submit_time]" {
					t.Errorf("invalid_labels: file %q, body %v", labels["invalid_labels"], body["invalid_labels"])
				}
				if n := strings.Count(r.Stderr, "var=PADDLE_SUBMIT_TIME "); n != 1 {
					t.Errorf("%d warnings name PADDLE_SUBMIT_TIME, want 1:\n%s", n, r.Stderr)
				}
				return
			}
			if got != tt.want {
				t.Errorf("submit_time %#v, want %#v", got, tt.want)
			}
		})
	}
}
