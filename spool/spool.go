// Package spool keeps registrations that could not be delivered yet in a
// bbolt file, so that a later start or a node-level drainer sends them.
//
// CONTRACT PLACEHOLDER: the API below is fixed; the bodies are implemented
// by the spool work.
package spool

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"
)

// RecordVersion is the version of the entry record this package writes.
const RecordVersion = 1

// Errors, for errors.Is.
var (
	// ErrLocked: another process held the file lock past the lock timeout.
	ErrLocked = errors.New("spool: file locked by another process")
	// ErrUnavailable: the file cannot be opened or written (permissions,
	// read-only file system, full disk).
	ErrUnavailable = errors.New("spool: unavailable")
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
}

// Stats counts a spool's entries.
type Stats struct {
	Pending int `json:"pending"`
	Dead    int `json:"dead"`
	Dropped int `json:"dropped"`
}

// Options configure a spool.
type Options struct {
	Path        string
	MaxEntries  int           // PADDLE_SPOOL_MAX
	MaxAge      time.Duration // PADDLE_SPOOL_MAX_AGE
	LockTimeout time.Duration // upper bound on waiting for the file lock; ctx may cut it shorter
	Logger      *slog.Logger
	Now         func() time.Time // nil: time.Now
}

// Spool is a spool file. It opens the file for each operation and closes it
// afterwards, so the lock is never held across a network call.
type Spool struct{ opt Options }

// New returns the spool at opt.Path; it touches no file.
func New(opt Options) *Spool { return &Spool{opt: opt} }

// Path returns the spool file's path.
func (s *Spool) Path() string { return s.opt.Path }

// Enqueue adds e as pending and returns its id.
func (s *Spool) Enqueue(ctx context.Context, e Entry) (uint64, error) { return 0, ErrUnavailable }

// Attempted records a failed delivery attempt of pending entry id.
func (s *Spool) Attempted(ctx context.Context, id uint64, lastErr string) error { return nil }

// Delete removes pending entry id once its delivery was answered 2xx/409.
func (s *Spool) Delete(ctx context.Context, id uint64) error { return nil }

// Bury moves pending entry id to the dead letters with the monitor's answer.
func (s *Spool) Bury(ctx context.Context, id uint64, answer string) error { return nil }

// BuryNew stores e directly as a dead letter.
func (s *Spool) BuryNew(ctx context.Context, e Entry, answer string) error { return nil }

// Oldest returns up to n pending entries, oldest first (n <= 0: all).
func (s *Spool) Oldest(ctx context.Context, n int) ([]Entry, error) { return nil, nil }

// List returns every pending entry, or every dead letter when dead is true.
func (s *Spool) List(ctx context.Context, dead bool) ([]Entry, error) { return nil, nil }

// Stats counts pending, dead and dropped entries.
func (s *Spool) Stats(ctx context.Context) (Stats, error) { return Stats{}, nil }

// Requeue moves every dead letter back to pending and returns how many.
func (s *Spool) Requeue(ctx context.Context) (int, error) { return 0, nil }

// PurgeDead deletes every dead letter and returns how many.
func (s *Spool) PurgeDead(ctx context.Context) (int, error) { return 0, nil }

// Files returns the per-UID spool files (spool-*.db) in dir.
func Files(dir string) ([]string, error) { return nil, nil }
