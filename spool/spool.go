// Package spool keeps registrations that could not be delivered yet in a
// bbolt file, so that a later start or a node-level drainer sends them.
//
// Guarantees:
//
//   - At-least-once. An entry leaves the pending bucket only when its
//     caller deletes it (which the registration code does only after the
//     monitor answered 2xx or 409), buries it as a dead letter, or when
//     the bounds below drop or expire it. Two processes may send the same
//     entry; the task id, sent as the Idempotency-Key, makes that harmless.
//   - Crash safety. Every change is one bbolt transaction, committed with
//     fsync: a process killed at any moment leaves each entry either fully
//     written or absent, and a file that opens.
//   - Bounded. At most Options.MaxEntries pending entries (and as many dead
//     letters): past that the oldest are dropped and counted. Pending
//     entries older than Options.MaxAge move to the dead letters with the
//     answer "expired".
//   - Shared safely. The file is opened for each operation and closed
//     after it, so its lock is never held across a network call; the lock
//     is waited for at most Options.LockTimeout (or the context's deadline),
//     then the operation fails with ErrLocked instead of hanging.
//   - Corruption is survived. A file that is not a valid bbolt file, whose
//     meta pages fail their checksum (either one of the two: bbolt would
//     silently fall back on the other), that is shorter than its own page
//     count, or that makes bbolt panic or fault while reading it, is renamed
//     to <path>.corrupt-<unix-time>; what can still be read from it is
//     copied into a fresh spool, an error is logged, and the operation goes
//     on with the fresh spool. A lock timeout, a permission error, a
//     read-only file system or a full disk never renames anything: the
//     operation fails with ErrLocked or ErrUnavailable.
//   - Versioned records. Each entry is a JSON record with a record_version.
//     Fields this version does not know are ignored when reading and kept
//     when updating, so entrypoints of different versions can share one
//     node's spool; a record that cannot be decoded at all is moved to the
//     dead letters with the answer "undecodable record" rather than lost.
//
// Reading a spool file that does not exist (Oldest, List, Stats) returns
// nothing and creates nothing: only Enqueue and BuryNew create the file
// (mode 0600, and its directory, 0700, when the directory is missing).
package spool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// RecordVersion is the version of the entry record this package writes.
const RecordVersion = 1

// DefaultLockTimeout is the lock wait used when Options.LockTimeout is zero.
const DefaultLockTimeout = time.Second

// Answers recorded on dead letters this package buries by itself.
const (
	AnswerExpired     = "expired"
	AnswerUndecodable = "undecodable record"
)

// Errors, for errors.Is.
var (
	// ErrLocked: another process held the file lock past the lock timeout.
	ErrLocked = errors.New("spool: file locked by another process")
	// ErrUnavailable: the file cannot be opened or written (permissions,
	// read-only file system, full disk).
	ErrUnavailable = errors.New("spool: unavailable")
	// ErrUntrusted: the path names something this process must not use as
	// its spool: a symbolic link, not a regular file, a file of another
	// user, or one other users may write. It is never renamed or changed.
	// An error wrapping it wraps ErrUnavailable too.
	ErrUntrusted = errors.New("spool: file not trusted")
	// ErrCorrupt: the file was found corrupt and could not be renamed
	// aside (an error wrapping it wraps ErrUnavailable too). A corrupt
	// file that was renamed aside is not an error: the operation goes on
	// with a fresh spool and the event is logged.
	ErrCorrupt = errors.New("spool: file corrupt")
	// ErrFull: the entry was not added, as the limit the task set on what
	// it adds (Options.AddLimit) was reached; it was counted as dropped.
	ErrFull = errors.New("spool: full for this task")
)

