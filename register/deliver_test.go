package register

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/entrypoint/policy"
	"github.com/paddle-entrypoint/paddle-entrypoint/internal/deliver"
	"github.com/paddle-entrypoint/paddle-entrypoint/labels"
	"github.com/paddle-entrypoint/paddle-entrypoint/spool"
)

// pathMonitor is a test monitor that accepts POSTs on any path and answers
// each with the status its script gives for the request's Idempotency-Key
// (200 when the script has none), recording path and key.
type pathMonitor struct {
	*httptest.Server
	mu     sync.Mutex
	script map[string]int
	got    []string // "path key"
}

func newPathMonitor(t *testing.T, script map[string]int) *pathMonitor {
	t.Helper()
	m := &pathMonitor{script: script}
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		key := r.Header.Get("Idempotency-Key")
		m.mu.Lock()
		m.got = append(m.got, r.URL.Path+" "+key)
		code, ok := m.script[key]
		m.mu.Unlock()
		if !ok {
			code = http.StatusOK
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(m.Server.Close)
	return m
}

func (m *pathMonitor) requests() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.got)
}

// nodePolicy is a node's label policy that denies task ids starting with
// "banned-", and the check every stored payload passes (as the entrypoint
// builds it from that policy).
func nodePolicy(t *testing.T) func([]byte) (string, error) {
	t.Helper()
	pol, err := policy.Parse([]byte(`{"mode":"enforce","labels":{"task_id":{"deny":["banned-*"]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	return func(p []byte) (string, error) { return labels.CheckPayload(p, pol) }
}

// Spooled completions are vetted by the node's policy exactly as spooled
// registrations are: a payload the policy refuses is never sent and
// becomes a dead letter "not sent: ..."; the others are sent under their
// own task id. Before the delivery engine was one, completions skipped the
// policy.
func TestSpooledEntriesRecheckedAgainstNodePolicy(t *testing.T) {
	type kind struct {
		name  string
		queue func(*spool.Spool) *spool.Queue
		flush func(ctx context.Context, c *deliver.Client, check func([]byte) (string, error), q *spool.Queue) (deliver.FlushResult, error)
		path  string
		key   string // suffix of the Idempotency-Key
	}
	kinds := []kind{
		{"registrations", (*spool.Spool).Registrations, func(ctx context.Context, c *deliver.Client, check func([]byte) (string, error), q *spool.Queue) (deliver.FlushResult, error) {
			return (&Registrar{Client: c, Queue: q, Check: check}).Flush(ctx, 0)
		}, Path, ""},
		{"completions", (*spool.Spool).Completions, func(ctx context.Context, c *deliver.Client, check func([]byte) (string, error), q *spool.Queue) (deliver.FlushResult, error) {
			return (&Completer{Client: c, Queue: q, Check: check}).Flush(ctx, 0)
		}, CompletePath, "/complete"},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			ctx := context.Background()
			m := newPathMonitor(t, nil)
			s := spool.New(spool.Options{Path: filepath.Join(t.TempDir(), "spool-0.db")})
			q := k.queue(s)
			for _, body := range []string{
				`{"task_id":"ok-1","exit_code":0}`,
				`{"task_id":"banned-2","exit_code":0}`,
				`{"task_id":"ok-3","signal":"password=hunter2"}`,
				`{"task_id":"ok-4","exit_code":1}`,
			} {
				id, _ := deliver.TaskIDOf([]byte(body))
				if _, err := q.Enqueue(ctx, spool.Entry{TaskID: id, Payload: []byte(body)}); err != nil {
					t.Fatal(err)
				}
			}
			res, err := k.flush(ctx, newTestClient(t, m.URL), nodePolicy(t), q)
			if err != nil || res != (deliver.FlushResult{Delivered: 2, Dead: 2}) {
				t.Fatalf("Flush = %+v, %v; want 2 delivered, 2 dead", res, err)
			}
			want := []string{k.path + " ok-1" + k.key, k.path + " ok-4" + k.key}
			if got := m.requests(); !slices.Equal(got, want) {
				t.Errorf("monitor got %q, want %q", got, want)
			}
			dead, err := q.List(ctx, true)
			if err != nil || len(dead) != 2 {
				t.Fatalf("dead letters %+v, %v", dead, err)
			}
			for i, want := range []struct{ task, answer string }{
				{"banned-2", `not sent: payload refused: task_id: matches the policy's deny-list: pattern "banned-*" in the policy`},
				{"ok-3", "not sent: payload refused: signal holds sensitive data (password assignment)"},
			} {
				if dead[i].TaskID != want.task || dead[i].Answer != want.answer {
					t.Errorf("dead letter %d = %q %q, want %q %q", i, dead[i].TaskID, dead[i].Answer, want.task, want.answer)
				}
			}
			if p, _ := q.List(ctx, false); len(p) != 0 {
				t.Errorf("pending after the flush: %+v", p)
			}
		})
	}
}

