package spool

import (
	"bytes"
	"context"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Oldest returns up to n pending entries this process may send
// (Options.Sendable) and nobody holds (Entry.HeldUntil), oldest first, of
// both formats (n <= 0: all). On the way it moves entries past MaxAge and
// undecodable records to the dead letters (a write only when there is
// something to move). A record of a newer version is returned with what
// this version understands of it.
func (q *Queue) Oldest(ctx context.Context, n int) ([]Entry, error) {
	s := q.s
	if s.missing() {
		return nil, nil
	}
	now := s.opt.Now()
	var out []Entry
	var ch changes
	err := s.do(ctx, modeModify, func(db *bolt.DB) error {
		out, ch = nil, changes{}
		type move struct {
			bucket []byte
			k      []byte
		}
		var expired, undecodable []move
		err := db.View(func(tx *bolt.Tx) error {
			var waiting map[string]bool
			if q.k.after != nil {
				waiting = pendingTasks(tx, *q.k.after)
			}
			return walkMerged(tx, [][]byte{q.k.pending, q.k.pendingT}, func(name, k, v []byte) bool {
				if n > 0 && len(out) >= n || len(expired)+len(undecodable) >= maxMoves {
					return false
				}
				e, ok := decode(k, v)
				switch {
				case !ok:
					undecodable = append(undecodable, move{name, clone(k)})
				case s.isExpired(e, now):
					expired = append(expired, move{name, clone(k)})
				case s.sendable(e.Fingerprint) && (s.opt.IgnoreHolds || !now.Before(e.HeldUntil)) && !waiting[e.TaskID]:
					out = append(out, e)
				}
				return true
			})
		})
		if err != nil || len(expired)+len(undecodable) == 0 && !s.overBound(db, q.k) {
			return err
		}
		return db.Update(func(tx *bolt.Tx) error {
			b := createBuckets(tx, q.k)
			if b.err != nil {
				return b.err
			}
			for _, x := range []struct {
				moves  []move
				answer string
			}{{expired, AnswerExpired}, {undecodable, AnswerUndecodable}} {
				for _, m := range x.moves {
					if err := s.expireOne(b, tx.Bucket(m.bucket), m.k, x.answer, now, &ch); err != nil {
						return err
					}
				}
			}
			return s.bound(b, &ch)
		})
	})
	if err != nil {
		return nil, err
	}
	s.logChanges(q.k, ch)
	return out, nil
}

// walkMerged walks the named buckets together in key order (ids are
// unique across them, so this is oldest first), until fn returns false.
func walkMerged(tx *bolt.Tx, names [][]byte, fn func(name, k, v []byte) bool) error {
	type cur struct {
		name []byte
		c    *bolt.Cursor
		k, v []byte
	}
	var curs []*cur
	for _, name := range names {
		if bk := tx.Bucket(name); bk != nil {
			c := &cur{name: name, c: bk.Cursor()}
			c.k, c.v = c.c.First()
			curs = append(curs, c)
		}
	}
	for {
		var next *cur
		for _, c := range curs {
			if c.k != nil && (next == nil || bytes.Compare(c.k, next.k) < 0) {
				next = c
			}
		}
		if next == nil {
			return nil
		}
		if !fn(next.name, next.k, next.v) {
			return nil
		}
		next.k, next.v = next.c.Next()
	}
}

// overBound reports, cheaply, whether a pending bucket may hold more
// than MaxEntries: a node's drainer started with a lower --spool-max
// applies it even when nothing else changes.
func (s *Spool) overBound(db *bolt.DB, k Kind) bool {
	over := false
	db.View(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{k.pending, k.pendingT} {
			p := tx.Bucket(name)
			if p == nil || s.opt.MaxEntries <= 0 {
				continue
			}
			c := p.Cursor()
			first, _ := c.First()
			if first == nil {
				continue // Last is asked only of a bucket with a key (trim)
			}
			last, _ := c.Last()
			over = over || len(first) != 8 || len(last) != 8 || btoi(last)-btoi(first) >= uint64(s.opt.MaxEntries)
		}
		return nil
	})
	return over
}

