package spool

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func TestNewKindNames(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"reports", true},
		{"node_reports2", true},
		{"r", true},
		{"", false},
		{"Reports", false},
		{"2reports", false},
		{"re-ports", false},
		{"reports/../x", false},
		{"rep\x00orts", false},
		{strings.Repeat("a", 33), false},
		{strings.Repeat("a", 32), true},
		// Names whose buckets are the file's own.
		{"pending", false},
		{"dead", false},
		{"meta", false},
		{"outage", false},
		{"completions", false},
		{"registrations", false},
	}
	for _, tt := range tests {
		k, err := NewKind(tt.name)
		if (err == nil) != tt.ok {
			t.Errorf("NewKind(%q) = %v, want ok %v", tt.name, err, tt.ok)
		}
		if err == nil && k.Name() != tt.name {
			t.Errorf("NewKind(%q).Name() = %q", tt.name, k.Name())
		}
		if err != nil && !strings.Contains(err.Error(), fmt.Sprintf("%q", tt.name)) {
			t.Errorf("NewKind(%q): error %q does not name the kind", tt.name, err)
		}
	}
}

// reportEntry is a node report as the node agent queues it: keyed by the
// node and the interval's end.
func reportEntry(end int64) Entry {
	return Entry{
		TaskID:  fmt.Sprintf("gpu-node-17/%d", end),
		Payload: json.RawMessage(fmt.Sprintf(`{"schema_version":1,"node":"gpu-node-17","time":%d,"interval_seconds":60}`, end)),
	}
}

func keys(es []Entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.TaskID)
	}
	return out
}

