package spool

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Benchmarks of the spool as the entrypoint uses it: every operation opens
// the file, takes its lock, checks its meta pages, commits with fsync and
// closes it again, on purpose (the lock is never held across a network
// call). Run with
//
//	go test -run '^$' -bench . -benchtime 2s ./spool/
//
// entries/s is the figure to read; ns/op is per operation (per entry,
// except for the batch benchmark, where an operation moves 100).

// benchBody is the size of a typical registration body (two GPUs, a
// handful of labels).
var benchBody = body("0f8fad5b-d9cb-469f-a165-70867728950e", 700)

// fill writes n pending entries in one transaction, as if queued earlier.
func fill(b *testing.B, path string, n int) {
	b.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	now := time.Now()
	err = db.Update(func(tx *bolt.Tx) error {
		bk := createBuckets(tx, Registrations)
		if bk.err != nil {
			return bk.err
		}
		for range n {
			seq, _ := bk.pending.NextSequence()
			v, err := json.Marshal(Entry{ID: seq, Version: RecordVersion, TaskID: "t", Payload: benchBody, QueuedAt: now})
			if err != nil {
				return err
			}
			if err := bk.pending.Put(itob(seq), v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}

func entriesPerSecond(b *testing.B, entries int) {
	b.ReportMetric(float64(entries)/b.Elapsed().Seconds(), "entries/s")
}

func benchSpool(b *testing.B, max, prefill int) *Spool {
	path := filepath.Join(b.TempDir(), "spool-0.db")
	if prefill > 0 {
		fill(b, path, prefill)
	}
	return New(Options{Path: path, MaxEntries: max, MaxAge: 30 * 24 * time.Hour})
}

// BenchmarkEnqueue: one registration spooled, as a start does at its first
// failed attempt; into an empty spool, one already holding 10,000 entries,
// and a full one (each enqueue drops the oldest).
func BenchmarkEnqueue(b *testing.B) {
	for _, bc := range []struct {
		name         string
		max, prefill int
	}{
		{"empty", 1 << 30, 0},
		{"holding-10000", 1 << 30, 10000},
		{"full-10000", 10000, 10000},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := benchSpool(b, bc.max, bc.prefill)
			ctx := context.Background()
			e := Entry{TaskID: "t", Payload: benchBody}
			for b.Loop() {
				if _, err := s.Registrations().Enqueue(ctx, e); err != nil {
					b.Fatal(err)
				}
			}
			entriesPerSecond(b, b.N)
		})
	}
}

// BenchmarkOldestDelete: the drain loop, one entry at a time (Oldest(1),
// then Delete after the monitor's answer), from a spool of 10,000 entries.
func BenchmarkOldestDelete(b *testing.B) {
	s := benchSpool(b, 1<<30, 10000+b.N)
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		es, err := s.Registrations().Oldest(ctx, 1)
		if err != nil || len(es) != 1 {
			b.Fatal(es, err)
		}
		if err := s.Registrations().Delete(ctx, es[0].ID); err != nil {
			b.Fatal(err)
		}
	}
	entriesPerSecond(b, b.N)
}

// BenchmarkOldestDeleteMany: the drain loop in batches of 100 (Oldest(100),
// then DeleteMany of those delivered), from a spool of 10,000 entries.
func BenchmarkOldestDeleteMany(b *testing.B) {
	const batch = 100
	s := benchSpool(b, 1<<30, 10000+batch*b.N)
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		es, err := s.Registrations().Oldest(ctx, batch)
		if err != nil || len(es) != batch {
			b.Fatal(len(es), err)
		}
		ids := make([]uint64, len(es))
		for i, e := range es {
			ids[i] = e.ID
		}
		if err := s.Registrations().DeleteMany(ctx, ids); err != nil {
			b.Fatal(err)
		}
	}
	entriesPerSecond(b, batch*b.N)
}

// BenchmarkOldestAtStart: what a start whose registration was delivered
// pays to look for older entries: nothing when the spool file does not
// exist (one stat), an open and a read when it exists but is empty.
func BenchmarkOldestAtStart(b *testing.B) {
	for _, bc := range []struct {
		name   string
		create bool
	}{{"no-file", false}, {"empty-file", true}} {
		b.Run(bc.name, func(b *testing.B) {
			s := benchSpool(b, 10000, 0)
			if bc.create {
				ctx := context.Background()
				id, err := s.Registrations().Enqueue(ctx, Entry{TaskID: "t", Payload: benchBody})
				if err != nil {
					b.Fatal(err)
				}
				if err := s.Registrations().Delete(ctx, id); err != nil {
					b.Fatal(err)
				}
			}
			for b.Loop() {
				if es, err := s.Registrations().Oldest(context.Background(), 10); err != nil || len(es) != 0 {
					b.Fatal(es, err)
				}
			}
		})
	}
}

// BenchmarkStats: `spool stats` on a spool of 10,000 entries.
func BenchmarkStats(b *testing.B) {
	s := benchSpool(b, 1<<30, 10000)
	for b.Loop() {
		if st, err := s.Registrations().Stats(context.Background()); err != nil || st.Pending != 10000 {
			b.Fatal(st, err)
		}
	}
}

// BenchmarkRequeue10000: `spool requeue` of 10,000 dead letters of a
// typical size, all in one transaction (the dead-letter bucket is emptied
// and bounded in it: the case that used to spin forever).
func BenchmarkRequeue10000(b *testing.B) {
	for range b.N {
		b.StopTimer()
		s := benchSpool(b, 10000, 0)
		fill(b, s.Path(), 10000)
		ctx := context.Background()
		s.update(ctx, Registrations, func(bk buckets, _ *changes) error {
			c := bk.pending.Cursor()
			var keys [][]byte
			for k, _ := c.First(); k != nil; k, _ = c.Next() {
				keys = append(keys, clone(k))
			}
			for _, k := range keys {
				if err := bury(bk, bk.pending, k, bk.pending.Get(k), "403", time.Now()); err != nil {
					return err
				}
			}
			return nil
		})
		b.StartTimer()
		n, err := s.Registrations().Requeue(ctx)
		if err != nil || n != 10000 {
			b.Fatalf("requeued %d: %v", n, err)
		}
	}
	entriesPerSecond(b, 10000*b.N)
}