// List returns every pending entry, or every dead letter when dead is true,
// oldest first. It only reads: a record it cannot decode is listed with the
// answer "undecodable record" and its bytes in the payload.
func (q *Queue) List(ctx context.Context, dead bool) ([]Entry, error) {
	if dead {
		return q.listBuckets(ctx, [][]byte{q.k.dead, q.k.deadT}, true)
	}
	return q.listBuckets(ctx, [][]byte{q.k.pending, q.k.pendingT}, true)
}

// listBuckets returns the entries of the named buckets, oldest first. A
// record it cannot decode is listed as undecodable when keepUndecodable is
// true, and left out otherwise.
func (q *Queue) listBuckets(ctx context.Context, names [][]byte, keepUndecodable bool) ([]Entry, error) {
	s := q.s
	if s.missing() {
		return nil, nil
	}
	var out []Entry
	err := s.do(ctx, modeRead, func(db *bolt.DB) error {
		out = nil
		return db.View(func(tx *bolt.Tx) error {
			var err error
			werr := walkMerged(tx, names, func(_, k, v []byte) bool {
				if err = stopped(ctx, len(out)); err != nil {
					return false
				}
				e, ok := decodeLenient(k, v)
				switch {
				case ok:
				case keepUndecodable:
					e = undecodableEntry(k, v, time.Time{})
				default:
					return true
				}
				out = append(out, e)
				return true
			})
			if err != nil {
				return err
			}
			return werr
		})
	})
	return out, err
}

// Stats counts the queue's pending, dead, dropped and expired entries, and
// the pending ones this process may not send (Foreign) or that have no
// fingerprint (Legacy).
func (q *Queue) Stats(ctx context.Context) (Stats, error) {
	return q.stats(ctx, nil)
}

// stats is Stats, with Foreign and Legacy counting kind also's entries too.
func (q *Queue) stats(ctx context.Context, also *Kind) (Stats, error) {
	s := q.s
	if s.missing() {
		return Stats{}, nil
	}
	var st Stats
	err := s.do(ctx, modeRead, func(db *bolt.DB) error {
		st = Stats{}
		return db.View(func(tx *bolt.Tx) error {
			for _, name := range [][]byte{q.k.pending, q.k.pendingT} {
				if bk := tx.Bucket(name); bk != nil {
					st.Pending += bk.Stats().KeyN
				}
			}
			for _, name := range [][]byte{q.k.dead, q.k.deadT} {
				if bk := tx.Bucket(name); bk != nil {
					st.Dead += bk.Stats().KeyN
				}
			}
			st.Foreign, st.Legacy = s.foreign(tx, q.k)
			if also != nil {
				f, l := s.foreign(tx, *also)
				st.Foreign, st.Legacy = st.Foreign+f, st.Legacy+l
			}
			if bk := tx.Bucket(bucketMeta); bk != nil {
				st.Dropped = int(btoi(bk.Get(q.k.keyDropped)))
				if !bytes.Equal(q.k.keyDeadDrop, q.k.keyDropped) {
					st.DeadDropped = int(btoi(bk.Get(q.k.keyDeadDrop)))
				}
				if q.k.keyExpired != nil {
					st.Expired = int(btoi(bk.Get(q.k.keyExpired)))
				}
			}
			return nil
		})
	})
	return st, err
}