// A node-report kind in a file of its own: sent oldest first, dead letters
// kept with the answer, reports past MaxAge dropped with a count (not made
// dead letters), and nothing of it seen by the registrations or the
// completions of the same file, nor theirs by it.
func TestReportQueue(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	s, _ := testSpool(t, Options{MaxAge: 10 * time.Minute, Now: func() time.Time { return now }})
	kind, err := NewKind("reports")
	if err != nil {
		t.Fatal(err)
	}
	q := s.Queue(kind.DropExpired())
	start := now
	// Six reports a minute apart, the fourth written with a fingerprint
	// (another bucket of the kind): one order across both.
	var ids []uint64
	for i := range 6 {
		now = start.Add(time.Duration(i) * time.Minute)
		e := reportEntry(now.Unix())
		if i == 3 {
			e.Fingerprint = "0123456789abcdef"
		}
		id, err := q.Enqueue(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	enqueue(t, s, "task-a")
	if _, err := s.Completions().Enqueue(ctx, Entry{TaskID: "task-b", Payload: body("task-b", 1)}); err != nil {
		t.Fatal(err)
	}
	want := []string{}
	for i := range 6 {
		want = append(want, fmt.Sprintf("gpu-node-17/%d", start.Add(time.Duration(i)*time.Minute).Unix()))
	}
	got, err := q.Oldest(ctx, 0)
	if err != nil || !slices.Equal(keys(got), want) {
		t.Fatalf("Oldest = %q, %v; want %q", keys(got), err, want)
	}
	if got, _ := q.Oldest(ctx, 2); !slices.Equal(keys(got), want[:2]) {
		t.Errorf("Oldest(2) = %q, want %q", keys(got), want[:2])
	}
	if regs, _ := s.Registrations().Oldest(ctx, 0); !slices.Equal(keys(regs), []string{"task-a"}) {
		t.Errorf("registrations = %q: the reports' kind leaked into them", keys(regs))
	}
	// The oldest is answered 400: a dead letter with the answer.
	if err := q.Bury(ctx, ids[0], "400 Bad Request"); err != nil {
		t.Fatal(err)
	}
	// The second is delivered, the third failed once.
	if err := q.Delete(ctx, ids[1]); err != nil {
		t.Fatal(err)
	}
	if err := q.Attempted(ctx, ids[2], "503 Service Unavailable"); err != nil {
		t.Fatal(err)
	}
	dead, err := q.List(ctx, true)
	if err != nil || len(dead) != 1 || dead[0].TaskID != want[0] || dead[0].Answer != "400 Bad Request" || !dead[0].DeadAt.Equal(now) {
		t.Fatalf("dead letters %+v, %v", dead, err)
	}
	pending, _ := q.List(ctx, false)
	if !slices.Equal(keys(pending), want[2:]) || pending[0].Attempts != 1 || pending[0].LastError != "503 Service Unavailable" {
		t.Fatalf("pending %+v", pending)
	}
	// A hold keeps a report from Oldest until it ends.
	if err := q.Hold(ctx, ids[2], now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if got, _ := q.Oldest(ctx, 1); !slices.Equal(keys(got), want[3:4]) {
		t.Errorf("Oldest with the third held = %q, want %q", keys(got), want[3:4])
	}
	// 13 minutes after the first: the third (queued at +2) is 11 minutes
	// old, past MaxAge; the fourth (+3) is 10 minutes old, not past it.
	now = start.Add(13 * time.Minute)
	got, err = q.Oldest(ctx, 0)
	if err != nil || !slices.Equal(keys(got), want[3:]) {
		t.Fatalf("Oldest after 13 minutes = %q, %v; want %q", keys(got), err, want[3:])
	}
	st, err := q.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Stats{Pending: 3, Dead: 1, Expired: 1, Foreign: 0, Legacy: 2}); st != want {
		t.Errorf("Stats = %+v, want %+v", st, want)
	}
	// The registration, queued at +5, expires at +16: into the dead
	// letters, as registrations do, with nothing counted as dropped.
	now = start.Add(16 * time.Minute)
	if regs, err := s.Registrations().Oldest(ctx, 0); err != nil || len(regs) != 0 {
		t.Fatalf("registrations at +16 = %q, %v", keys(regs), err)
	}
	if regs := stats(t, s); regs.Pending != 0 || regs.Dead != 1 || regs.Expired != 0 || regs.Dropped != 0 {
		t.Errorf("registrations' stats %+v", regs)
	}
	// The report buckets are the kind's own names in the file.
	db, err := bolt.Open(s.Path(), 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.View(func(tx *bolt.Tx) error {
		for name, n := range map[string]int{"reports": 2, "reports_by_token": 1, "reports_dead": 1, "reports_dead_by_token": 0, "dead": 1, "completions": 1} {
			if bk := tx.Bucket([]byte(name)); bk == nil || bk.Stats().KeyN != n {
				t.Errorf("bucket %s: %v", name, bk)
			}
		}
		if got := btoi(tx.Bucket(bucketMeta).Get([]byte("reports_expired"))); got != 1 {
			t.Errorf("meta reports_expired = %d, want 1", got)
		}
		return nil
	})
}

// The queue's bound drops the oldest reports, counted apart from the
// registrations' own count.
func TestReportQueueBound(t *testing.T) {
	ctx := context.Background()
	s, _ := testSpool(t, Options{MaxEntries: 3})
	kind, _ := NewKind("reports")
	q := s.Queue(kind)
	for i := range 5 {
		if _, err := q.Enqueue(ctx, reportEntry(int64(1000+i))); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := q.Oldest(ctx, 0)
	if want := []string{"gpu-node-17/1002", "gpu-node-17/1003", "gpu-node-17/1004"}; !slices.Equal(keys(got), want) {
		t.Errorf("after the bound: %q, want %q", keys(got), want)
	}
	if st, _ := q.Stats(ctx); st.Dropped != 2 || st.Pending != 3 {
		t.Errorf("Stats %+v, want 2 dropped, 3 pending", st)
	}
	if st := stats(t, s); st.Dropped != 0 {
		t.Errorf("registrations' dropped = %d: the reports' drops counted there", st.Dropped)
	}
}

// FuzzQueueOperations drives random sequences of operations on three kinds
// sharing one file (registrations, completions, a report kind that drops by
// age), with a clock that moves, and after every operation checks that the
// file passes bbolt's consistency check, that each kind hands out only its
// own entries, oldest first, and that each kind accounts for every entry it
// was given: pending + dead + dropped + dead_dropped + expired is what was
// added less what was delivered or purged.
func FuzzQueueOperations(f *testing.F) {
	f.Add([]byte{0, 8, 16, 0, 8, 16, 1, 9, 17, 7, 7, 7, 2, 10, 18})
	f.Add([]byte{0, 0, 0, 16, 16, 16, 16, 16, 7, 7, 18, 18, 5, 21, 3, 19})
	f.Add([]byte{8, 8, 8, 8, 0, 10, 13, 0, 4, 12, 12, 20, 22, 6, 14})
	f.Add([]byte{16, 17, 18, 19, 20, 21, 22, 23, 0, 1, 2, 3, 4, 5, 6, 7})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 48 {
			ops = ops[:48]
		}
		ctx := context.Background()
		now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
		s, _ := testSpool(t, Options{MaxEntries: 5, MaxAge: 30 * time.Minute, Now: func() time.Time { return now }})
		reports, _ := NewKind("reports")
		queues := []*Queue{s.Registrations(), s.Completions(), s.Queue(reports.DropExpired())}
		prefix := []string{"reg", "comp", "rep"}
		added := make([]int, 3)
		gone := make([]int, 3)
		for i, op := range ops {
			k := int(op>>3) % 3
			q := queues[k]
			key := fmt.Sprintf("%s-%d", prefix[k], i)
			fp := ""
			if op&0x80 != 0 {
				fp = "aaaa"
			}
			var err error
			switch op & 7 {
			case 0:
				if _, err = q.Enqueue(ctx, Entry{TaskID: key, Payload: body(key, 16), Fingerprint: fp}); err == nil {
					added[k]++
				}
			case 1:
				if err = q.BuryNew(ctx, Entry{TaskID: key, Payload: body(key, 16), Fingerprint: fp}, "400"); err == nil {
					added[k]++
				}
			case 2:
				var es []Entry
				if es, err = q.Oldest(ctx, 1); err == nil && len(es) == 1 {
					err = q.Bury(ctx, es[0].ID, "413")
				}
			case 3:
				_, err = q.Requeue(ctx)
			case 4:
				var n int
				n, err = q.PurgeDead(ctx)
				gone[k] += n
			case 5:
				var es []Entry
				if es, err = q.Oldest(ctx, 2); err == nil {
					for _, e := range es {
						if err = q.Delete(ctx, e.ID); err != nil {
							break
						}
						gone[k]++
					}
				}
			case 6:
				var es []Entry
				if es, err = q.Oldest(ctx, 1); err == nil && len(es) == 1 {
					err = q.Attempted(ctx, es[0].ID, "503")
				}
			case 7:
				now = now.Add(time.Duration(op>>5+1) * 7 * time.Minute)
			}
			if err != nil {
				t.Fatalf("op %d (%#x): %v", i, op, err)
			}
			checkFile(t, s.Path())
			for j, q := range queues {
				es, err := q.Oldest(ctx, 0)
				if err != nil {
					t.Fatal(err)
				}
				for n, e := range es {
					if !strings.HasPrefix(e.TaskID, prefix[j]+"-") {
						t.Fatalf("after op %d: kind %s handed out %q", i, prefix[j], e.TaskID)
					}
					if n > 0 && e.ID <= es[n-1].ID {
						t.Fatalf("after op %d: kind %s out of order: %d after %d", i, prefix[j], e.ID, es[n-1].ID)
					}
				}
				st, err := q.Stats(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if got := st.Pending + st.Dead + st.Dropped + st.DeadDropped + st.Expired; got != added[j]-gone[j] {
					t.Fatalf("after op %d (%#x) of %v: kind %s %+v accounts for %d entries, want %d", i, op, ops, prefix[j], st, got, added[j]-gone[j])
				}
			}
		}
	})
}

// Requeue and PurgeDead take other kinds of the same file: their dead
// letters move (or go) in the same transaction, each kind counted once,
// and a kind not named is left alone.
func TestRequeuePurgeWithOtherKinds(t *testing.T) {
	ctx := context.Background()
	reports, err := NewKind("reports")
	if err != nil {
		t.Fatal(err)
	}
	s := New(Options{Path: t.TempDir() + "/spool.db"})
	bury := func() {
		t.Helper()
		for _, kn := range []struct {
			k Kind
			n int
		}{{Registrations, 2}, {Completions, 3}, {reports, 1}} {
			k := kn.k
			for i := range kn.n {
				id := fmt.Sprintf("%s-%d", k.Name(), i)
				if err := s.Queue(k).BuryNew(ctx, Entry{TaskID: id, Payload: body(id, 1)}, "400"); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	counts := func() (out [3][2]int) {
		t.Helper()
		for i, k := range []Kind{Registrations, Completions, reports} {
			st, err := s.Queue(k).Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			out[i] = [2]int{st.Pending, st.Dead}
		}
		return out
	}
	bury()
	// The queue's own kind named again among the others counts once.
	if n, err := s.Completions().Requeue(ctx, Registrations, Completions, Registrations); err != nil || n != 5 {
		t.Fatalf("Requeue = %d, %v; want 5", n, err)
	}
	if got, want := counts(), [3][2]int{{2, 0}, {3, 0}, {0, 1}}; got != want {
		t.Errorf("after Requeue: pending, dead of registrations, completions, reports = %v, want %v", got, want)
	}
	bury()
	if n, err := s.Registrations().PurgeDead(ctx, Completions); err != nil || n != 5 {
		t.Fatalf("PurgeDead = %d, %v; want 5", n, err)
	}
	if got, want := counts(), [3][2]int{{2, 0}, {3, 0}, {0, 2}}; got != want {
		t.Errorf("after PurgeDead: %v, want %v", got, want)
	}
	// Without other kinds, only the queue's own.
	if n, err := s.Queue(reports).Requeue(ctx); err != nil || n != 2 {
		t.Fatalf("reports Requeue = %d, %v; want 2", n, err)
	}
	if got, want := counts(), [3][2]int{{2, 0}, {3, 0}, {2, 0}}; got != want {
		t.Errorf("after the reports' Requeue: %v, want %v", got, want)
	}
}
