package register

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/deliver"
	"github.com/paddle-entrypoint/paddle-entrypoint/spool"
)

// request is one request the test monitor received.
type request struct {
	At     time.Time
	Header http.Header
	Body   []byte
}

// monitor is a test monitor whose answers follow a script: one entry per
// request, the last one repeated. An answer is a status code, optionally
// "429 Retry-After=1"; "hang" never answers (until the test ends);
// "echo-auth 400" answers 400 with the Authorization header in the body.
type monitor struct {
	*httptest.Server
	mu     sync.Mutex
	script []string
	reqs   []request
	done   chan struct{}
}

func newMonitor(t *testing.T, script ...string) *monitor {
	t.Helper()
	m := &monitor{script: script, done: make(chan struct{})}
	m.Server = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(func() { close(m.done); m.Server.Close() })
	return m
}

func (m *monitor) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	m.mu.Lock()
	m.reqs = append(m.reqs, request{At: time.Now(), Header: r.Header.Clone(), Body: body})
	answer := m.script[min(len(m.reqs), len(m.script))-1]
	m.mu.Unlock()
	if r.URL.Path != Path || r.Method != http.MethodPost {
		http.Error(w, "wrong path or method", http.StatusNotFound)
		return
	}
	code, retryAfter, _ := strings.Cut(answer, " Retry-After=")
	switch {
	case code == "hang":
		select {
		case <-r.Context().Done():
		case <-m.done:
		}
		return
	case strings.HasPrefix(code, "echo-auth "):
		code = strings.TrimPrefix(code, "echo-auth ")
		n, _ := strconv.Atoi(code)
		w.WriteHeader(n)
		io.WriteString(w, "bad token: "+r.Header.Get("Authorization"))
		return
	}
	if retryAfter != "" {
		w.Header().Set("Retry-After", retryAfter)
	}
	n, _ := strconv.Atoi(code)
	w.WriteHeader(n)
	io.WriteString(w, `{"answer":"`+code+`"}`)
}

func (m *monitor) Requests() []request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]request(nil), m.reqs...)
}

func newTestClient(t *testing.T, url string, mod ...func(*deliver.ClientConfig)) *deliver.Client {
	t.Helper()
	cfg := deliver.ClientConfig{URL: url, UserAgent: "paddle-entrypoint/test"}
	for _, f := range mod {
		f(&cfg)
	}
	c, err := deliver.NewClient(cfg)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	return c
}