// Entry is one registration waiting for delivery, or a dead letter.
type Entry struct {
	ID          uint64          `json:"id"`
	Version     int             `json:"record_version"`
	TaskID      string          `json:"task_id"`
	Payload     json.RawMessage `json:"payload"`
	QueuedAt    time.Time       `json:"queued_at"`
	Attempts    int             `json:"attempts"`
	LastError   string          `json:"last_error,omitempty"`
	LastAttempt time.Time       `json:"last_attempt,omitzero"`
	// Answer is why a dead letter is dead: the monitor's answer or "expired".
	Answer string    `json:"answer,omitempty"`
	DeadAt time.Time `json:"dead_at,omitzero"`
	// RequeuedAt is when an operator last moved the entry back from the dead
	// letters; its age for PADDLE_SPOOL_MAX_AGE counts from then.
	RequeuedAt time.Time `json:"requeued_at,omitzero"`
	// ExpiresAt is the bound the task that added the entry set on its own
	// entry (Options.AddMaxAge); zero: only the node's MaxAge applies.
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	// Fingerprint names the token the entry was written for: the first
	// 16 hex digits of its SHA-256, FingerprintNone or
	// FingerprintUnusable; empty in entries of the previous format. Only
	// a process holding that token sends the entry (Options.Sendable).
	Fingerprint string `json:"fingerprint,omitempty"`
	// HeldUntil: the process that wrote the entry ahead of its own
	// delivery is still trying it until then; nobody else hands it out
	// before, so two processes never race on one entry (a delivered task
	// could become a dead letter of the other's).
	HeldUntil time.Time `json:"held_until,omitzero"`
}

// Stats counts a spool's entries.
type Stats struct {
	Pending int `json:"pending"`
	Dead    int `json:"dead"`
	// Dropped counts pending entries dropped, oldest first, to keep at
	// most MaxEntries.
	Dropped int `json:"dropped"`
	// DeadDropped counts dead letters dropped to keep at most MaxEntries.
	DeadDropped int `json:"dead_dropped"`
	// Foreign counts the pending registrations and completions this
	// process may not send (Options.Sendable): another token's, or of the
	// previous format.
	Foreign int `json:"foreign"`
	// Legacy counts the pending registrations and completions of the
	// previous format (no fingerprint), sent only by spool flush --legacy.
	Legacy int `json:"legacy"`
}

// Options configure a spool.
type Options struct {
	Path string
	// MaxEntries and MaxAge are the node's bounds: they apply to every
	// entry of the file, whoever added it, so they come from the node (the
	// defaults, or the drainer's flags), never from a task's environment.
	MaxEntries int           // <= 0: unbounded
	MaxAge     time.Duration // <= 0: entries never expire
	// AddLimit and AddMaxAge are a task's own bounds (PADDLE_SPOOL_MAX,
	// PADDLE_SPOOL_MAX_AGE): they bound only what this process adds. An
	// entry is not added (it is counted as dropped) when AddLimit entries
	// are pending already; an entry added expires AddMaxAge after it was
	// queued. <= 0: no bound of its own.
	AddLimit  int
	AddMaxAge time.Duration
	// Sendable reports whether this process may send an entry written for
	// the token with fingerprint fp ("" for the previous format): Oldest
	// and ReadyCompletions hand out only those, and Stats counts the
	// others as foreign. nil: every entry.
	Sendable func(fp string) bool
	// IgnoreHolds: Oldest and ReadyCompletions hand out held entries too
	// (an operator's one-off spool flush, after a supervisor was killed).
	IgnoreHolds bool
	LockTimeout time.Duration    // upper bound on waiting for the file lock; ctx may cut it shorter; 0: DefaultLockTimeout
	Logger      *slog.Logger     // nil: discard
	Now         func() time.Time // nil: time.Now
}

// Spool is a spool file. It opens the file for each operation and closes it
// afterwards, so the lock is never held across a network call. A Spool is
// safe for concurrent use, and so is one file shared by many processes.
type Spool struct {
	opt Options
	log *slog.Logger
}

