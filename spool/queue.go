package spool

import (
	"context"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Queue is one kind of entry in a spool file: pending entries oldest first,
// each with its attempts, its hold and its dead letter, under the bounds of
// the spool's Options. Every kind (registrations, completions, a node
// agent's reports) is one Queue, with the guarantees of the package
// comment. A Queue is safe for concurrent use, as its Spool is.
type Queue struct {
	s *Spool
	k Kind
}

// Queue returns kind k's queue in this spool's file; it touches no file.
// A zero Kind is Registrations.
func (s *Spool) Queue(k Kind) *Queue {
	if !k.valid() {
		k = Registrations
	}
	return &Queue{s: s, k: k}
}

// Registrations is s.Queue(Registrations).
func (s *Spool) Registrations() *Queue { return s.Queue(Registrations) }

// Completions is s.Queue(Completions).
func (s *Spool) Completions() *Queue { return s.Queue(Completions) }

// Kind returns the queue's kind.
func (q *Queue) Kind() Kind { return q.k }

// Spool returns the spool file the queue is in (its other kinds, its
// outage memory).
func (q *Queue) Spool() *Spool { return q.s }

// Path returns the spool file's path.
func (q *Queue) Path() string { return q.s.opt.Path }

// Enqueue adds e as pending and returns its id. The id, record version and
// any dead-letter fields of e are set by the spool; a zero QueuedAt is set
// to now. e needs a task id and a payload that is a JSON object. An entry
// with a fingerprint goes to the buckets older versions never read.
func (q *Queue) Enqueue(ctx context.Context, e Entry) (uint64, error) {
	s := q.s
	if err := checkNew(e); err != nil {
		return 0, err
	}
	now := s.opt.Now()
	e.Version, e.Answer, e.DeadAt = RecordVersion, "", time.Time{}
	if e.QueuedAt.IsZero() {
		e.QueuedAt = now
	}
	if s.opt.AddMaxAge > 0 {
		e.ExpiresAt = e.QueuedAt.Add(s.opt.AddMaxAge)
	}
	var id uint64
	var ch changes
	err := s.do(ctx, modeCreate, func(db *bolt.DB) error {
		ch, id = changes{}, 0
		return db.Update(func(tx *bolt.Tx) error {
			b := createBuckets(tx, q.k)
			if b.err != nil {
				return b.err
			}
			if err := s.expire(b, now, &ch); err != nil {
				return err
			}
			if s.opt.AddLimit > 0 && atLeast(b.pendingFor(e.Fingerprint), s.opt.AddLimit) {
				// The task's own bound: its entry gives way, never
				// the entries other tasks left.
				ch.notAdded++
				return b.meta.Put(q.k.keyDropped, itob(btoi(b.meta.Get(q.k.keyDropped))+1))
			}
			var err error
			if id, err = b.put(b.pendingFor(e.Fingerprint), e); err != nil {
				return err
			}
			return s.bound(b, &ch)
		})
	})
	if err != nil {
		return 0, err
	}
	s.logChanges(q.k, ch)
	if id == 0 {
		return 0, fmt.Errorf("%w: %d entries pending already, the limit this task set (PADDLE_SPOOL_MAX)", ErrFull, s.opt.AddLimit)
	}
	return id, nil
}

// Attempted records a failed delivery attempt of pending entry id: one more
// attempt, its error and its time. An id that is no longer pending (another
// process delivered, dropped or expired it) is not an error.
func (q *Queue) Attempted(ctx context.Context, id uint64, lastErr string) error {
	now := q.s.opt.Now()
	return q.patchPending(ctx, id, func(v []byte) map[string]any {
		e, ok := decode(itob(id), v)
		if !ok {
			return nil // Oldest buries it; nothing worth counting here
		}
		return map[string]any{"attempts": e.Attempts + 1, "last_error": lastErr, "last_attempt": now}
	})
}

// Hold keeps pending entry id from being handed out to other processes
// until until (a zero time releases it): the writer of a write-ahead
// entry renews it while it keeps trying, and releases it when it stops.
func (q *Queue) Hold(ctx context.Context, id uint64, until time.Time) error {
	var val any
	if !until.IsZero() {
		val = until
	}
	return q.patchPending(ctx, id, func([]byte) map[string]any { return map[string]any{"held_until": val} })
}

// patchPending sets the fields that fields returns (nil: none) in pending
// entry id's record. An id that is no longer pending, or a record that
// cannot be patched, is left as it is: not an error.
func (q *Queue) patchPending(ctx context.Context, id uint64, fields func(v []byte) map[string]any) error {
	return q.s.update(ctx, q.k, func(b buckets, _ *changes) error {
		bk, v := b.findPending(id)
		if v == nil {
			return nil
		}
		f := fields(v)
		if f == nil {
			return nil
		}
		nv, err := patch(v, f)
		if err != nil {
			return nil
		}
		return bk.Put(itob(id), nv)
	})
}

// Delete removes pending entry id once its delivery was answered 2xx/409.
// An id that is no longer pending is not an error.
func (q *Queue) Delete(ctx context.Context, id uint64) error {
	return q.DeleteMany(ctx, []uint64{id})
}

// DeleteMany removes the given pending entries in one transaction, which
// costs one file open and one fsync however many there are.
func (q *Queue) DeleteMany(ctx context.Context, ids []uint64) error {
	s := q.s
	if len(ids) == 0 {
		return nil
	}
	return s.update(ctx, q.k, func(b buckets, _ *changes) error {
		for _, id := range ids {
			for _, bk := range []*bolt.Bucket{b.pendingT, b.pending} {
				if err := bk.Delete(itob(id)); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// Bury moves pending entry id to the dead letters with the monitor's answer.
// An id that is no longer pending is not an error.
func (q *Queue) Bury(ctx context.Context, id uint64, answer string) error {
	s := q.s
	now := s.opt.Now()
	return s.update(ctx, q.k, func(b buckets, ch *changes) error {
		bk, v := b.findPending(id)
		if v == nil {
			return nil
		}
		if err := bury(b, bk, itob(id), v, answer, now); err != nil {
			return err
		}
		return s.bound(b, ch)
	})
}

// BuryNew stores e directly as a dead letter with the monitor's answer, and
// creates the file if need be. e needs a task id and a JSON object payload.
func (q *Queue) BuryNew(ctx context.Context, e Entry, answer string) error {
	s := q.s
	if err := checkNew(e); err != nil {
		return err
	}
	now := s.opt.Now()
	e.Version, e.Answer, e.DeadAt = RecordVersion, answer, now
	if e.QueuedAt.IsZero() {
		e.QueuedAt = now
	}
	var ch changes
	err := s.do(ctx, modeCreate, func(db *bolt.DB) error {
		ch = changes{}
		return db.Update(func(tx *bolt.Tx) error {
			b := createBuckets(tx, q.k)
			if b.err != nil {
				return b.err
			}
			if _, err := b.put(b.deadFor(e.Fingerprint), e); err != nil {
				return err
			}
			return s.bound(b, &ch)
		})
	})
	if err == nil {
		s.logChanges(q.k, ch)
	}
	return err
}
