package store_test

import (
	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
	"reflect"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/books"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// TestRollupMigrateFacts: migration 17 fills the day and month facts of a
// store's hours: after it, days and months sum to what the hours do.
func TestRollupMigrateFacts(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		old, err := store.OpenAtVersionForTest(ctx, dsn, store.VersionBeforeForTest("0017"))
		if err != nil {
			t.Fatal(err)
		}
		// Eight hours across October's end, as a store before 17 kept
		// them: a GPU's and its user's.
		oct := time.Date(2026, 10, 31, 20, 0, 0, 0, time.UTC).Unix()
		for h := oct; h < oct+8*3600; h += 3600 {
			for _, q := range []string{
				`INSERT INTO node_gpu_hours (hour, node, uuid, model, observed_s, unallocated_s, energy_j)
					VALUES (` + itoa(h) + `, 'n1', 'GPU-a', 'NVIDIA H200', 3600, 600, 360000)`,
				`INSERT INTO node_user_hours (hour, node, uuid, gpu_instance_id, user_key, model, pod_uid, last_time, equal_s, util_s,
					busy_equal_s, busy_util_s, energy_j)
					VALUES (` + itoa(h) + `, 'n1', 'GPU-a', -1, 'k', 'NVIDIA H200', 'pod-a', ` + itoa(h+3600) + `, 3000, 3000, 1500, 1500, 300000)`,
			} {
				if _, err := store.DBForTest(old).Exec(q); err != nil {
					t.Fatal(err)
				}
			}
		}
		old.Close()
		s := open(t, dsn)
		from, to := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC).Unix(), time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).Unix()
		hours, err := s.FactSums(ctx, "hour", from, to)
		if err != nil || len(hours) != 2 || hours[0].Observed != 8*3600 {
			t.Fatalf("hours: %+v %v", hours, err)
		}
		for _, g := range []string{"day", "month"} {
			got, err := s.FactSums(ctx, g, from, to)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, hours) {
				t.Errorf("%s facts after the migration: %+v, want the hours' %+v", g, got, hours)
			}
		}
	})
}

// TestRollupRetainFacts: --retain deletes the day and month facts of the
// closed October with its hours, and keeps November's.
func TestRollupRetainFacts(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := open(t, dsn)
		oct := time.Date(2026, 10, 31, 20, 0, 0, 0, time.UTC).Unix()
		nov := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC).Unix()
		dec := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).Unix()
		mustRegister(t, s, reg("t1", "p", "o", oct, wire.RegisteredGPU{UUID: "GPU-a", Name: "NVIDIA H200"}))
		if _, err := s.Complete(ctx, &wire.Completion{TaskID: "t1", EndTime: ptrOf(oct + 3600), DurationSeconds: ptrOf(3600.0), ExitCode: ptrOf[int64](0)},
			[]byte(`{"task_id":"t1"}`), store.Sender{}); err != nil {
			t.Fatal(err)
		}
		for at := oct + 1800; at <= oct+8*3600; at += 1800 {
			if _, err := s.StoreNodeReport(ctx, wholeReport("n1", at, 1800, "GPU-a"), store.DefaultNodeRetire); err != nil {
				t.Fatal(err)
			}
		}
		if _, _, err := books.Close(ctx, s, "2026-10", "test", books.Inputs{}, fixedNow()); err != nil {
			t.Fatal(err)
		}
		novFacts := map[string][]store.FactSum{}
		for _, g := range store.Grains {
			f, err := s.FactSums(ctx, g, nov, dec)
			if err != nil || len(f) != 2 {
				t.Fatalf("November's %s facts: %+v %v", g, f, err)
			}
			novFacts[g] = f
		}
		if _, err := s.Trim(ctx, time.Unix(nov+10*86400, 0), 100); err != nil {
			t.Fatal(err)
		}
		for _, g := range store.Grains {
			if f, err := s.FactSums(ctx, g, nov-62*86400, nov); err != nil || len(f) != 0 {
				t.Errorf("October's %s facts after the trim: %+v %v", g, f, err)
			}
			if f, err := s.FactSums(ctx, g, nov, dec); err != nil || !reflect.DeepEqual(f, novFacts[g]) {
				t.Errorf("November's %s facts after the trim: %+v %v, want %+v", g, f, err, novFacts[g])
			}
		}
	})
}
