package deliver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/spool"
)

// memQueue is a Pending in memory.
type memQueue struct {
	mu      sync.Mutex
	entries []spool.Entry
}

func (q *memQueue) Oldest(_ context.Context, n int) ([]spool.Entry, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]spool.Entry(nil), q.entries[:min(n, len(q.entries))]...), nil
}

func (q *memQueue) Attempted(context.Context, uint64, string) error { return nil }

func (q *memQueue) Delete(_ context.Context, id uint64) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, e := range q.entries {
		if e.ID == id {
			q.entries = append(q.entries[:i], q.entries[i+1:]...)
		}
	}
	return nil
}

func (q *memQueue) Bury(ctx context.Context, id uint64, _ string) error { return q.Delete(ctx, id) }

// TestPassesNotBefore: a stopping answer's Retry-After becomes NotBefore
// on the Deliverer's clock, and stays after a later pass that delivers;
// a run of passes without one leaves it zero.
func TestPassesNotBefore(t *testing.T) {
	clock := time.Date(2026, 12, 1, 21, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name          string
		answers       []int // the monitor's status, one per attempt; the last repeats
		retryAfter    string
		wantDelivered int
		wantNotBefore time.Time
	}{
		{name: "503 with Retry-After, then 201", answers: []int{503, 201}, retryAfter: "1", wantDelivered: 1, wantNotBefore: clock.Add(time.Second)},
		{name: "503 without, then 201", answers: []int{503, 201}, wantDelivered: 1},
		{name: "201 at once", answers: []int{201}, retryAfter: "7", wantDelivered: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			n := 0
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				mu.Lock()
				code := tc.answers[min(n, len(tc.answers)-1)]
				n++
				mu.Unlock()
				if code != http.StatusCreated && tc.retryAfter != "" {
					w.Header().Set("Retry-After", tc.retryAfter)
				}
				w.WriteHeader(code)
			}))
			defer srv.Close()
			c, err := NewClient(ClientConfig{URL: srv.URL, UserAgent: "test"})
			if err != nil {
				t.Fatal(err)
			}
			q := &memQueue{entries: []spool.Entry{{ID: 1, Payload: []byte(`{}`), QueuedAt: clock}}}
			d := &Deliverer{Queue: q, Transport: Transport{Client: c, Path: "/r"}, Policy: ReportPolicy,
				Check: func(spool.Entry) (string, error) { return "k1", nil }, Now: func() time.Time { return clock }}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			res, err := d.Passes(ctx, DefaultRetry, nil)
			if err != nil || res.Delivered != tc.wantDelivered || res.Stopped != nil {
				t.Fatalf("Passes: %+v, %v; want %d delivered", res, err, tc.wantDelivered)
			}
			if !res.NotBefore.Equal(tc.wantNotBefore) {
				t.Errorf("NotBefore %v, want %v", res.NotBefore, tc.wantNotBefore)
			}
		})
	}
}
