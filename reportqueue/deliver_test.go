package reportqueue

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
)

// monitor answers each report by its time: answers[time] (201 by default),
// and records the times it received, in order, and the tokens.
type monitor struct {
	mu      sync.Mutex
	answers map[int64]int
	got     []int64
	tokens  []string
}

func (m *monitor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != Path || r.Header.Get("Content-Encoding") != "gzip" {
		http.Error(w, "bad request shape", 400)
		return
	}
	zr, err := gzip.NewReader(r.Body)
	if err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	b, _ := io.ReadAll(zr)
	var body struct{ Time int64 }
	json.Unmarshal(b, &body)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.got = append(m.got, body.Time)
	m.tokens = append(m.tokens, r.Header.Get("Authorization"))
	status := 201
	if s, ok := m.answers[body.Time]; ok {
		status = s
	}
	w.WriteHeader(status)
}

func TestDeliver(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	os.WriteFile(tokenFile, []byte("node-token-1\n"), 0o600)
	m := &monitor{answers: map[int64]int{120: 400, 240: 503}}
	srv := httptest.NewServer(m)
	defer srv.Close()
	q, err := Open(filepath.Join(dir, "sub", "reports.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	now := time.Unix(100000, 0)
	for _, ts := range []int64{300, 60, 180, 120, 240} {
		q.Put(ts, []byte(`{"time":`+itoa(ts)+`}`), now)
	}
	q.Put(1, []byte(`{"time":1}`), now) // older than the maximum age below
	s, err := NewSender(srv.URL, tokenFile, "", "paddle-node/test")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	res, err := Deliver(ctx, q, s, time.Duration(100000-30)*time.Second, now)
	if err != nil {
		t.Fatal(err)
	}
	// Oldest first; 120's 400 does not block 180; 240's 503 ends the
	// pass (retried while the budget allows) and 300 waits behind it.
	if res.Sent != 2 || res.Dead != 1 || res.Dropped != 1 || res.Stopped == nil || res.Stopped.Status != 503 {
		t.Fatalf("pass %+v", res)
	}
	if m.got[0] != 60 || m.got[1] != 120 || m.got[2] != 180 || m.got[3] != 240 || slices.Contains(m.got, 300) || slices.Contains(m.got, 1) {
		t.Fatalf("order %v", m.got)
	}
	st, _ := q.Stats()
	if st.Pending != 2 || st.Dead != 1 || st.Dropped != 1 {
		t.Fatalf("stats %+v", st)
	}
	// A 401 keeps the report and the next attempt re-reads the token.
	m.mu.Lock()
	m.answers[240] = 401
	m.got = nil
	m.mu.Unlock()
	res, _ = Deliver(context.Background(), q, s, 0, now)
	if res.Stopped == nil || res.Stopped.Status != 401 {
		t.Fatalf("pass after 401: %+v", res)
	}
	os.WriteFile(tokenFile, []byte("node-token-2"), 0o600)
	delete(m.answers, 240)
	res, _ = Deliver(context.Background(), q, s, 0, now)
	if res.Sent != 2 || res.Stopped != nil {
		t.Fatalf("pass after rotation: %+v", res)
	}
	if got := m.tokens[len(m.tokens)-1]; got != "Bearer node-token-2" {
		t.Fatalf("token after 401: %q", got)
	}
	if last, ok := q.Last(); !ok || last != 300 {
		t.Fatalf("Last = %d, %v", last, ok)
	}
}

func itoa(v int64) string { b, _ := json.Marshal(v); return string(b) }

func TestUnreadableToken(t *testing.T) {
	if _, err := NewSender("http://127.0.0.1:1", filepath.Join(t.TempDir(), "missing"), "", "x"); err == nil {
		t.Fatal("a missing token file is no error")
	}
}