// testLogger returns a logger writing into buf (text), for assertions.
func testLogger(buf *syncBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
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

// fastRetry keeps unit tests short; the policy is the same shape.
var fastRetry = deliver.RetryPolicy{Initial: 20 * time.Millisecond, Max: 100 * time.Millisecond, Multiplier: 2, Jitter: 0.2}

const testBody = `{"task_name":"t","task_id":"id-1"}`

func TestRegistrarOutcomes(t *testing.T) {
	tests := []struct {
		name      string
		script    []string
		want      Outcome
		wantAsked int // -1: at least 2
		wantCalls []string
		pending   int
		dead      int
	}{
		{"200 first", []string{"200"}, Delivered, 1, []string{"Oldest"}, 0, 0},
		{"201", []string{"201"}, Delivered, 1, []string{"Oldest"}, 0, 0},
		{"409 already registered", []string{"409"}, Delivered, 1, []string{"Oldest"}, 0, 0},
		{"503 503 200", []string{"503", "503", "200"}, Delivered, 3, []string{"Enqueue", "Attempted", "Delete", "Oldest"}, 0, 0},
		{"500 408 429 502 504 then 200", []string{"500", "408", "429", "502", "504", "200"}, Delivered, 6,
			[]string{"Enqueue", "Attempted", "Attempted", "Attempted", "Attempted", "Delete", "Oldest"}, 0, 0},
		{"400 dead at once", []string{"400"}, Dead, 1, []string{"BuryNew"}, 0, 1},
		{"401", []string{"401"}, Dead, 1, []string{"BuryNew"}, 0, 1},
		{"404", []string{"404"}, Dead, 1, []string{"BuryNew"}, 0, 1},
		{"501 is permanent", []string{"501"}, Dead, 1, []string{"BuryNew"}, 0, 1},
		{"308 redirect is not followed", []string{"308"}, Dead, 1, []string{"BuryNew"}, 0, 1},
		{"503 then 422", []string{"503", "422"}, Dead, 2, []string{"Enqueue", "deliver.Bury"}, 0, 1},
		{"503 for the whole budget", []string{"503"}, Spooled, -1, nil, 1, 0},
		{"503 and no policy: default waits", []string{"503"}, Spooled, -1, nil, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMonitor(t, tt.script...)
			q := newFakeQueue()
			r := &Registrar{Client: newTestClient(t, m.URL), Queue: q, Backlog: 20, Retry: fastRetry}
			if strings.Contains(tt.name, "no policy") {
				r.Retry = deliver.RetryPolicy{}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 600*time.Millisecond)
			defer cancel()
			got := r.Register(ctx, "id-1", []byte(testBody))
			if got != tt.want {
				t.Errorf("outcome %v, want %v", got, tt.want)
			}
			asked := len(m.Requests())
			if tt.wantAsked >= 0 && asked != tt.wantAsked {
				t.Errorf("monitor asked %d times, want %d", asked, tt.wantAsked)
			}
			if tt.wantAsked < 0 && asked < 2 {
				t.Errorf("monitor asked %d times, want retries", asked)
			}
			// Backoff, not hammering: even the last tries keep their distance.
			if reqs := m.Requests(); len(reqs) > 1 {
				for i := 1; i < len(reqs); i++ {
					if gap := reqs[i].At.Sub(reqs[i-1].At); gap < 10*time.Millisecond {
						t.Errorf("tries %d and %d only %v apart (%d tries)", i, i+1, gap, len(reqs))
						break
					}
				}
			}
			if tt.wantCalls != nil && !slices.Equal(q.Calls(), tt.wantCalls) {
				t.Errorf("spool calls %v, want %v", q.Calls(), tt.wantCalls)
			}
			if p, d := len(q.Pending()), len(q.Dead()); p != tt.pending || d != tt.dead {
				t.Errorf("spool holds %d pending, %d dead; want %d, %d", p, d, tt.pending, tt.dead)
			}
			for _, e := range append(q.Pending(), q.Dead()...) {
				if e.TaskID != "id-1" || string(e.Payload) != testBody || e.Version != spool.RecordVersion {
					t.Errorf("spooled entry %+v does not carry the registration", e)
				}
			}
			for _, e := range q.Dead() {
				if !strings.Contains(e.Answer, tt.script[len(tt.script)-1]) {
					t.Errorf("dead letter's answer %q does not name the status", e.Answer)
				}
			}
			for i, req := range m.Requests() {
				if k := req.Header.Get("Idempotency-Key"); k != "id-1" {
					t.Errorf("try %d: Idempotency-Key %q, want id-1", i+1, k)
				}
				if string(req.Body) != testBody {
					t.Errorf("try %d: body %q", i+1, req.Body)
				}
			}
		})
	}
}

func TestRegistrarSpooledEntryRecordsAttempts(t *testing.T) {
	m := newMonitor(t, "503")
	q := newFakeQueue()
	r := &Registrar{Client: newTestClient(t, m.URL), Queue: q, Retry: fastRetry}
	ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel()
	if got := r.Register(ctx, "id-1", []byte(testBody)); got != Spooled {
		t.Fatalf("outcome %v, want spooled", got)
	}
	p := q.Pending()
	if len(p) != 1 {
		t.Fatalf("%d pending, want 1", len(p))
	}
	if asked := len(m.Requests()); p[0].Attempts != asked {
		t.Errorf("entry records %d attempts, the monitor saw %d", p[0].Attempts, asked)
	}
	if !strings.Contains(p[0].LastError, "503") {
		t.Errorf("last error %q does not say 503", p[0].LastError)
	}
}

