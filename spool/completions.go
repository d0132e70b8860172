package spool

import (
	"context"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Completions (supervise mode) live in buckets of their own, which
// entrypoints of older versions never read: none of them can ever send a
// completion as a registration. They follow the registrations' rules
// (at-least-once, bounded by MaxEntries, dead letters with the answer), and
// one more: a completion is handed out for sending only while its task's
// registration is not pending, so the monitor always hears of a task's
// start before its end. Salvage of a corrupt file carries registrations
// over, not completions.
var (
	bucketCompletions     = []byte("completions")
	bucketCompletionsDead = []byte("completions_dead")
	keyCompletionsDropped = []byte("completions_dropped")
)

// CompletionStats counts a spool's completions.
type CompletionStats struct {
	Pending int `json:"completions_pending"`
	Dead    int `json:"completions_dead"`
	Dropped int `json:"completions_dropped"`
}

// EnqueueCompletion adds e as a pending completion and returns its id,
// creating the file if need be. e needs a task id and a JSON object payload.
func (s *Spool) EnqueueCompletion(ctx context.Context, e Entry) (uint64, error) {
	if err := checkNew(e); err != nil {
		return 0, err
	}
	e.Version, e.Answer, e.DeadAt = RecordVersion, "", time.Time{}
	if e.QueuedAt.IsZero() {
		e.QueuedAt = s.opt.Now()
	}
	var id uint64
	var dropped int
	err := s.do(ctx, modeCreate, func(db *bolt.DB) error {
		return db.Update(func(tx *bolt.Tx) error {
			c, err := completionBuckets(tx)
			if err != nil {
				return err
			}
			if id, err = c.pending.NextSequence(); err != nil {
				return err
			}
			e.ID = id
			v, err := marshal(e)
			if err != nil {
				return err
			}
			if err := c.pending.Put(itob(id), v); err != nil {
				return err
			}
			dropped, err = trim(c.pending, c.meta, keyCompletionsDropped, s.opt.MaxEntries)
			return err
		})
	})
	if dropped > 0 {
		s.log.Warn("spool: full, oldest completions dropped", "path", s.opt.Path, "count", dropped, "max", s.opt.MaxEntries)
	}
	return id, err
}

// DeleteCompletion removes pending completion id once its delivery was
// answered 2xx/409. An id that is no longer pending is not an error.
func (s *Spool) DeleteCompletion(ctx context.Context, id uint64) error {
	return s.updateCompletions(ctx, func(c completions) error {
		return c.pending.Delete(itob(id))
	})
}

// AttemptedCompletion records a failed delivery attempt of completion id.
func (s *Spool) AttemptedCompletion(ctx context.Context, id uint64, lastErr string) error {
	now := s.opt.Now()
	return s.updateCompletions(ctx, func(c completions) error {
		v := c.pending.Get(itob(id))
		e, ok := decode(itob(id), v)
		if v == nil || !ok {
			return nil
		}
		nv, err := patch(v, map[string]any{"attempts": e.Attempts + 1, "last_error": lastErr, "last_attempt": now})
		if err != nil {
			return nil
		}
		return c.pending.Put(itob(id), nv)
	})
}

// BuryCompletion moves pending completion id to the completions' dead
// letters with the monitor's answer.
func (s *Spool) BuryCompletion(ctx context.Context, id uint64, answer string) error {
	now := s.opt.Now()
	return s.updateCompletions(ctx, func(c completions) error {
		v := c.pending.Get(itob(id))
		if v == nil {
			return nil
		}
		nv, err := patch(v, map[string]any{"answer": answer, "dead_at": now})
		if err != nil {
			nv = v
		}
		if err := c.dead.Put(itob(id), nv); err != nil {
			return err
		}
		if err := c.pending.Delete(itob(id)); err != nil {
			return err
		}
		_, err = trim(c.dead, c.meta, keyCompletionsDropped, s.opt.MaxEntries)
		return err
	})
}

// ReadyCompletions returns up to n pending completions (n <= 0: all),
// oldest first, whose task's registration is not pending: those that may be
// sent now. Undecodable records are skipped (they stay for an operator).
func (s *Spool) ReadyCompletions(ctx context.Context, n int) ([]Entry, error) {
	if s.missing() {
		return nil, nil
	}
	var out []Entry
	err := s.do(ctx, modeRead, func(db *bolt.DB) error {
		out = nil
		return db.View(func(tx *bolt.Tx) error {
			c := tx.Bucket(bucketCompletions)
			if c == nil {
				return nil
			}
			registering := pendingTasks(tx)
			cur := c.Cursor()
			for k, v := cur.First(); k != nil && (n <= 0 || len(out) < n); k, v = cur.Next() {
				if e, ok := decode(k, v); ok && !registering[e.TaskID] {
					out = append(out, e)
				}
			}
			return nil
		})
	})
	return out, err
}

// RegistrationPending reports whether taskID's registration is pending.
func (s *Spool) RegistrationPending(ctx context.Context, taskID string) (bool, error) {
	if s.missing() {
		return false, nil
	}
	var pending bool
	err := s.do(ctx, modeRead, func(db *bolt.DB) error {
		return db.View(func(tx *bolt.Tx) error {
			pending = pendingTasks(tx)[taskID]
			return nil
		})
	})
	return pending, err
}

// CompletionStats counts pending, dead and dropped completions.
func (s *Spool) CompletionStats(ctx context.Context) (CompletionStats, error) {
	if s.missing() {
		return CompletionStats{}, nil
	}
	var st CompletionStats
	err := s.do(ctx, modeRead, func(db *bolt.DB) error {
		return db.View(func(tx *bolt.Tx) error {
			if bk := tx.Bucket(bucketCompletions); bk != nil {
				st.Pending = bk.Stats().KeyN
			}
			if bk := tx.Bucket(bucketCompletionsDead); bk != nil {
				st.Dead = bk.Stats().KeyN
			}
			if bk := tx.Bucket(bucketMeta); bk != nil {
				st.Dropped = int(btoi(bk.Get(keyCompletionsDropped)))
			}
			return nil
		})
	})
	return st, err
}

// ListCompletions returns every pending completion, or every dead one; a
// record it cannot decode is left out.
func (s *Spool) ListCompletions(ctx context.Context, dead bool) ([]Entry, error) {
	name := bucketCompletions
	if dead {
		name = bucketCompletionsDead
	}
	return s.listBucket(ctx, name, false)
}

// pendingTasks returns the task ids of the pending registrations. It reads
// only each record's task_id; MaxEntries bounds the walk.
func pendingTasks(tx *bolt.Tx) map[string]bool {
	ids := map[string]bool{}
	p := tx.Bucket(bucketPending)
	if p == nil {
		return ids
	}
	p.ForEach(func(k, v []byte) error {
		if e, ok := decodeLenient(k, v); ok && e.TaskID != "" {
			ids[e.TaskID] = true
		}
		return nil
	})
	return ids
}

type completions struct {
	pending, dead, meta *bolt.Bucket
}

func completionBuckets(tx *bolt.Tx) (completions, error) {
	var c completions
	var err error
	if c.pending, err = tx.CreateBucketIfNotExists(bucketCompletions); err != nil {
		return c, err
	}
	if c.dead, err = tx.CreateBucketIfNotExists(bucketCompletionsDead); err != nil {
		return c, err
	}
	c.meta, err = tx.CreateBucketIfNotExists(bucketMeta)
	return c, err
}

// updateCompletions runs fn in one write transaction on an existing file.
func (s *Spool) updateCompletions(ctx context.Context, fn func(completions) error) error {
	if s.missing() {
		return nil
	}
	return s.do(ctx, modeModify, func(db *bolt.DB) error {
		return db.Update(func(tx *bolt.Tx) error {
			c, err := completionBuckets(tx)
			if err != nil {
				return err
			}
			return fn(c)
		})
	})
}