// A completion whose payload names another task than its entry is refused
// before sending, whatever the check says of the payload.
func TestSpooledCompletionUnderItsOwnTaskOnly(t *testing.T) {
	ctx := context.Background()
	m := newPathMonitor(t, nil)
	s := spool.New(spool.Options{Path: filepath.Join(t.TempDir(), "spool-0.db")})
	q := s.Completions()
	if _, err := q.Enqueue(ctx, spool.Entry{TaskID: "a", Payload: []byte(`{"task_id":"b"}`)}); err != nil {
		t.Fatal(err)
	}
	res, err := (&Completer{Client: newTestClient(t, m.URL), Queue: q, Check: nodePolicy(t)}).Flush(ctx, 0)
	if err != nil || res != (deliver.FlushResult{Dead: 1}) || len(m.requests()) != 0 {
		t.Fatalf("Flush = %+v, %v, requests %q; want 1 dead, none sent", res, err, m.requests())
	}
	dead, _ := q.List(ctx, true)
	if len(dead) != 1 || dead[0].Answer != "not sent: payload refused: its task_id is not the entry's" {
		t.Errorf("dead letters %+v", dead)
	}
}

func TestReportPolicy(t *testing.T) {
	e := spool.Entry{QueuedAt: time.Unix(0, 0), Attempts: 100}
	tests := []struct {
		err  error
		want deliver.Action
	}{
		{nil, deliver.Remove},
		{&deliver.AnswerError{Status: 400}, deliver.Bury},
		{&deliver.AnswerError{Status: 413}, deliver.Bury},
		{&deliver.AnswerError{Status: 404}, deliver.Bury},
		{&deliver.AnswerError{Status: 401}, deliver.KeepStop},
		{&deliver.AnswerError{Status: 403}, deliver.KeepStop},
		{&deliver.AnswerError{Status: 408}, deliver.KeepStop},
		{&deliver.AnswerError{Status: 429}, deliver.KeepStop},
		{&deliver.AnswerError{Status: 500}, deliver.KeepStop},
		{&deliver.AnswerError{Status: 503}, deliver.KeepStop},
		{errors.New("connection refused"), deliver.KeepStop},
	}
	for _, tt := range tests {
		// Old and often tried: the node's reports are never given up on
		// while the monitor answers 5xx (their age bounds them instead).
		if got := deliver.ReportPolicy(e, tt.err, time.Unix(0, 0).Add(48*time.Hour)); got.Action != tt.want {
			t.Errorf("deliver.ReportPolicy(%v) = %v, want %v", tt.err, got.Action, tt.want)
		}
	}
}