// A monitor that is down or never answers: Register returns by the budget's
// end, with the registration pending.
func TestRegistrarBudget(t *testing.T) {
	refused := func(t *testing.T) string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		return "http://" + addr
	}
	hung := func(t *testing.T) string { return newMonitor(t, "hang").URL }
	for name, url := range map[string]func(*testing.T) string{"refused": refused, "never answers": hung} {
		t.Run(name, func(t *testing.T) {
			q := newFakeQueue()
			r := &Registrar{Client: newTestClient(t, url(t)), Queue: q, Backlog: 20}
			const budget = 700 * time.Millisecond
			ctx, cancel := context.WithTimeout(context.Background(), budget)
			defer cancel()
			start := time.Now()
			got := r.Register(ctx, "id-1", []byte(testBody))
			elapsed := time.Since(start)
			if got != Spooled {
				t.Errorf("outcome %v, want spooled", got)
			}
			if elapsed > budget+100*time.Millisecond {
				t.Errorf("Register took %v, budget %v", elapsed, budget)
			}
			if len(q.Pending()) != 1 {
				t.Errorf("%d pending, want 1", len(q.Pending()))
			}
			if slices.Contains(q.Calls(), "Oldest") {
				t.Error("backlog read although the registration was not delivered")
			}
		})
	}
}

// A signal (ctx cancelled with a cause other than the deadline) while the
// monitor hangs: the registration is spooled with a fresh context, at once.
func TestRegistrarSignal(t *testing.T) {
	for _, when := range []string{"before any attempt", "during the first attempt", "after a spooled failure"} {
		t.Run(when, func(t *testing.T) {
			script := []string{"hang"}
			if when == "after a spooled failure" {
				script = []string{"503", "hang"}
			}
			m := newMonitor(t, script...)
			q := newFakeQueue()
			r := &Registrar{Client: newTestClient(t, m.URL), Queue: q, Retry: fastRetry}
			sig, stop := context.WithCancelCause(context.Background())
			ctx, cancel := context.WithTimeout(sig, 5*time.Second)
			defer cancel()
			var cancelled time.Time
			if when == "before any attempt" {
				cancelled = time.Now()
				stop(errors.New("received terminated"))
			} else {
				go func() {
					for len(m.Requests()) < len(script) {
						time.Sleep(5 * time.Millisecond)
					}
					time.Sleep(50 * time.Millisecond)
					cancelled = time.Now()
					stop(errors.New("received terminated"))
				}()
			}
			got := r.Register(ctx, "id-1", []byte(testBody))
			if lag := time.Since(cancelled); lag > 250*time.Millisecond {
				t.Errorf("Register returned %v after the signal", lag)
			}
			if got != Spooled {
				t.Errorf("outcome %v, want spooled", got)
			}
			if n := len(q.Pending()); n != 1 {
				t.Errorf("%d pending, want 1", n)
			}
			if n := strings.Count(strings.Join(q.Calls(), " "), "Enqueue"); n != 1 {
				t.Errorf("enqueued %d times, want 1 (calls %v)", n, q.Calls())
			}
		})
	}
}

func TestRegistrarRetryAfter(t *testing.T) {
	m := newMonitor(t, "429 Retry-After=1", "200")
	r := &Registrar{Client: newTestClient(t, m.URL), Queue: newFakeQueue(), Retry: fastRetry}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if got := r.Register(ctx, "id-1", []byte(testBody)); got != Delivered {
		t.Fatalf("outcome %v, want delivered", got)
	}
	reqs := m.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	if gap := reqs[1].At.Sub(reqs[0].At); gap < time.Second {
		t.Errorf("retry %v after a 429 with Retry-After: 1", gap)
	}
}

// A Retry-After past the budget: no point waiting for it; the entry stays
// pending and the start goes on at once.
func TestRegistrarRetryAfterPastBudget(t *testing.T) {
	m := newMonitor(t, "503 Retry-After=120")
	q := newFakeQueue()
	r := &Registrar{Client: newTestClient(t, m.URL), Queue: q, Retry: fastRetry}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	if got := r.Register(ctx, "id-1", []byte(testBody)); got != Spooled {
		t.Fatalf("outcome %v, want spooled", got)
	}
	if el := time.Since(start); el > 500*time.Millisecond {
		t.Errorf("Register waited %v for a Retry-After past the budget", el)
	}
	if n := len(m.Requests()); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}

