package spool

import (
	"context"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Entries with a fingerprint live in the *_by_token buckets, are handed out
// only to a process that may send them, and are counted as foreign by the
// others; held entries are handed out to nobody but a holder-ignoring spool.
func TestSpoolFingerprints(t *testing.T) {
	ctx := context.Background()
	mine := func(fp string) bool { return fp == "aaaa" }
	s, _ := testSpool(t, Options{Sendable: mine})
	add := func(id, fp string, held time.Time) {
		t.Helper()
		if _, err := s.Registrations().Enqueue(ctx, Entry{TaskID: id, Payload: body(id, 10), Fingerprint: fp, HeldUntil: held}); err != nil {
			t.Fatal(err)
		}
	}
	add("legacy", "", time.Time{})
	add("mine-1", "aaaa", time.Time{})
	add("theirs", "bbbb", time.Time{})
	add("mine-held", "aaaa", time.Now().Add(time.Hour))
	add("mine-2", "aaaa", time.Time{})

	es, err := s.Registrations().Oldest(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := taskIDs(es); !slices.Equal(got, []string{"mine-1", "mine-2"}) {
		t.Errorf("Oldest = %v, want mine-1 mine-2 (not another token's, not the previous format's, not a held one)", got)
	}
	all, _ := s.Registrations().List(ctx, false)
	if got := taskIDs(all); !slices.Equal(got, []string{"legacy", "mine-1", "theirs", "mine-held", "mine-2"}) {
		t.Errorf("List = %v, want every entry oldest first", got)
	}
	if st := stats(t, s); st.Pending != 5 || st.Foreign != 2 || st.Legacy != 1 {
		t.Errorf("stats %+v, want 5 pending, 2 foreign (theirs, legacy), 1 legacy", st)
	}
	es, _ = s.IgnoringHolds().Registrations().Oldest(ctx, 0)
	if got := taskIDs(es); !slices.Equal(got, []string{"mine-1", "mine-held", "mine-2"}) {
		t.Errorf("IgnoringHolds().Oldest = %v", got)
	}
	if err := s.Registrations().Hold(ctx, all[3].ID, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if es, _ = s.Registrations().Oldest(ctx, 0); len(es) != 3 {
		t.Errorf("after the hold's release: %v", taskIDs(es))
	}

	// Dead letters stay in their format's bucket, and so do requeued ones.
	for _, e := range all {
		if err := s.Registrations().Bury(ctx, e.ID, "403"); err != nil {
			t.Fatal(err)
		}
	}
	keys := bucketCounts(t, s.Path())
	if keys["dead"] != 1 || keys["dead_by_token"] != 4 || keys["pending"]+keys["pending_by_token"] != 0 {
		t.Errorf("after burying: %v", keys)
	}
	if n, err := s.Registrations().Requeue(ctx); err != nil || n != 5 {
		t.Fatalf("requeued %d, %v", n, err)
	}
	keys = bucketCounts(t, s.Path())
	if keys["pending"] != 1 || keys["pending_by_token"] != 4 {
		t.Errorf("after requeue: %v", keys)
	}
	requeued, _ := s.Registrations().List(ctx, false)
	for _, e := range requeued {
		s.Registrations().Bury(ctx, e.ID, "403")
	}
	if n, err := s.Registrations().PurgeDead(ctx); err != nil || n != 5 {
		t.Errorf("purged %d, %v, want the 5 dead letters of both buckets", n, err)
	}
	if st := stats(t, s); st.Pending+st.Dead != 0 {
		t.Errorf("after the purge: %+v", st)
	}
}

func bucketCounts(t *testing.T, path string) map[string]int {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	out := map[string]int{}
	db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			out[string(name)] = b.Stats().KeyN
			return nil
		})
	})
	return out
}
