package store_test

import (
	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
	"strconv"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/books"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// TestMigrateStatementsFromPrevious: a database of the schema before the
// statements, with a task of October 2026, upgrades in place; October then
// closes with that task, a late registration of October is found as late
// data (through the registration-lag index) and priced as its adjustment,
// and a task open at the close that completes later is found too. On both
// engines.
func TestMigrateStatementsFromPrevious(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		old, err := store.OpenAtVersionForTest(ctx, dsn, store.StatementsVersionForTest()-1)
		if err != nil {
			t.Fatal(err)
		}
		oct := time.Date(2026, 10, 10, 0, 0, 0, 0, time.UTC).Unix()
		if _, err := store.DBForTest(old).Exec(`INSERT INTO tasks (task_id, task_name, project, owner, start_time, gpu_count, gpu_unlisted,
			registration, registered_at, end_time, duration_seconds, exit_code, seen_at)
			VALUES ('a', 'train', 'p', 'o', ` + itoa(oct) + `, 1, 1, '{}', ` + itoa(oct) + `, ` + itoa(oct+3600) + `, 3600, 0, ` + itoa(oct) + `)`); err != nil {
			t.Fatal(err)
		}
		old.Close()
		s := open(t, dsn) // now: 2026-11-15
		// Open at the close, seen an hour after its start on Oct 31.
		oct31 := time.Date(2026, 10, 31, 20, 0, 0, 0, time.UTC).Unix()
		mustRegister(t, s, reg("open", "p", "o", oct31, wire.RegisteredGPU{UUID: "GPU-o", Name: "Tesla T4"}))
		if err := s.Heartbeat(ctx, "open", oct31+3600, nil); err != nil {
			t.Fatal(err)
		}
		c, created, err := books.Close(ctx, s, "2026-10", "test", books.Inputs{}, fixedNow())
		if err != nil || !created || c.Version != 1 {
			t.Fatalf("close: %+v %v %v", c, created, err)
		}
		if c2, created, err := books.Close(ctx, s, "2026-10", "test", books.Inputs{}, fixedNow()); err != nil || created || c2.SHA256 != c.SHA256 {
			t.Fatalf("closing again: %+v %v %v", c2, created, err)
		}
		mustRegister(t, s, reg("late", "q", "o", oct+7200))
		done, body := completion("open", 0, oct31+3700)
		mustComplete(t, s, done, body)
		late, err := s.LateTasks(ctx, *c)
		if err != nil || len(late) != 2 {
			t.Fatalf("late tasks: %+v %v", late, err)
		}
		adj, err := books.Adjust("2026-10", late, nil)
		if err != nil {
			t.Fatal(err)
		}
		// "late": no end, no heartbeat: a task of 0 hours, listed for the
		// task it adds. "open": one T4, counted to its heartbeat (1 h) at
		// the close, to its end (3,700 s) now: 100 s, 0.027778 GPU-hours
		// more.
		if len(adj) != 2 || adj[0].Project != "p" || adj[0].GPUHours != 0.027778 || adj[0].Tasks[0].Change != "completed_after_close" ||
			adj[1].Project != "q" || adj[1].GPUHours != 0 || adj[1].Tasks[0].TaskID != "late" || adj[1].Tasks[0].Change != "late_registration" {
			t.Fatalf("adjustments: %+v", adj)
		}
	})
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