func TestRegistrarSpoolFailures(t *testing.T) {
	tests := []struct {
		name    string
		fail    func(op string, n int) error
		queue   bool
		want    Outcome
		enqueue int // Enqueue calls
	}{
		{"spool off", nil, false, Lost, 0},
		{"locked at first, then free", func(op string, n int) error {
			if op == "Enqueue" && n == 0 {
				return spool.ErrLocked
			}
			return nil
		}, true, Spooled, 2},
		{"unavailable: not tried again", func(op string, n int) error {
			if op == "Enqueue" {
				return spool.ErrUnavailable
			}
			return nil
		}, true, Lost, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMonitor(t, "503")
			var logs syncBuffer
			r := &Registrar{Client: newTestClient(t, m.URL), Retry: fastRetry, Logger: testLogger(&logs)}
			q := newFakeQueue()
			q.fail = tt.fail
			if tt.queue {
				r.Queue = q
			}
			ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
			defer cancel()
			if got := r.Register(ctx, "id-1", []byte(testBody)); got != tt.want {
				t.Errorf("outcome %v, want %v", got, tt.want)
			}
			if n := q.counts["Enqueue"]; n != tt.enqueue {
				t.Errorf("Enqueue called %d times, want %d", n, tt.enqueue)
			}
			if !strings.Contains(logs.String(), "outcome="+tt.want.String()) {
				t.Errorf("no registration line with the outcome in the log:\n%s", logs.String())
			}
			if tt.want == Lost && !strings.Contains(logs.String(), "level=WARN") {
				t.Errorf("a lost registration was not warned about:\n%s", logs.String())
			}
		})
	}
}

// After its own registration, a start sends older pending entries oldest
// first, each with its own task id, at most Backlog of them.
func TestRegistrarBacklog(t *testing.T) {
	m := newMonitor(t, "200")
	q := newFakeQueue()
	for i := 1; i <= 4; i++ {
		q.Enqueue(context.Background(), spool.Entry{TaskID: "old-" + strconv.Itoa(i), Payload: []byte(`{"task_id":"old-` + strconv.Itoa(i) + `"}`)})
	}
	r := &Registrar{Client: newTestClient(t, m.URL), Queue: q, Backlog: 3}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if got := r.Register(ctx, "new", []byte(`{"task_id":"new"}`)); got != Delivered {
		t.Fatalf("outcome %v", got)
	}
	var keys []string
	for _, req := range m.Requests() {
		k := req.Header.Get("Idempotency-Key")
		keys = append(keys, k)
		if !strings.Contains(string(req.Body), `"`+k+`"`) {
			t.Errorf("request with key %s carried body %s", k, req.Body)
		}
	}
	if want := []string{"new", "old-1", "old-2", "old-3"}; !slices.Equal(keys, want) {
		t.Errorf("monitor saw %v, want %v", keys, want)
	}
	if p := q.Pending(); len(p) != 1 || p[0].TaskID != "old-4" {
		t.Errorf("pending %v, want old-4 only", p)
	}
}

func TestFlush(t *testing.T) {
	tests := []struct {
		name    string
		script  []string
		want    deliver.FlushResult
		pending []string
	}{
		{"all delivered", []string{"200"}, deliver.FlushResult{Delivered: 3}, nil},
		{"second refused for good", []string{"200", "400", "409"}, deliver.FlushResult{Delivered: 2, Dead: 1}, nil},
		{"an entry answered 503 is skipped, the others go on", []string{"200", "503", "200"}, deliver.FlushResult{Delivered: 2, Failed: 1, Pending: 1}, []string{"t2"}},
		{"stops after three answers in a row", []string{"503"}, deliver.FlushResult{Failed: 3, Pending: 3}, []string{"t1", "t2", "t3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMonitor(t, tt.script...)
			q := newFakeQueue()
			for _, id := range []string{"t1", "t2", "t3"} {
				q.Enqueue(context.Background(), spool.Entry{TaskID: id, Payload: []byte(`{"task_id":"` + id + `"}`)})
			}
			r := &Registrar{Client: newTestClient(t, m.URL), Queue: q}
			got, err := r.Flush(context.Background(), 0)
			if stopped := got.Stopped; (stopped != nil) != (tt.want.Failed > 0) || deliver.Classify(stopped) == deliver.Refused {
				t.Errorf("Flush stopped by %v", stopped)
			}
			got.Stopped = nil
			if err != nil || got != tt.want {
				t.Errorf("Flush = %+v, %v; want %+v", got, err, tt.want)
			}
			var pending []string
			for _, e := range q.Pending() {
				pending = append(pending, e.TaskID)
			}
			if !slices.Equal(pending, tt.pending) {
				t.Errorf("pending %v, want %v", pending, tt.pending)
			}
		})
	}
}