// New returns the spool at opt.Path; it touches no file.
func New(opt Options) *Spool {
	log := opt.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opt.LockTimeout <= 0 {
		opt.LockTimeout = DefaultLockTimeout
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	return &Spool{opt: opt, log: log}
}

// Path returns the spool file's path.
func (s *Spool) Path() string { return s.opt.Path }

// Enqueue adds e as pending and returns its id. The id, record version and
// any dead-letter fields of e are set by the spool; a zero QueuedAt is set
// to now. e needs a task id and a payload that is a JSON object. An entry
// with a fingerprint goes to the buckets older versions never read.
func (s *Spool) Enqueue(ctx context.Context, e Entry) (uint64, error) {
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
			b := createBuckets(tx)
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
				return b.meta.Put(keyDropped, itob(btoi(b.meta.Get(keyDropped))+1))
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
	s.logChanges(ch)
	if id == 0 {
		return 0, fmt.Errorf("%w: %d entries pending already, the limit this task set (PADDLE_SPOOL_MAX)", ErrFull, s.opt.AddLimit)
	}
	return id, nil
}

// Attempted records a failed delivery attempt of pending entry id: one more
// attempt, its error and its time. An id that is no longer pending (another
// process delivered, dropped or expired it) is not an error.
func (s *Spool) Attempted(ctx context.Context, id uint64, lastErr string) error {
	now := s.opt.Now()
	return s.update(ctx, func(b buckets, _ *changes) error {
		bk, v := b.findPending(id)
		if v == nil {
			return nil
		}
		e, ok := decode(itob(id), v)
		if !ok {
			return nil // Oldest buries it; nothing worth counting here
		}
		nv, err := patch(v, map[string]any{
			"attempts":     e.Attempts + 1,
			"last_error":   lastErr,
			"last_attempt": now,
		})
		if err != nil {
			return nil
		}
		return bk.Put(itob(id), nv)
	})
}

// Hold keeps pending entry id from being handed out to other processes
// until until (a zero time releases it): the writer of a write-ahead
// entry renews it while it keeps trying, and releases it when it stops.
func (s *Spool) Hold(ctx context.Context, id uint64, until time.Time) error {
	return s.update(ctx, func(b buckets, _ *changes) error {
		bk, v := b.findPending(id)
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

// Delete removes pending entry id once its delivery was answered 2xx/409.
// An id that is no longer pending is not an error.
func (s *Spool) Delete(ctx context.Context, id uint64) error {
	return s.DeleteMany(ctx, []uint64{id})
}

// DeleteMany removes the given pending entries in one transaction, which
// costs one file open and one fsync however many there are.
func (s *Spool) DeleteMany(ctx context.Context, ids []uint64) error {
	if len(ids) == 0 {
		return nil
	}
	return s.update(ctx, func(b buckets, _ *changes) error {
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
func (s *Spool) Bury(ctx context.Context, id uint64, answer string) error {
	now := s.opt.Now()
	return s.update(ctx, func(b buckets, ch *changes) error {
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
func (s *Spool) BuryNew(ctx context.Context, e Entry, answer string) error {
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
			b := createBuckets(tx)
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
		s.logChanges(ch)
	}
	return err
}

// Oldest returns up to n pending entries this process may send
// (Options.Sendable) and nobody holds (Entry.HeldUntil), oldest first, of
// both formats (n <= 0: all). On the way it moves entries past MaxAge and
// undecodable records to the dead letters (a write only when there is
// something to move). A record of a newer version is returned with what
// this version understands of it.
func (s *Spool) Oldest(ctx context.Context, n int) ([]Entry, error) {
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
			return walkMerged(tx, [][]byte{bucketPending, bucketPendingT}, func(name, k, v []byte) bool {
				if n > 0 && len(out) >= n || len(expired)+len(undecodable) >= maxMoves {
					return false
				}
				e, ok := decode(k, v)
				switch {
				case !ok:
					undecodable = append(undecodable, move{name, clone(k)})
				case s.isExpired(e, now):
					expired = append(expired, move{name, clone(k)})
				case s.sendable(e.Fingerprint) && (s.opt.IgnoreHolds || !now.Before(e.HeldUntil)):
					out = append(out, e)
				}
				return true
			})
		})
		if err != nil || len(expired)+len(undecodable) == 0 && !s.overBound(db) {
			return err
		}
		return db.Update(func(tx *bolt.Tx) error {
			b := createBuckets(tx)
			if b.err != nil {
				return b.err
			}
			for _, x := range []struct {
				moves  []move
				answer string
				n      *int
			}{{expired, AnswerExpired, &ch.expired}, {undecodable, AnswerUndecodable, &ch.undecodable}} {
				for _, m := range x.moves {
					bk := tx.Bucket(m.bucket)
					if v := bk.Get(m.k); v != nil {
						if err := bury(b, bk, m.k, v, x.answer, now); err != nil {
							return err
						}
						*x.n++
					}
				}
			}
			return s.bound(b, &ch)
		})
	})
	if err != nil {
		return nil, err
	}
	s.logChanges(ch)
	return out, nil
}

// sendable reports whether this process may send an entry written for fp.
func (s *Spool) sendable(fp string) bool {
	return s.opt.Sendable == nil || s.opt.Sendable(fp)
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
func (s *Spool) overBound(db *bolt.DB) bool {
	over := false
	db.View(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bucketPending, bucketPendingT} {
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
func (s *Spool) List(ctx context.Context, dead bool) ([]Entry, error) {
	if dead {
		return s.listBuckets(ctx, [][]byte{bucketDead, bucketDeadT}, true)
	}
	return s.listBuckets(ctx, [][]byte{bucketPending, bucketPendingT}, true)
}

// listBuckets returns the entries of the named buckets, oldest first. A
// record it cannot decode is listed as undecodable when keepUndecodable is
// true, and left out otherwise.
func (s *Spool) listBuckets(ctx context.Context, names [][]byte, keepUndecodable bool) ([]Entry, error) {
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

// Stats counts pending, dead and dropped entries.
func (s *Spool) Stats(ctx context.Context) (Stats, error) {
	if s.missing() {
		return Stats{}, nil
	}
	var st Stats
	err := s.do(ctx, modeRead, func(db *bolt.DB) error {
		st = Stats{}
		return db.View(func(tx *bolt.Tx) error {
			for _, name := range [][]byte{bucketPending, bucketPendingT} {
				if bk := tx.Bucket(name); bk != nil {
					st.Pending += bk.Stats().KeyN
				}
			}
			for _, name := range [][]byte{bucketDead, bucketDeadT} {
				if bk := tx.Bucket(name); bk != nil {
					st.Dead += bk.Stats().KeyN
				}
			}
			st.Foreign, st.Legacy = s.foreign(tx)
			if bk := tx.Bucket(bucketMeta); bk != nil {
				st.Dropped = int(btoi(bk.Get(keyDropped)))
				st.DeadDropped = int(btoi(bk.Get(keyDeadDropped)))
			}
			return nil
		})
	})
	return st, err
}

// Requeue moves every dead letter back to pending and returns how many. A
// requeued entry gets a new id at the back of the queue, its attempts reset
// to zero and its answer cleared, so it is tried again as if new; it keeps
// its task id, payload, first queued time and last error, and RequeuedAt
// records the move (its age for MaxAge counts from then). Dead letters that
// cannot be sent (undecodable records) stay dead.
func (s *Spool) Requeue(ctx context.Context) (int, error) {
	if s.missing() {
		return 0, nil
	}
	now := s.opt.Now()
	var moved, kept int
	var ch changes
	err := s.do(ctx, modeModify, func(db *bolt.DB) error {
		moved, kept, ch = 0, 0, changes{}
		return db.Update(func(tx *bolt.Tx) error {
			b := createBuckets(tx)
			if b.err != nil {
				return b.err
			}
			for _, fam := range []struct{ dead, pending *bolt.Bucket }{{b.dead, b.pending}, {b.deadT, b.pendingT}} {
				var keys [][]byte
				c := fam.dead.Cursor()
				for k, v := c.First(); k != nil; k, v = c.Next() {
					if err := stopped(ctx, len(keys)+kept); err != nil {
						return err // rolled back: the file is as it was
					}
					if _, ok := decode(k, v); !ok {
						kept++
						continue
					}
					keys = append(keys, clone(k))
				}
				for i, k := range keys {
					if err := stopped(ctx, i); err != nil {
						return err
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
						return err
					}
					if nv, err = patch(nv, map[string]any{"id": seq}); err != nil {
						return err
					}
					if err := fam.pending.Put(itob(seq), nv); err != nil {
						return err
					}
					if err := fam.dead.Delete(k); err != nil {
						return err
					}
					moved++
				}
			}
			return s.bound(b, &ch)
		})
	})
	if err != nil {
		return 0, err
	}
	if kept > 0 {
		s.log.Warn("spool: dead letters that cannot be sent stay dead", "path", s.opt.Path, "count", kept)
	}
	s.logChanges(ch)
	return moved, nil
}

// PurgeDead deletes every dead letter and returns how many.
func (s *Spool) PurgeDead(ctx context.Context) (int, error) {
	if s.missing() {
		return 0, nil
	}
	var n int
	err := s.do(ctx, modeModify, func(db *bolt.DB) error {
		n = 0
		return db.Update(func(tx *bolt.Tx) error {
			for _, name := range [][]byte{bucketDead, bucketDeadT} {
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
			return nil
		})
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// Files returns the per-UID spool files (spool-*.db) in dir, and the
// corrupt ones renamed aside that a drainer has not drained yet
// (spool-*.db.corrupt-*, see IsAside), sorted by name. Symbolic links and anything but regular files are left out; a
// missing dir has none.
func Files(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("spool: listing %s: %w", dir, err)
	}
	var out []string
	for _, de := range ents {
		name := de.Name()
		if !de.Type().IsRegular() || !strings.HasPrefix(name, "spool-") {
			continue
		}
		if path := filepath.Join(dir, name); strings.HasSuffix(name, ".db") || IsAside(path) {
			out = append(out, path)
		}
	}
	return out, nil
}

// missing reports whether the spool file does not exist, so reads of an
// absent spool cost one stat and create nothing.
func (s *Spool) missing() bool {
	_, err := os.Lstat(s.opt.Path)
	return errors.Is(err, os.ErrNotExist)
}

// update runs fn in one write transaction on an existing spool file (a
// missing file has nothing to update) and logs what the bounds changed.
func (s *Spool) update(ctx context.Context, fn func(buckets, *changes) error) error {
	if s.missing() {
		return nil
	}
	var ch changes
	err := s.do(ctx, modeModify, func(db *bolt.DB) error {
		ch = changes{}
		return db.Update(func(tx *bolt.Tx) error {
			b := createBuckets(tx)
			if b.err != nil {
				return b.err
			}
			return fn(b, &ch)
		})
	})
	if err == nil {
		s.logChanges(ch)
	}
	return err
}

// stopped returns ctx's error every 256th step of a long walk, so that a
// signal ends an operation on a spool of any size within milliseconds; the
// transaction is then rolled back and the file left as it was.
func stopped(ctx context.Context, step int) error {
	if step%256 != 0 {
		return nil
	}
	if err := context.Cause(ctx); err != nil {
		return fmt.Errorf("spool: stopped: %w", err)
	}
	return nil
}

func checkNew(e Entry) error {
	if e.TaskID == "" {
		return errors.New("spool: entry has no task_id")
	}
	if !isObject(e.Payload) {
		return fmt.Errorf("spool: entry for task %q: payload is not a JSON object", e.TaskID)
	}
	return nil
}

// IgnoringHolds returns the same spool with Options.IgnoreHolds set.
func (s *Spool) IgnoringHolds() *Spool {
	opt := s.opt
	opt.IgnoreHolds = true
	return &Spool{opt: opt, log: s.log}
}
