package spool

import (
	"bytes"
	"context"
	"encoding/json"
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
//
// Completions with a fingerprint live in buckets of their own too
// (completions_by_token, completions_dead_by_token), which the versions
// that read only completions never see; their ids come from the
// completions bucket's sequence.
var (
	bucketCompletions      = []byte("completions")
	bucketCompletionsDead  = []byte("completions_dead")
	bucketCompletionsT     = []byte("completions_by_token")
	bucketCompletionsDeadT = []byte("completions_dead_by_token")
	keyCompletionsDropped  = []byte("completions_dropped")
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
			dst := c.pending
			if e.Fingerprint != "" {
				dst = c.pendingT
			}
			if err := dst.Put(itob(id), v); err != nil {
				return err
			}
			dropped, err = trim(dst, c.meta, keyCompletionsDropped, s.opt.MaxEntries)
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
		if err := c.pendingT.Delete(itob(id)); err != nil {
			return err
		}
		return c.pending.Delete(itob(id))
	})
}

// AttemptedCompletion records a failed delivery attempt of completion id.
func (s *Spool) AttemptedCompletion(ctx context.Context, id uint64, lastErr string) error {
	now := s.opt.Now()
	return s.updateCompletions(ctx, func(c completions) error {
		bk, _, v := c.find(id)
		e, ok := decode(itob(id), v)
		if v == nil || !ok {
			return nil
		}
		nv, err := patch(v, map[string]any{"attempts": e.Attempts + 1, "last_error": lastErr, "last_attempt": now})
		if err != nil {
			return nil
		}
		return bk.Put(itob(id), nv)
	})
}

// BuryCompletion moves pending completion id to the completions' dead
// letters with the monitor's answer.
func (s *Spool) BuryCompletion(ctx context.Context, id uint64, answer string) error {
	now := s.opt.Now()
	return s.updateCompletions(ctx, func(c completions) error {
		bk, dead, v := c.find(id)
		if v == nil {
			return nil
		}
		nv, err := patch(v, map[string]any{"answer": answer, "dead_at": now})
		if err != nil {
			nv = v
		}
		if err := dead.Put(itob(id), nv); err != nil {
			return err
		}
		if err := bk.Delete(itob(id)); err != nil {
			return err
		}
		_, err = trim(dead, c.meta, keyCompletionsDropped, s.opt.MaxEntries)
		return err
	})
}

// ReadyCompletions returns up to n pending completions (n <= 0: all),
// oldest first, whose task's registration is not pending, that this
// process may send (Options.Sendable) and that nobody holds: those that may
// be sent now. Undecodable records are skipped (they stay for an operator).
func (s *Spool) ReadyCompletions(ctx context.Context, n int) ([]Entry, error) {
	if s.missing() {
		return nil, nil
	}
	var out []Entry
	err := s.do(ctx, modeRead, func(db *bolt.DB) error {
		out = nil
		now := s.opt.Now()
		return db.View(func(tx *bolt.Tx) error {
			registering := pendingTasks(tx)
			return walkMerged(tx, [][]byte{bucketCompletions, bucketCompletionsT}, func(_, k, v []byte) bool {
				if n > 0 && len(out) >= n {
					return false
				}
				if e, ok := decode(k, v); ok && !registering[e.TaskID] && s.sendable(e.Fingerprint) && (s.opt.IgnoreHolds || !now.Before(e.HeldUntil)) {
					out = append(out, e)
				}
				return true
			})
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
			for _, name := range [][]byte{bucketCompletions, bucketCompletionsT} {
				if bk := tx.Bucket(name); bk != nil {
					st.Pending += bk.Stats().KeyN
				}
			}
			for _, name := range [][]byte{bucketCompletionsDead, bucketCompletionsDeadT} {
				if bk := tx.Bucket(name); bk != nil {
					st.Dead += bk.Stats().KeyN
				}
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
	if dead {
		return s.listBuckets(ctx, [][]byte{bucketCompletionsDead, bucketCompletionsDeadT}, false)
	}
	return s.listBuckets(ctx, [][]byte{bucketCompletions, bucketCompletionsT}, false)
}

// pendingTasks returns the task ids of the pending registrations. It reads
// only each record's task_id; MaxEntries bounds the walk.
func pendingTasks(tx *bolt.Tx) map[string]bool {
	ids := map[string]bool{}
	for _, name := range [][]byte{bucketPending, bucketPendingT} {
		p := tx.Bucket(name)
		if p == nil {
			continue
		}
		p.ForEach(func(k, v []byte) error {
			if e, ok := decodeLenient(k, v); ok && e.TaskID != "" {
				ids[e.TaskID] = true
			}
			return nil
		})
	}
	return ids
}

// foreign counts the pending registrations and completions this process
// may not send, and those of the previous format.
func (s *Spool) foreign(tx *bolt.Tx) (foreign, legacy int) {
	for _, name := range [][]byte{bucketPending, bucketCompletions, bucketPendingT, bucketCompletionsT} {
		bk := tx.Bucket(name)
		if bk == nil {
			continue
		}
		old := bytes.Equal(name, bucketPending) || bytes.Equal(name, bucketCompletions)
		if old {
			legacy += bk.Stats().KeyN
		}
		if s.opt.Sendable == nil {
			continue
		}
		bk.ForEach(func(_, v []byte) error {
			var r struct {
				Fingerprint string `json:"fingerprint"`
			}
			json.Unmarshal(v, &r)
			if old {
				r.Fingerprint = ""
			}
			if !s.opt.Sendable(r.Fingerprint) {
				foreign++
			}
			return nil
		})
	}
	return foreign, legacy
}

type completions struct {
	pending, dead, meta *bolt.Bucket
	pendingT, deadT     *bolt.Bucket
}

// find returns the pending completions bucket holding id, its family's
// dead letters, and the record.
func (c completions) find(id uint64) (pending, dead *bolt.Bucket, v []byte) {
	if v := c.pendingT.Get(itob(id)); v != nil {
		return c.pendingT, c.deadT, v
	}
	if v := c.pending.Get(itob(id)); v != nil {
		return c.pending, c.dead, v
	}
	return nil, nil, nil
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
	if c.pendingT, err = tx.CreateBucketIfNotExists(bucketCompletionsT); err != nil {
		return c, err
	}
	if c.deadT, err = tx.CreateBucketIfNotExists(bucketCompletionsDeadT); err != nil {
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

// LegacyPending counts the pending registrations and completions of the
// previous format (no fingerprint): those only `spool flush --legacy`
// sends. A missing file has none.
func (s *Spool) LegacyPending(ctx context.Context) (int, error) {
	if s.missing() {
		return 0, nil
	}
	n := 0
	err := s.do(ctx, modeRead, func(db *bolt.DB) error {
		n = 0
		return db.View(func(tx *bolt.Tx) error {
			for _, name := range [][]byte{bucketPending, bucketCompletions} {
				if bk := tx.Bucket(name); bk != nil {
					n += bk.Stats().KeyN
				}
			}
			return nil
		})
	})
	return n, err
}

// HoldCompletion is Hold for pending completion id.
func (s *Spool) HoldCompletion(ctx context.Context, id uint64, until time.Time) error {
	return s.updateCompletions(ctx, func(c completions) error {
		bk, _, v := c.find(id)
		if v == nil {
			return nil
		}
		var val any
		if !until.IsZero() {
			val = until
		}
		nv, err := patch(v, map[string]any{"held_until": val})
		if err != nil {
			return nil
		}
		return bk.Put(itob(id), nv)
	})
}
