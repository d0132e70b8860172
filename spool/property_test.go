package spool

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// FuzzOperations drives random sequences of enqueue, bury, requeue, trim
// (a small MaxEntries bounds both buckets at every write), delete and
// purge over payloads of one, several and many pages, and after every
// operation checks that it returned (bbolt's Cursor.Last on a bucket
// emptied in the same transaction never did), that the file passes bbolt's
// own consistency check (tx.Check, what `bbolt check` runs), and that no
// entry was lost or made up: pending + dead + dropped + dead_dropped is
// what was added less what was delivered or purged.
func FuzzOperations(f *testing.F) {
	f.Add([]byte{0x41, 0x41, 0x41, 0x41, 0x41, 0x41, 3})    // six dead letters of 900 bytes, requeued
	f.Add([]byte{0x80, 0x80, 0x80, 0x42, 0x42, 0x42, 3, 5}) // pages of their own
	f.Add([]byte{0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 3})
	f.Add([]byte{1, 1, 1, 1, 1, 1, 1, 1, 3, 4, 0, 5})
	f.Add([]byte{0x40, 0x40, 0x41, 0x41, 0x42, 0x42, 0x80, 0x81, 0x82, 3, 3, 5, 5, 4})
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 0, 1, 2, 3, 4, 5, 6, 0x46, 0x45, 0x44, 0x43})
	f.Add([]byte{0x20, 0x21, 0x61, 0x61, 0x61, 0x61, 0x61, 0x61, 0x23, 0x25, 0x22, 0x24, 0x21, 0x01, 0x03}) // by token
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 64 {
			ops = ops[:64]
		}
		ctx := context.Background()
		s, _ := testSpool(t, Options{MaxEntries: 7})
		added, gone := 0, 0
		for i, op := range ops {
			pad := [4]int{10, 900, 5000, 12000}[op>>6]
			id := fmt.Sprintf("t%d", i)
			kind := (op & 0x1f) % 7
			fp := "" // the previous format's buckets, or the by-token ones
			if op&0x20 != 0 {
				fp = "aaaa"
			}
			done := make(chan error, 1)
			go func() {
				var err error
				switch kind {
				case 0:
					_, err = s.Registrations().Enqueue(ctx, Entry{TaskID: id, Payload: body(id, pad), Fingerprint: fp})
					if err == nil {
						added++
					}
				case 1:
					if err = s.Registrations().BuryNew(ctx, Entry{TaskID: id, Payload: body(id, pad), Fingerprint: fp}, "403"); err == nil {
						added++
					}
				case 2:
					var es []Entry
					if es, err = s.Registrations().Oldest(ctx, 1); err == nil && len(es) == 1 {
						err = s.Registrations().Bury(ctx, es[0].ID, "403")
					}
				case 3:
					_, err = s.Registrations().Requeue(ctx)
				case 4:
					var n int
					n, err = s.Registrations().PurgeDead(ctx)
					gone += n
				case 5:
					var es []Entry
					if es, err = s.Registrations().Oldest(ctx, int(op>>3)%4+1); err == nil {
						var ids []uint64
						for _, e := range es {
							ids = append(ids, e.ID)
						}
						if err = s.Registrations().DeleteMany(ctx, ids); err == nil {
							gone += len(ids)
						}
					}
				case 6:
					var es []Entry
					if es, err = s.Registrations().Oldest(ctx, 1); err == nil && len(es) == 1 {
						err = s.Registrations().Attempted(ctx, es[0].ID, "503")
					}
				}
				done <- err
			}()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("op %d (%d): %v", i, kind, err)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("op %d (%d) of %v did not return", i, kind, ops)
			}
			checkFile(t, s.Path())
			st := stats(t, s)
			if st.Pending > 14 || st.Dead > 14 {
				t.Fatalf("after op %d: %+v, past the bound of 7 per bucket", i, st)
			}
			if got := st.Pending + st.Dead + st.Dropped + st.DeadDropped; got != added-gone {
				t.Fatalf("after op %d (%d) of %v: %+v accounts for %d entries, want %d", i, kind, ops, st, got, added-gone)
			}
		}
	})
}

// checkFile runs bbolt's consistency check on a spool file no process holds.
func checkFile(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Stat(path); os.IsNotExist(err) {
		return // nothing written yet
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatalf("bbolt open: %v", err)
	}
	defer db.Close()
	db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			t.Fatalf("bbolt check: %v", err)
		}
		return nil
	})
}
