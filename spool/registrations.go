package spool

import (
	"context"
	"time"
)

// The Spool's own methods below are the registrations' Queue
// (s.Registrations()): the kind every version of the file has held.

// Enqueue is s.Registrations().Enqueue.
func (s *Spool) Enqueue(ctx context.Context, e Entry) (uint64, error) {
	return s.Registrations().Enqueue(ctx, e)
}

// Attempted is s.Registrations().Attempted.
func (s *Spool) Attempted(ctx context.Context, id uint64, lastErr string) error {
	return s.Registrations().Attempted(ctx, id, lastErr)
}

// Hold is s.Registrations().Hold.
func (s *Spool) Hold(ctx context.Context, id uint64, until time.Time) error {
	return s.Registrations().Hold(ctx, id, until)
}

// Delete is s.Registrations().Delete.
func (s *Spool) Delete(ctx context.Context, id uint64) error {
	return s.Registrations().Delete(ctx, id)
}

// DeleteMany is s.Registrations().DeleteMany.
func (s *Spool) DeleteMany(ctx context.Context, ids []uint64) error {
	return s.Registrations().DeleteMany(ctx, ids)
}

// Bury is s.Registrations().Bury.
func (s *Spool) Bury(ctx context.Context, id uint64, answer string) error {
	return s.Registrations().Bury(ctx, id, answer)
}

// BuryNew is s.Registrations().BuryNew.
func (s *Spool) BuryNew(ctx context.Context, e Entry, answer string) error {
	return s.Registrations().BuryNew(ctx, e, answer)
}

// Oldest is s.Registrations().Oldest.
func (s *Spool) Oldest(ctx context.Context, n int) ([]Entry, error) {
	return s.Registrations().Oldest(ctx, n)
}

// List is s.Registrations().List.
func (s *Spool) List(ctx context.Context, dead bool) ([]Entry, error) {
	return s.Registrations().List(ctx, dead)
}

// Requeue is s.Registrations().Requeue.
func (s *Spool) Requeue(ctx context.Context) (int, error) {
	return s.Registrations().Requeue(ctx)
}

// PurgeDead is s.Registrations().PurgeDead.
func (s *Spool) PurgeDead(ctx context.Context) (int, error) {
	return s.Registrations().PurgeDead(ctx)
}

// Stats counts the registrations' pending, dead and dropped entries; its
// Foreign and Legacy count the completions' too.
func (s *Spool) Stats(ctx context.Context) (Stats, error) {
	c := Completions
	return s.Registrations().stats(ctx, &c)
}
