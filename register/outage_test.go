package register

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/deliver"
	"github.com/paddle-entrypoint/paddle-entrypoint/spool"
)

func TestIsOutage(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{nil, false},
		{&net.OpError{Op: "dial", Err: errors.New("connection refused")}, true},
		{context.DeadlineExceeded, true},
		{fmt.Errorf("post: %w", context.DeadlineExceeded), true},
		{&deliver.AnswerError{Status: 500}, true},
		{&deliver.AnswerError{Status: 503}, true},
		{&deliver.AnswerError{Status: 504}, true},
		{&deliver.AnswerError{Status: 501}, false},
		{&deliver.AnswerError{Status: 429}, false},
		{&deliver.AnswerError{Status: 408}, false},
		{&deliver.AnswerError{Status: 400}, false},
		{context.Canceled, false},
		{fmt.Errorf("%w: bad CA", deliver.ErrClientUnusable), false},
	}
	for _, tt := range tests {
		if got := isOutage(tt.err); got != tt.want {
			t.Errorf("isOutage(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

// The hold counts from the record's time; a record from the future (a
// clock set back) or past the hold is no known outage.
func TestKnownOutageHold(t *testing.T) {
	s := spool.New(spool.Options{Path: t.TempDir() + "/spool.db"})
	cl, _ := deliver.NewClient(deliver.ClientConfig{URL: "http://monitor:8080"})
	r := &Registrar{Client: cl, Queue: s.Registrations(), Outages: s, OutageHold: time.Minute}
	ctx := context.Background()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if _, active, found := r.knownOutage(ctx, now); active || found {
		t.Fatalf("empty spool: active %v, found %v", active, found)
	}
	tests := []struct {
		since  time.Time
		active bool
	}{
		{now, true},
		{now.Add(-59 * time.Second), true},
		{now.Add(-time.Minute), false},
		{now.Add(-time.Hour), false},
		{now.Add(time.Second), false},
	}
	for _, tt := range tests {
		if err := s.RecordOutage(ctx, "http://monitor:8080", tt.since); err != nil {
			t.Fatal(err)
		}
		if _, active, found := r.knownOutage(ctx, now); active != tt.active || !found {
			t.Errorf("record at now%+v: active %v, found %v; want %v", tt.since.Sub(now), active, found, tt.active)
		}
	}
	other, _ := deliver.NewClient(deliver.ClientConfig{URL: "http://other:8080"})
	if _, active, _ := (&Registrar{Client: other, Queue: s.Registrations(), Outages: s, OutageHold: time.Minute}).knownOutage(ctx, now); active {
		t.Error("an outage of one monitor URL applied to another")
	}
	if _, active, _ := (&Registrar{Client: cl, Queue: s.Registrations(), Outages: s}).knownOutage(ctx, now); active {
		t.Error("OutageHold 0 still reads the memory")
	}
}
