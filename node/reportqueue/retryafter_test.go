package reportqueue

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// TestDeliverHonoursRetryAfter: a monitor that answers 503 with
// Retry-After: 1 is asked again no sooner than a second later (the
// backoff alone would try again after 150 ms), and the report is then
// delivered within the same pass.
func TestDeliverHonoursRetryAfter(t *testing.T) {
	var mu sync.Mutex
	var at []time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		at = append(at, time.Now())
		if len(at) == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()
	log := slog.New(slog.DiscardHandler)
	q, err := Open(filepath.Join(t.TempDir(), "reports.db"), time.Hour, log)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSender(srv.URL, "", "", "paddle-node/test", log)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := q.Put(ctx, time.Now().Unix(), body(1700000040), s.Fingerprint()); err != nil {
		t.Fatal(err)
	}
	res, err := Deliver(ctx, q, s)
	if err != nil || res.Sent != 1 || res.Stopped != nil {
		t.Fatalf("pass %+v, %v; want the report sent on the second try", res, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(at) != 2 {
		t.Fatalf("%d requests, want 2", len(at))
	}
	if gap := at[1].Sub(at[0]); gap < time.Second {
		t.Errorf("asked again %v after a 503 with Retry-After: 1; want at least 1s", gap)
	}
}