// Flush reads the spool in batches: more entries than one batch all go.
func TestFlushBatches(t *testing.T) {
	m := newMonitor(t, "200")
	q := newFakeQueue()
	const n = 100*2 + 5 // deliver reads the spool 100 entries at a time
	for i := range n {
		q.Enqueue(context.Background(), spool.Entry{TaskID: "t" + strconv.Itoa(i), Payload: []byte(`{"task_id":"t` + strconv.Itoa(i) + `"}`)})
	}
	r := &Registrar{Client: newTestClient(t, m.URL), Queue: q}
	got, err := r.Flush(context.Background(), 0)
	if err != nil || got.Delivered != n || len(q.Pending()) != 0 {
		t.Errorf("Flush = %+v, %v; %d left pending", got, err, len(q.Pending()))
	}
}

// The spool failing mid-flush ends it with the spool's error, instead of
// sending the same entries again and again.
func TestFlushSpoolError(t *testing.T) {
	m := newMonitor(t, "200")
	q := newFakeQueue()
	q.Enqueue(context.Background(), spool.Entry{TaskID: "t1", Payload: []byte(`{"task_id":"t1"}`)})
	q.fail = func(op string, n int) error {
		if op == "Delete" {
			return spool.ErrLocked
		}
		return nil
	}
	r := &Registrar{Client: newTestClient(t, m.URL), Queue: q}
	if _, err := r.Flush(context.Background(), 0); !errors.Is(err, spool.ErrLocked) {
		t.Errorf("Flush error %v, want ErrLocked", err)
	}
	if n := len(m.Requests()); n != 1 {
		t.Errorf("monitor asked %d times, want 1", n)
	}
}

// fitWait fits the wait before the next try into the budget.
func TestFitWait(t *testing.T) {
	answer := func(ra time.Duration) error {
		return &deliver.AnswerError{Status: 429, RetryAfter: ra, HasRetryAfter: ra > 0}
	}
	tests := []struct {
		name   string
		left   time.Duration // 0: no deadline
		policy time.Duration
		err    error
		want   time.Duration
		last   bool
		ok     bool
	}{
		{"no deadline", 0, 300 * time.Millisecond, errors.New("refused"), 300 * time.Millisecond, false, true},
		{"fits", 3 * time.Second, 300 * time.Millisecond, errors.New("refused"), 300 * time.Millisecond, false, true},
		{"shortened for a last try", time.Second, 1200 * time.Millisecond, errors.New("refused"), 750 * time.Millisecond, true, true},
		{"last try, half the policy's wait", 300 * time.Millisecond, 200 * time.Millisecond, errors.New("refused"), 100 * time.Millisecond, true, true},
		{"half the policy's wait does not fit", 300 * time.Millisecond, time.Second, errors.New("refused"), 0, true, false},
		{"no time for a try", 80 * time.Millisecond, time.Second, errors.New("refused"), 0, true, false},
		{"Retry-After longer than the policy", 3 * time.Second, 150 * time.Millisecond, answer(time.Second), time.Second, false, true},
		{"Retry-After not shortened", 1200 * time.Millisecond, 150 * time.Millisecond, answer(time.Second), time.Second, true, true},
		{"Retry-After past the budget", 3 * time.Second, 150 * time.Millisecond, answer(2 * time.Minute), 0, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			if tt.left > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.left)
				defer cancel()
			}
			got, last, ok := fitWait(ctx, backoff.NewConstantBackOff(tt.policy), tt.err)
			if ok != tt.ok || tt.ok && last != tt.last {
				t.Fatalf("last %v, ok %v; want %v, %v (wait %v)", last, ok, tt.last, tt.ok, got)
			}
			if tt.ok && (got < tt.want-20*time.Millisecond || got > tt.want) {
				t.Errorf("wait %v, want %v", got, tt.want)
			}
		})
	}
}
