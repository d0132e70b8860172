// Package spool keeps entries that could not be delivered yet in a bbolt
// file, so that a later start, a node-level drainer or the next pass of a
// node agent sends them: the tasks' registrations and completions, and any
// kind a program names (the node agent's reports, in a file of its own).
// Every kind is one Queue (Spool.Queue, kind.go), oldest first, with the
// same guarantees; the Spool's own Enqueue, Oldest, ... are the
// registrations' queue.
//
// Guarantees, for every kind:
//
//   - At-least-once. An entry leaves the pending bucket only when its
//     caller deletes it (which the delivery code does only after the
//     monitor answered 2xx or 409), buries it as a dead letter, or when
//     the bounds below drop or expire it. Two processes may send the same
//     entry; the task id, sent as the Idempotency-Key, makes that harmless.
//   - Crash safety. Every change is one bbolt transaction, committed with
//     fsync: a process killed at any moment leaves each entry either fully
//     written or absent, and a file that opens.
//   - Bounded. At most Options.MaxEntries pending entries (and as many dead
//     letters) per kind: past that the oldest are dropped and counted.
//     Pending entries older than Options.MaxAge move to the dead letters
//     with the answer "expired" (a kind made with Kind.DropExpired drops
//     and counts them instead).
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
// nothing and creates nothing: only Enqueue and BuryNew (and
// RecordOutage) create the file
// (mode 0600, and its directory, 0700, when the directory is missing).
package spool

import (
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
	// Expired counts pending entries dropped past MaxAge, in a kind made
	// with DropExpired (other kinds move them to the dead letters).
	Expired int `json:"expired,omitempty"`
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

// sendable reports whether this process may send an entry written for fp.
func (s *Spool) sendable(fp string) bool {
	return s.opt.Sendable == nil || s.opt.Sendable(fp)
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

// update runs fn in one write transaction on an existing spool file (a
// missing file has nothing to update) and logs what the bounds changed.
func (s *Spool) update(ctx context.Context, k Kind, fn func(buckets, *changes) error) error {
	if s.missing() {
		return nil
	}
	var ch changes
	err := s.do(ctx, modeModify, func(db *bolt.DB) error {
		ch = changes{}
		return db.Update(func(tx *bolt.Tx) error {
			b := createBuckets(tx, k)
			if b.err != nil {
				return b.err
			}
			return fn(b, &ch)
		})
	})
	if err == nil {
		s.logChanges(k, ch)
	}
	return err
}