func TestEntrypointPolicy(t *testing.T) {
	queued := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		attempts int
		age      time.Duration
		err      error
		want     deliver.Decision
	}{
		{"delivered", 0, 0, nil, deliver.Decision{Action: deliver.Remove}},
		{"400", 0, 0, &deliver.AnswerError{Status: 400}, deliver.Decision{Action: deliver.Bury}},
		{"501", 0, 0, &deliver.AnswerError{Status: 501}, deliver.Decision{Action: deliver.Bury}},
		{"503 goes on", 5, time.Hour, &deliver.AnswerError{Status: 503}, deliver.Decision{Action: deliver.KeepNext}},
		{"429 goes on", 0, 0, &deliver.AnswerError{Status: 429}, deliver.Decision{Action: deliver.KeepNext}},
		{"network ends the pass", 50, 72 * time.Hour, errors.New("connection refused"), deliver.Decision{Action: deliver.KeepStop}},
		{"poison: 20th attempt after a day", deliver.PoisonAttempts - 1, 25 * time.Hour, &deliver.AnswerError{Status: 503}, deliver.Decision{Action: deliver.Bury, Note: "gave up after 20 attempts over 25h0m0s: "}},
		{"many attempts, young", deliver.PoisonAttempts + 5, time.Hour, &deliver.AnswerError{Status: 503}, deliver.Decision{Action: deliver.KeepNext}},
		{"old, few attempts", 3, 48 * time.Hour, &deliver.AnswerError{Status: 503}, deliver.Decision{Action: deliver.KeepNext}},
	}
	for _, tt := range tests {
		e := spool.Entry{QueuedAt: queued, Attempts: tt.attempts}
		if got := deliver.EntrypointPolicy(e, tt.err, queued.Add(tt.age)); got != tt.want {
			t.Errorf("%s: deliver.EntrypointPolicy = %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

// The node agent's use: its own bbolt file, a report kind, the report
// endpoint with the node token and deliver.ReportPolicy. Reports go oldest first;
// a 400 buries one and the pass goes on; a 401 keeps the rest and ends the
// pass; the next pass sends what was kept.
func TestDelivererNodeReports(t *testing.T) {
	ctx := context.Background()
	kind, err := spool.NewKind("reports")
	if err != nil {
		t.Fatal(err)
	}
	q := spool.New(spool.Options{Path: filepath.Join(t.TempDir(), "reports.db")}).Queue(kind.DropExpired())
	for _, end := range []int{60, 120, 180, 240, 300} {
		key := "gpu-node-17/" + strconv.Itoa(end)
		body := `{"schema_version":1,"node":"gpu-node-17","time":` + strconv.Itoa(end) + `}`
		if _, err := q.Enqueue(ctx, spool.Entry{TaskID: key, Payload: []byte(body)}); err != nil {
			t.Fatal(err)
		}
	}
	m := newPathMonitor(t, map[string]int{"gpu-node-17/120": 400, "gpu-node-17/180": 409, "gpu-node-17/240": 401})
	d := &deliver.Deliverer{
		Queue:     q,
		Transport: deliver.Transport{Client: newTestClient(t, m.URL), Path: "/v1/nodes/report"},
		Policy:    deliver.ReportPolicy,
		Check:     deliver.EntryKey,
		Noun:      "report",
	}
	res, err := d.Flush(ctx, 0)
	res.Stopped = nil
	if err != nil || res != (deliver.FlushResult{Delivered: 2, Dead: 1, Failed: 1, Pending: 2}) {
		t.Fatalf("first pass = %+v, %v", res, err)
	}
	want := []string{"/v1/nodes/report gpu-node-17/60", "/v1/nodes/report gpu-node-17/120", "/v1/nodes/report gpu-node-17/180", "/v1/nodes/report gpu-node-17/240"}
	if got := m.requests(); !slices.Equal(got, want) {
		t.Errorf("first pass sent %q, want %q", got, want)
	}
	pending, _ := q.List(ctx, false)
	if len(pending) != 2 || pending[0].TaskID != "gpu-node-17/240" || pending[0].Attempts != 1 || pending[1].Attempts != 0 {
		t.Errorf("kept %+v", pending)
	}
	dead, _ := q.List(ctx, true)
	if len(dead) != 1 || dead[0].TaskID != "gpu-node-17/120" || dead[0].Answer != "monitor answered 400 Bad Request" {
		t.Errorf("dead %+v", dead)
	}
	// The token is fixed: the next pass sends both kept reports, in order.
	m.mu.Lock()
	m.script = nil
	m.got = nil
	m.mu.Unlock()
	res, err = d.Flush(ctx, 0)
	if err != nil || res != (deliver.FlushResult{Delivered: 2}) {
		t.Fatalf("second pass = %+v, %v", res, err)
	}
	if got, want := m.requests(), []string{"/v1/nodes/report gpu-node-17/240", "/v1/nodes/report gpu-node-17/300"}; !slices.Equal(got, want) {
		t.Errorf("second pass sent %q, want %q", got, want)
	}
	if st, _ := q.Stats(ctx); st != (spool.Stats{Dead: 1}) {
		t.Errorf("stats after both passes %+v", st)
	}
}

// deliver.Transport.Gzip: the body goes gzip-encoded with Content-Encoding: gzip
// and decodes to the payload's bytes; without it (the entrypoint's
// registrations and completions) the payload's own bytes go, unencoded.
func TestTransportGzip(t *testing.T) {
	payload := []byte(`{"schema_version":1,"node":"gpu-node-17","time":1700000040}`)
	for _, tt := range []struct {
		name     string
		gzip     bool
		encoding string
	}{
		{"plain", false, ""},
		{"gzip", true, "gzip"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var enc string
			var raw []byte
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				enc = r.Header.Get("Content-Encoding")
				raw, _ = io.ReadAll(r.Body)
				w.WriteHeader(http.StatusCreated)
			}))
			defer srv.Close()
			tr := deliver.Transport{Client: newTestClient(t, srv.URL), Path: "/v1/nodes/report", Gzip: tt.gzip}
			if err := tr.Send(context.Background(), nil, "gpu-node-17/60", payload); err != nil {
				t.Fatal(err)
			}
			if enc != tt.encoding {
				t.Errorf("Content-Encoding %q, want %q", enc, tt.encoding)
			}
			got := raw
			if tt.gzip {
				zr, err := gzip.NewReader(bytes.NewReader(raw))
				if err != nil {
					t.Fatalf("body is not gzip: %v (%q)", err, raw)
				}
				if got, err = io.ReadAll(zr); err != nil {
					t.Fatal(err)
				}
			}
			if !bytes.Equal(got, payload) {
				t.Errorf("body %q, want %q", got, payload)
			}
		})
	}
}
