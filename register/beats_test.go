package register

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Failed heartbeats are warned about at most once per HeartbeatWarnEvery,
// each warning counting the failures since the previous one; a delivery
// after failures is logged once at info and starts afresh.
func TestHeartbeatsWarnOncePerMinute(t *testing.T) {
	var status atomic.Int64
	status.Store(503)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(int(status.Load()))
	}))
	defer srv.Close()
	var logs bytes.Buffer
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	h := &Heartbeats{Client: newTestClient(t, srv.URL), Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Now: func() time.Time { return now }}
	// Each step: seconds since the previous one, the status, the log line
	// expected (level and what it counts), "" for none at info or above.
	steps := []struct {
		after  int
		status int
		want   string
	}{
		{0, 503, "level=WARN failed=1 failed_in_a_row=1"},
		{10, 503, ""},
		{30, 503, ""},
		{19, 503, ""},
		{1, 503, "level=WARN failed=4 failed_in_a_row=5"}, // 60 s after the first warning
		{59, 503, ""},
		{1, 503, "level=WARN failed=2 failed_in_a_row=7"},
		{10, 200, "level=INFO failed_before=7"},
		{10, 200, ""},
		{10, 503, "level=WARN failed=1 failed_in_a_row=1"}, // a new outage warns at once
	}
	for i, s := range steps {
		now = now.Add(time.Duration(s.after) * time.Second)
		status.Store(int64(s.status))
		logs.Reset()
		err := h.Send(context.Background(), NewHeartbeat("hb-1", now, now, nil))
		if (err != nil) != (s.status != 200) {
			t.Fatalf("step %d: err %v with status %d", i, err, s.status)
		}
		got := strings.TrimSpace(logs.String())
		if s.want == "" {
			if got != "" {
				t.Errorf("step %d: logged %q, want nothing at info or above", i, got)
			}
			continue
		}
		level, counts, _ := strings.Cut(s.want, " ")
		if !strings.Contains(got, level) || !strings.Contains(got, "task_id=hb-1") {
			t.Errorf("step %d: logged %q, want %s for task hb-1", i, got, level)
		}
		for _, c := range strings.Fields(counts) {
			if !strings.Contains(got, c+" ") && !strings.HasSuffix(got, c) {
				t.Errorf("step %d: logged %q, want %s", i, got, c)
			}
		}
	}
}

// A heartbeat abandoned because the command ended (its context cancelled
// while in flight) is not a failure: nothing at info or above, and the
// next failure is the first.
func TestHeartbeatsAbandonedIsNoFailure(t *testing.T) {
	hang := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
		w.WriteHeader(503)
	}))
	defer srv.Close()
	defer close(hang)
	var logs bytes.Buffer
	h := &Heartbeats{Client: newTestClient(t, srv.URL), Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- h.Send(ctx, NewHeartbeat("hb-2", time.Now(), time.Now(), nil)) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	if logs.Len() != 0 || h.failing != 0 {
		t.Errorf("an abandoned heartbeat logged %q and counted %d failures", logs.String(), h.failing)
	}
}