// Requeue moves every dead letter of the queue (and of the kinds also, in
// the same file) back to pending and returns how many, all in one
// transaction: a requeue cut short moves none. A requeued entry gets a new
// id at the back of its kind's queue, its attempts reset to zero and its
// answer cleared, so it is tried again as if new; it keeps its task id,
// payload, first queued time and last error, and RequeuedAt records the
// move (its age for MaxAge counts from then). Dead letters that cannot be
// sent (undecodable records) stay dead.
func (q *Queue) Requeue(ctx context.Context, also ...Kind) (int, error) {
	s := q.s
	if s.missing() {
		return 0, nil
	}
	now := s.opt.Now()
	kinds := q.kinds(also)
	var moved, kept int
	var ch []changes
	err := s.do(ctx, modeModify, func(db *bolt.DB) error {
		moved, kept, ch = 0, 0, make([]changes, len(kinds))
		return db.Update(func(tx *bolt.Tx) error {
			for i, k := range kinds {
				b := createBuckets(tx, k)
				if b.err != nil {
					return b.err
				}
				m, n, err := requeueKind(ctx, b, now)
				moved, kept = moved+m, kept+n
				if err != nil {
					return err // rolled back: the file is as it was
				}
				if err := s.bound(b, &ch[i]); err != nil {
					return err
				}
			}
			return nil
		})
	})
	if err != nil {
		return 0, err
	}
	if kept > 0 {
		s.log.Warn("spool: dead letters that cannot be sent stay dead", "path", s.opt.Path, "count", kept)
	}
	for i, k := range kinds {
		s.logChanges(k, ch[i])
	}
	return moved, nil
}

// kinds is the queue's kind followed by those of also that are not it.
func (q *Queue) kinds(also []Kind) []Kind {
	out := []Kind{q.k}
	for _, k := range also {
		if k.valid() && !slices.ContainsFunc(out, func(o Kind) bool { return o.name == k.name }) {
			out = append(out, k)
		}
	}
	return out
}

// requeueKind moves the dead letters of b's kind back to pending, within
// the caller's transaction, and returns how many it moved and kept dead.
func requeueKind(ctx context.Context, b buckets, now time.Time) (moved, kept int, err error) {
	for _, fam := range []struct{ dead, pending *bolt.Bucket }{{b.dead, b.pending}, {b.deadT, b.pendingT}} {
		var keys [][]byte
		c := fam.dead.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if err := stopped(ctx, len(keys)+kept); err != nil {
				return moved, kept, err
			}
			if _, ok := decode(k, v); !ok {
				kept++
				continue
			}
			keys = append(keys, clone(k))
		}
		for i, k := range keys {
			if err := stopped(ctx, i); err != nil {
				return moved, kept, err
			}
			nv, err := patch(fam.dead.Get(k), map[string]any{
				"attempts":    0,
				"answer":      nil,
				"dead_at":     nil,
				"expires_at":  nil,
				"held_until":  nil,
				"requeued_at": now,
			})
			if err != nil {
				kept++
				continue
			}
			seq, err := b.pending.NextSequence()
			if err != nil {
				return moved, kept, err
			}
			if nv, err = patch(nv, map[string]any{"id": seq}); err != nil {
				return moved, kept, err
			}
			if err := fam.pending.Put(itob(seq), nv); err != nil {
				return moved, kept, err
			}
			if err := fam.dead.Delete(k); err != nil {
				return moved, kept, err
			}
			moved++
		}
	}
	return moved, kept, nil
}

// PurgeDead deletes every dead letter of the queue (and of the kinds also,
// in the same file, in the same transaction) and returns how many.
func (q *Queue) PurgeDead(ctx context.Context, also ...Kind) (int, error) {
	s := q.s
	if s.missing() {
		return 0, nil
	}
	var n int
	err := s.do(ctx, modeModify, func(db *bolt.DB) error {
		n = 0
		return db.Update(func(tx *bolt.Tx) error {
			for _, k := range q.kinds(also) {
				for _, name := range [][]byte{k.dead, k.deadT} {
					bk := tx.Bucket(name)
					if bk == nil {
						continue
					}
					n += bk.Stats().KeyN // nothing written yet in this transaction
					if err := tx.DeleteBucket(name); err != nil {
						return err
					}
					if _, err := tx.CreateBucket(name); err != nil {
						return err
					}
				}
			}
			return nil
		})
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}
