package register

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/paddle-entrypoint/paddle-entrypoint/spool"
)

// fakeQueue is an in-memory Queue that records every call, and can be told
// to fail some of them.
type fakeQueue struct {
	mu      sync.Mutex
	next    uint64
	pending map[uint64]spool.Entry
	dead    map[uint64]spool.Entry
	calls   []string
	// fail returns the error for a call ("Enqueue", "Delete", ...) and the
	// number of earlier calls of that name; nil lets it succeed.
	fail   func(op string, n int) error
	counts map[string]int
}

func newFakeQueue() *fakeQueue {
	return &fakeQueue{pending: map[uint64]spool.Entry{}, dead: map[uint64]spool.Entry{}, counts: map[string]int{}}
}

func (q *fakeQueue) call(ctx context.Context, op string) error {
	q.calls = append(q.calls, op)
	n := q.counts[op]
	q.counts[op]++
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if q.fail != nil {
		return q.fail(op, n)
	}
	return nil
}

func (q *fakeQueue) Enqueue(ctx context.Context, e spool.Entry) (uint64, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := q.call(ctx, "Enqueue"); err != nil {
		return 0, err
	}
	q.next++
	e.ID = q.next
	q.pending[e.ID] = e
	return e.ID, nil
}

func (q *fakeQueue) Attempted(ctx context.Context, id uint64, lastErr string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := q.call(ctx, "Attempted"); err != nil {
		return err
	}
	e, ok := q.pending[id]
	if !ok {
		return errors.New("no such entry")
	}
	e.Attempts++
	e.LastError = lastErr
	q.pending[id] = e
	return nil
}

func (q *fakeQueue) Delete(ctx context.Context, id uint64) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := q.call(ctx, "Delete"); err != nil {
		return err
	}
	delete(q.pending, id)
	return nil
}

func (q *fakeQueue) Bury(ctx context.Context, id uint64, answer string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := q.call(ctx, "deliver.Bury"); err != nil {
		return err
	}
	e, ok := q.pending[id]
	if !ok {
		return errors.New("no such entry")
	}
	delete(q.pending, id)
	e.Answer = answer
	q.dead[id] = e
	return nil
}

func (q *fakeQueue) BuryNew(ctx context.Context, e spool.Entry, answer string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := q.call(ctx, "BuryNew"); err != nil {
		return err
	}
	q.next++
	e.ID = q.next
	e.Answer = answer
	q.dead[e.ID] = e
	return nil
}

func (q *fakeQueue) Oldest(ctx context.Context, n int) ([]spool.Entry, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := q.call(ctx, "Oldest"); err != nil {
		return nil, err
	}
	var out []spool.Entry
	for _, e := range q.pending {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	if n > 0 && len(out) > n {
		out = out[:n]
	}
	return out, nil
}

// Calls returns the names of the calls made, in order.
func (q *fakeQueue) Calls() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]string(nil), q.calls...)
}

func (q *fakeQueue) Pending() []spool.Entry {
	out, _ := q.Oldest(context.Background(), 0)
	q.mu.Lock()
	q.calls = q.calls[:len(q.calls)-1]
	q.counts["Oldest"]--
	q.mu.Unlock()
	return out
}

func (q *fakeQueue) Dead() []spool.Entry {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []spool.Entry
	for _, e := range q.dead {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}
