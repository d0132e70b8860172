package reportqueue

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/register"
	"github.com/paddle-entrypoint/paddle-entrypoint/spool"
)

// monitor answers each report by its time: answers[time] (201 by default),
// and records the times it received, in order, the tokens and the bodies
// as decoded. A body that is not gzip-encoded is answered 415.
type monitor struct {
	mu      sync.Mutex
	answers map[int64]int
	got     []int64
	tokens  []string
	keys    []string
	bodies  [][]byte
}

func (m *monitor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != Path {
		http.NotFound(w, r)
		return
	}
	if r.Header.Get("Content-Encoding") != "gzip" {
		http.Error(w, "not gzip", http.StatusUnsupportedMediaType)
		return
	}
	zr, err := gzip.NewReader(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var body struct{ Time int64 }
	json.Unmarshal(b, &body)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.bodies = append(m.bodies, b)
	m.got = append(m.got, body.Time)
	m.tokens = append(m.tokens, r.Header.Get("Authorization"))
	m.keys = append(m.keys, r.Header.Get("Idempotency-Key"))
	status := 201
	if s, ok := m.answers[body.Time]; ok {
		status = s
	}
	w.WriteHeader(status)
}

func body(t int64) []byte { return []byte(`{"time":` + strconv.FormatInt(t, 10) + `}`) }

func TestDeliver(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	os.WriteFile(tokenFile, []byte("node-token-1\n"), 0o600)
	log := slog.New(slog.DiscardHandler)
	now := time.Now().Truncate(time.Minute)
	at := func(s int64) int64 { return now.Unix() - 3600 + s }
	m := &monitor{answers: map[int64]int{at(3120): 400, at(3240): 503}}
	srv := httptest.NewServer(m)
	defer srv.Close()
	q, err := Open(filepath.Join(dir, "sub", "reports.db"), 30*time.Minute, log)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSender(srv.URL, tokenFile, "", "paddle-node/test", log)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	q.Put(ctx, at(-7200), body(at(-7200)), s.Fingerprint()) // older than the maximum age
	for _, ts := range []int64{60, 120, 180, 240, 300} {
		if err := q.Put(ctx, at(ts+3000), body(at(ts+3000)), s.Fingerprint()); err != nil {
			t.Fatal(err)
		}
	}
	pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	res, err := Deliver(pctx, q, s)
	if err != nil {
		t.Fatal(err)
	}
	// Oldest first; 120's 400 does not block 180; 240's 503 ends the
	// pass and 300 waits behind it; the expired one is dropped, unsent.
	if res.Sent != 2 || res.Dead != 1 || res.Stopped == nil {
		t.Fatalf("pass %+v", res)
	}
	want := []int64{at(3060), at(3120), at(3180), at(3240)}
	if !slices.Equal(m.got, want) {
		t.Fatalf("order %v, want %v", m.got, want)
	}
	if m.keys[0] != strconv.FormatInt(at(3060), 10) {
		t.Errorf("Idempotency-Key %q, want the report's time", m.keys[0])
	}
	st, _ := q.Stats(ctx)
	if st.Pending != 2 || st.Dead != 1 || st.Dropped != 1 || st.Oldest.Unix() != at(3240) {
		t.Fatalf("stats %+v", st)
	}
	// A 401 keeps the report and ends the pass; the next attempt reads
	// the token file again.
	m.mu.Lock()
	m.answers[at(3240)] = 401
	m.mu.Unlock()
	res, _ = Deliver(ctx, q, s)
	if !res.Denied() {
		t.Fatalf("pass after 401: %+v", res)
	}
	os.WriteFile(tokenFile, []byte("node-token-2"), 0o600)
	delete(m.answers, at(3240))
	res, _ = Deliver(ctx, q, s)
	if res.Sent != 2 || res.Stopped != nil {
		t.Fatalf("pass after rotation: %+v", res)
	}
	if got := m.tokens[len(m.tokens)-1]; got != "Bearer node-token-2" {
		t.Fatalf("token after 401: %q", got)
	}
	if last, ok := q.Last(); !ok || last != at(3300) {
		t.Fatalf("Last = %d, %v", last, ok)
	}
	// Reopened (a restart), the spool still knows the last time.
	q2, err := Open(filepath.Join(dir, "sub", "reports.db"), time.Hour, log)
	if err != nil {
		t.Fatal(err)
	}
	if last, ok := q2.Last(); !ok || last != at(3300) {
		t.Fatalf("Last after reopening = %d, %v", last, ok)
	}
}

// A report goes gzip-encoded and decodes to the very bytes spooled, a
// large one (a node with many processes) as well as a small one.
func TestDeliverGzip(t *testing.T) {
	big := []byte(`{"time":1700000040,"node":"n","pad":"` + strings.Repeat("pid 4242 on GPU-0 ", 4000) + `"}`)
	for _, tc := range []struct {
		name    string
		payload []byte
	}{
		{"small", body(1700000040)},
		{"big", big},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			log := slog.New(slog.DiscardHandler)
			m := &monitor{answers: map[int64]int{}}
			var wire []int
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				raw, _ := io.ReadAll(r.Body)
				wire = append(wire, len(raw))
				r.Body = io.NopCloser(bytes.NewReader(raw))
				m.ServeHTTP(w, r)
			}))
			defer srv.Close()
			q, err := Open(filepath.Join(dir, "reports.db"), time.Hour, log)
			if err != nil {
				t.Fatal(err)
			}
			s, err := NewSender(srv.URL, "", "", "paddle-node/test", log)
			if err != nil {
				t.Fatal(err)
			}
			s.Now = func() time.Time { return time.Date(2026, 12, 1, 21, 0, 0, 0, time.UTC) }
			ctx := context.Background()
			if err := q.Put(ctx, time.Now().Unix(), tc.payload, s.Fingerprint()); err != nil {
				t.Fatal(err)
			}
			res, err := Deliver(ctx, q, s)
			if err != nil || res.Sent != 1 || res.Stopped != nil {
				t.Fatalf("pass %+v, %v", res, err)
			}
			// The body as spooled, with sent_at: the agent's clock at sending.
			var got, want map[string]any
			json.Unmarshal(tc.payload, &want)
			want["sent_at"] = "2026-12-01T21:00:00.000Z"
			if len(m.bodies) != 1 || json.Unmarshal(m.bodies[0], &got) != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("decoded %d bodies, the first of %d bytes: %.200q, want the %d-byte report with sent_at", len(m.bodies), len(m.bodies[0]), m.bodies[0], len(tc.payload))
			}
			if tc.name == "big" && wire[0] >= len(tc.payload)/10 {
				t.Errorf("%d bytes on the wire for a %d-byte report of one phrase repeated", wire[0], len(tc.payload))
			}
		})
	}
}

func TestStartErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := NewSender("http://127.0.0.1:1", filepath.Join(dir, "missing"), "", "x", nil); !errors.Is(err, ErrToken) {
		t.Errorf("a missing token file: %v, want ErrToken", err)
	}
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o644)
	if _, err := Open(filepath.Join(file, "reports.db"), time.Hour, nil); !errors.Is(err, ErrUnusable) {
		t.Errorf("a spool below a file: %v, want ErrUnusable", err)
	}
}

// TestPolicyAndConflicts: the node's status table for 425 and the other
// answers, and how a 409's conflicts are named.
func TestPolicyAndConflicts(t *testing.T) {
	for _, c := range []struct {
		err  error
		want register.Action
	}{
		{nil, register.Remove}, // 2xx, and 409 (stored with conflicts)
		{&register.AnswerError{Status: 425, RetryAfter: 3 * time.Second, HasRetryAfter: true}, register.KeepStop},
		{&register.AnswerError{Status: 400}, register.Bury},
		{&register.AnswerError{Status: 413}, register.Bury},
		{&register.AnswerError{Status: 403}, register.KeepStop},
		{&register.AnswerError{Status: 503}, register.KeepStop},
	} {
		if got := Policy(spool.Entry{}, c.err, time.Now()).Action; got != c.want {
			t.Errorf("Policy(%v) = %v, want %v", c.err, got, c.want)
		}
	}
	for _, c := range []struct{ body, want string }{
		{`{"status":"stored","conflicts":["GPU-1"]}`, "GPU-1"},
		{`{"status":"stored","conflicts":[{"uuid":"GPU-1","held_by":"n2"}]}`, "GPU-1 held by n2"},
		{`{"status":"stored","conflicts":[{"uuid":"GPU-1"},{"uuid":"GPU-2","node":"n3"}]}`, "GPU-1; GPU-2 held by n3"},
		{`{"status":"stored","conflicts":[42]}`, "42"},
		{`not json`, "not json"},
	} {
		var got []string
		s := &Sender{OnConflict: func(_ string, cs []string) { got = cs }}
		s.conflict("1700000040", c.body)
		if strings.Join(got, "; ") != c.want {
			t.Errorf("conflicts of %s: %q, want %q", c.body, got, c.want)
		}
	}
}
