package register

import (
	"context"
	"testing"
	"time"
)

// WaitWriteAhead returns only once the registration is in the spool (or
// its context is done): a supervisor spools its completion after it, so a
// kill then never leaves a completion without its registration, even for
// a command that ended before the write-ahead did.
func TestAlongsideWaitWriteAhead(t *testing.T) {
	m := newMonitor(t, "200")
	q := newFakeQueue()
	release := make(chan struct{})
	q.fail = func(op string, n int) error {
		if op == "Enqueue" {
			<-release // a slow disk, or another container's lock
		}
		return nil
	}
	r := &Registrar{Client: newTestClient(t, m.URL), Queue: q}
	a := r.RegisterAlongside(context.Background(), "t1", []byte(`{"task_id":"t1"}`), nil)

	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	a.WaitWriteAhead(short)
	cancel()
	if short.Err() == nil {
		t.Fatal("WaitWriteAhead returned before the write-ahead and before its context ended")
	}

	close(release)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a.WaitWriteAhead(ctx)
	if ctx.Err() != nil {
		t.Fatal("WaitWriteAhead did not return once the write-ahead was done")
	}
	q.mu.Lock()
	enqueued := q.counts["Enqueue"]
	q.mu.Unlock()
	if enqueued != 1 {
		t.Errorf("%d enqueues, want the one write-ahead", enqueued)
	}
	if out := a.Finish(ctx); out != Delivered {
		t.Errorf("outcome %v, want delivered", out)
	}
}
