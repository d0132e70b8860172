package store_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/access"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/report"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

// columns lists table.column names of the tasks tables, the same query on
// both engines (information_schema on PostgreSQL, pragma on SQLite).
func columns(t *testing.T, s *store.Store) []string {
	t.Helper()
	db := store.DBForTest(s)
	var out []string
	for _, table := range []string{"tasks", "task_gpus", "pending_completions", "project_owners", "schema_version"} {
		var rows *sql.Rows
		var err error
		if s.Dialect() == store.Postgres {
			rows, err = db.Query("SELECT column_name FROM information_schema.columns WHERE table_name = $1", table)
		} else {
			rows, err = db.Query("SELECT name FROM pragma_table_info(?)", table)
		}
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var c string
			if err := rows.Scan(&c); err != nil {
				t.Fatal(err)
			}
			out = append(out, table+"."+c)
		}
		rows.Close()
	}
	sort.Strings(out)
	return out
}

// TestMigrateBothDialects: an empty database of each engine migrates to the
// latest version, with the same tables and columns; opening again changes
// nothing.
func TestMigrateBothDialects(t *testing.T) {
	var got [][]string
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := storetest.Open(t, dsn)
		var v int
		if err := store.DBForTest(s).QueryRow("SELECT version FROM schema_version").Scan(&v); err != nil {
			t.Fatal(err)
		}
		if v != store.SchemaVersion() || v < 1 {
			t.Fatalf("schema version %d, want %d", v, store.SchemaVersion())
		}
		cols := columns(t, s)
		s.Close()
		again := storetest.Open(t, dsn)
		if c := columns(t, again); !reflect.DeepEqual(c, cols) {
			t.Fatalf("reopening changed the columns:\n%v\n%v", cols, c)
		}
		got = append(got, cols)
	})
	if len(got) == 2 && !reflect.DeepEqual(got[0], got[1]) {
		t.Fatalf("the two dialects' schemas differ:\nsqlite:   %v\npostgres: %v", got[0], got[1])
	}
}

// TestMigrateConcurrentReplicas: replicas starting at once on one
// PostgreSQL database all succeed and apply each step once.
func TestMigrateConcurrentReplicas(t *testing.T) {
	dsn := storetest.PostgresDSN(t)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			s, err := store.Open(ctx, dsn, store.Options{})
			if err == nil {
				s.Close()
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("replica %d: %v", i, err)
		}
	}
}

// TestSchemaTooNew: a database migrated by a newer binary is refused.
func TestSchemaTooNew(t *testing.T) {
	dsn := storetest.SQLiteDSN(t)
	s := storetest.Open(t, dsn)
	if _, err := store.DBForTest(s).Exec("UPDATE schema_version SET version = 999"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, err := store.Open(context.Background(), dsn, store.Options{})
	if !errors.Is(err, store.ErrSchemaTooNew) {
		t.Fatalf("Open on a newer schema: %v, want ErrSchemaTooNew", err)
	}
}

// TestMustExist: report's open never creates a database file.
func TestMustExist(t *testing.T) {
	dsn := filepath.Join(t.TempDir(), "missing.db")
	_, err := store.Open(context.Background(), dsn, store.Options{MustExist: true})
	if !errors.Is(err, store.ErrNoDatabase) {
		t.Fatalf("got %v, want ErrNoDatabase", err)
	}
	if _, err := os.Stat(dsn); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the file was created: %v", err)
	}
}

// exec runs raw SQL statements (written with ? placeholders) on a store
// of an older schema.
func exec(t *testing.T, s *store.Store, stmts ...[]any) {
	t.Helper()
	db := store.DBForTest(s)
	for _, st := range stmts {
		q := st[0].(string)
		if s.Dialect() == store.Postgres {
			n := 0
			q = regexp.MustCompile(`\?`).ReplaceAllStringFunc(q, func(string) string { n++; return fmt.Sprintf("$%d", n) })
		}
		if _, err := db.Exec(q, st[1:]...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// v1Task is a task row as the first schema stores it (task_id the primary
// key).
func v1Task(id, project, owner string, start int64, extra string) []any {
	return []any{`INSERT INTO tasks (task_id, task_name, project, owner, start_time, gpu_count, labels, registration,
		registered_at` + extra, id, "train", project, owner, start, 1, `{"team":"a"}`,
		fmt.Sprintf(`{"task_id":%q,"project":%q,"owner":%q,"start_time":%d}`, id, project, owner, start), start}
}

// TestMigrateFromVersion1: a database of the first schema, with tasks,
// gains project_owners filled from its tasks, so scoped reads still see
// every task after the upgrade.
func TestMigrateFromVersion1(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		old, err := store.OpenAtVersionForTest(ctx, dsn, 1)
		if err != nil {
			t.Fatal(err)
		}
		exec(t, old, v1Task("a", "search_x", "ann", 1, ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"),
			v1Task("b", "search_y", "bob", 2, ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"))
		old.Close()
		again := open(t, dsn)
		page, _, err := again.Tasks(ctx, store.Filter{}, &access.Scope{Projects: []string{"search_*"}})
		if err != nil || len(page) != 2 {
			t.Fatalf("after the upgrade the scoped read sees %d tasks (%v), want 2", len(page), err)
		}
	})
}

// indexNames lists the indexes of the tasks tables (SQLite's automatic
// ones, named after their table, left out).
func indexNames(t *testing.T, s *store.Store) []string {
	t.Helper()
	q := "SELECT name FROM sqlite_master WHERE type = 'index' AND name NOT LIKE 'sqlite_autoindex_%'"
	if s.Dialect() == store.Postgres {
		q = "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema()"
	}
	rows, err := store.DBForTest(s).Query(q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// TestMigrateIdleFromVersion3: a database of the schema before idle
// detection, with an open task, upgrades in place: the task is kept, not
// idle, and its next heartbeat with gpus makes it idle.
func TestMigrateIdleFromVersion3(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		old, err := store.OpenAtVersionForTest(ctx, dsn, 3)
		if err != nil {
			t.Fatal(err)
		}
		exec(t, old, v1Task("a", "search_x", "ann", 1000, ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"),
			[]any{`INSERT INTO task_gpus (task_id, position, gpu_index, uuid, model) VALUES ('a', 0, 0, 'GPU-a', 'Tesla T4')`})
		old.Close()
		again := open(t, dsn)
		task, err := again.Task(ctx, "a", "", nil)
		if err != nil || task == nil || task.IdleSince != nil || len(task.GPUs) != 1 || task.GPUs[0].LatestUtilMean != nil {
			t.Fatalf("after the upgrade: %+v, %v", task, err)
		}
		zero := 0.0
		interval := 60.0
		if err := again.HeartbeatSampled(ctx, &wire.Heartbeat{TaskID: "a", IntervalSeconds: &interval,
			GPUs: []wire.HeartbeatGPU{{UUID: ptrOf("GPU-a"), Samples: ptrOf[int64](6), UtilMean: &zero}}}, 1120, nil); err != nil {
			t.Fatal(err)
		}
		if task, err = again.Task(ctx, "a", "", nil); err != nil || task.IdleSince == nil || *task.IdleSince != 1060 {
			t.Fatalf("after a heartbeat on the upgraded schema: %+v, %v", task, err)
		}
	})
}

// TestMigrateClaimColumns: a database of schema 4 (claims found by joining
// tasks) with open and completed tasks on one GPU is upgraded: task_gpus
// gains each task's start and end, so the claims answer as before — a
// newer task ends the open task's claim and not the completed one's, and
// late registrations end their own claim at the next start that was stored
// before the upgrade.
func TestMigrateClaimColumns(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		old, err := store.OpenAtVersionForTest(ctx, dsn, 4)
		if err != nil {
			t.Fatal(err)
		}
		db := store.DBForTest(old)
		q := func(sql string) string {
			if old.Dialect() == store.Postgres {
				n := 0
				for strings.Contains(sql, "?") {
					n++
					sql = strings.Replace(sql, "?", fmt.Sprintf("$%d", n), 1)
				}
			}
			return sql
		}
		for _, tk := range []struct {
			id         string
			start, end any
		}{{"open", int64(1000), nil}, {"done", int64(500), int64(900)}} {
			if _, err := db.Exec(q(`INSERT INTO tasks (task_id, task_name, project, owner, start_time, gpu_count, registration, registered_at, end_time)
				VALUES (?, 'train', 'p', 'o', ?, 1, '{}', 1, ?)`), tk.id, tk.start, tk.end); err != nil {
				t.Fatal(err)
			}
			if _, err := db.Exec(q(`INSERT INTO task_gpus (task_id, position, gpu_index, uuid, model) VALUES (?, 0, 0, 'GPU-a', 'T4')`), tk.id); err != nil {
				t.Fatal(err)
			}
		}
		old.Close()

		s := open(t, dsn)
		var v int
		if err := store.DBForTest(s).QueryRow("SELECT version FROM schema_version").Scan(&v); err != nil || v != store.SchemaVersion() {
			t.Fatalf("schema version %d (%v), want %d", v, err, store.SchemaVersion())
		}
		g := wire.RegisteredGPU{UUID: "GPU-a", Name: "T4"}
		mustRegister(t, s, reg("new", "p", "o", 2000, g))
		mustRegister(t, s, reg("late", "p", "o", 800, g))
		for _, want := range []struct {
			id    string
			ended *int64
		}{{"open", ptr(2000)}, {"done", nil}, {"new", nil}, {"late", ptr(1000)}} {
			task, err := s.Task(ctx, want.id, "", nil)
			if err != nil || task == nil {
				t.Fatalf("Task(%s): %v %v", want.id, task, err)
			}
			got := task.GPUs[0].ClaimEnded
			if (got == nil) != (want.ended == nil) || (got != nil && *got != *want.ended) {
				t.Errorf("%s: claim ended %v, want %v", want.id, deref(got), deref(want.ended))
			}
		}
	})
}

func ptr(v int64) *int64 { return &v }

func deref(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

// TestMigrateSharesFromVersion7: a database of the schema before GPU
// shares, with a completed task of two listed GPUs and one counted from a
// device node, upgrades in place: every GPU has share 1 and holds its GPU
// whole, the unlisted GPU is counted (3 GPU-hours for its hour), and on
// the upgraded schema a shared task after a whole-GPU one ends its claim.
func TestMigrateSharesFromVersion7(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		old, err := store.OpenAtVersionForTest(ctx, dsn, 7)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{
			`INSERT INTO tasks (id, task_id, task_name, project, owner, start_time, gpu_count, registration, registered_at, end_time, duration_seconds, exit_code)
				VALUES (1000, 'a', 'train', 'p', 'o', 1000, 3, '{}', 1, 4600, 3600, 0)`,
			`INSERT INTO task_gpus (task_key, position, gpu_index, uuid, model, task_start, task_end) VALUES (1000, 0, 0, 'GPU-a', 'Tesla T4', 1000, 4600)`,
			`INSERT INTO task_gpus (task_key, position, gpu_index, uuid, model, task_start, task_end) VALUES (1000, 1, 1, 'GPU-b', 'Tesla T4', 1000, 4600)`,
		} {
			if _, err := store.DBForTest(old).Exec(q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		old.Close()
		s := open(t, dsn)
		task, err := s.Task(ctx, "a", "", nil)
		if err != nil || task == nil || len(task.GPUs) != 2 || task.GPUs[0].Share != 1 || task.GPUs[1].Share != 1 || task.GPUs[0].MIG != nil {
			t.Fatalf("after the upgrade: %+v, %v", task, err)
		}
		w := facts.Window{From: time.Unix(0, 0), To: time.Unix(100000, 0)}
		rep, err := report.Compute(ctx, s, report.Query{Window: w})
		if err != nil || rep.Total.GPUHours != 3 {
			t.Fatalf("GPU-hours after the upgrade: %+v, %v; want 3 (2 listed + 1 device node, 1 h)", rep, err)
		}
		mustRegister(t, s, reg("open", "p", "o", 5000, wire.RegisteredGPU{UUID: "GPU-x", Name: "Tesla T4"}))
		mustRegister(t, s, reg("next", "p", "o", 6000, wire.RegisteredGPU{UUID: "GPU-x", Name: "Tesla T4", Share: ptrOf(0.5)}))
		if task, err = s.Task(ctx, "open", "", nil); err != nil || task.GPUs[0].ClaimEnded == nil || *task.GPUs[0].ClaimEnded != 6000 {
			t.Fatalf("a shared task after a whole-GPU one on the upgraded schema: %+v, %v", task, err)
		}
	})
}

// TestMigrateSubmitTimeFromVersion5: a database of the schema before
// submit_time, with a task, upgrades in place: the task has none (null),
// and a new registration's submit_time is stored and read back.
func TestMigrateSubmitTimeFromVersion5(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s, err := store.OpenAtVersionForTest(ctx, dsn, 5)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.DBForTest(s).Exec(`INSERT INTO tasks (task_id, task_name, project, owner, start_time, registration, registered_at)
			VALUES ('old', 'train', 'search_x', 'ann', 1000, '{}', 1)`); err != nil {
			t.Fatal(err)
		}
		s.Close()
		again := open(t, dsn)
		task, err := again.Task(ctx, "old", "", nil)
		if err != nil || task == nil || task.SubmitTime != nil {
			t.Fatalf("after the upgrade: %+v, %v", task, err)
		}
		r := reg("new", "search_x", "ann", 2000)
		submit := int64(1400)
		r.SubmitTime = &submit
		mustRegister(t, again, r)
		if task, err = again.Task(ctx, "new", "", nil); err != nil || task.SubmitTime == nil || *task.SubmitTime != 1400 {
			t.Fatalf("a registration with submit_time on the upgraded schema: %+v, %v", task, err)
		}
	})
}

// TestMigrateTaskScopeFromVersion6: a database of schema 6 (task_id the
// primary key of tasks, task_gpus keyed by it, one pending completion per
// task_id, idle detection's columns, task_gpus' copies of the task's start
// and end, submit_time) upgrades to the task identity per
// scope with every row, column and index kept: the tasks read back as they
// were, GPU claims, summaries and idle state included, a pending
// completion still joins its registration, and the same task_id can then
// be registered in another project.
func TestMigrateTaskScopeFromVersion6(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		old, err := store.OpenAtVersionForTest(ctx, dsn, 6)
		if err != nil {
			t.Fatal(err)
		}
		oldCols, oldIdx := columns(t, old), indexNames(t, old)
		exec(t, old,
			v1Task("done", "search_x", "ann", 1000, ", end_time, duration_seconds, exit_code, completion, completed_at, last_seen) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 1100, 100, 0, '{\"task_id\":\"done\"}', 1101, 1050)"),
			v1Task("open", "vision", "bob", 2000, ", last_seen, idle_since, gpus_seen, heartbeat_interval, submit_time) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 2500, 2440, 2500, 60, 1900)"),
			[]any{`INSERT INTO task_gpus (task_id, position, gpu_index, uuid, model, memory_total, samples, util_mean, claim_ended, task_start, task_end)
				VALUES ('done', 0, 0, 'GPU-1', 'Tesla T4', 16, 10, 50.5, 2000, 1000, 1100)`},
			[]any{`INSERT INTO task_gpus (task_id, position, gpu_index, uuid, model, memory_total, latest_samples, latest_util_mean, task_start)
				VALUES ('open', 0, 3, 'GPU-1', 'Tesla T4', 16, 6, 0.5, 2000)`},
			[]any{`INSERT INTO project_owners (project, owner) VALUES ('search_x', 'ann'), ('vision', 'bob')`},
			[]any{`INSERT INTO pending_completions (task_id, completion, scope, received_at)
				VALUES ('late', '{"task_id":"late","end_time":3100,"duration_seconds":100,"exit_code":3}', '', 3200)`},
		)
		old.Close()

		s := open(t, dsn)
		newCols, newIdx := columns(t, s), indexNames(t, s)
		for _, c := range oldCols {
			if c != "task_gpus.task_id" && !slices.Contains(newCols, c) {
				t.Errorf("the upgrade lost column %s", c)
			}
		}
		for _, c := range []string{"tasks.id", "tasks.token", "tasks.seen_at", "task_gpus.task_key", "pending_completions.token"} {
			if !slices.Contains(newCols, c) {
				t.Errorf("the upgrade did not add column %s", c)
			}
		}
		for _, i := range oldIdx {
			if !slices.Contains(newIdx, i) {
				t.Errorf("the upgrade lost index %s (now %v)", i, newIdx)
			}
		}
		done, err := s.Task(ctx, "done", "", nil)
		if err != nil || done == nil {
			t.Fatalf("task done after the upgrade: %v %v", done, err)
		}
		if done.State != "completed" || done.Completion.EndTime != 1100 || done.Completion.CompletedAt != 1101 ||
			*done.LastSeen != 1050 || len(done.GPUs) != 1 || done.GPUs[0].UUID != "GPU-1" || *done.GPUs[0].UtilMean != 50.5 ||
			*done.GPUs[0].ClaimEnded != 2000 || *done.GPUs[0].Samples != 10 || done.Labels["team"] != "a" {
			t.Fatalf("task done changed in the upgrade: %+v %+v %+v", done, done.Completion, done.GPUs)
		}
		open1, _ := s.Task(ctx, "open", "", nil)
		if open1 == nil || open1.State != "running" || len(open1.GPUs) != 1 || open1.GPUs[0].Index != 3 || open1.GPUs[0].ClaimEnded != nil ||
			open1.IdleSince == nil || *open1.IdleSince != 2440 || open1.SubmitTime == nil || *open1.SubmitTime != 1900 || *open1.GPUs[0].LatestUtilMean != 0.5 || *open1.GPUs[0].LatestSamples != 6 {
			t.Fatalf("task open changed in the upgrade: %+v", open1)
		}
		// Migrated open tasks count as seen at their last sign of life.
		if ot, err := s.OpenTasks(ctx, 2400, 0); err != nil || len(ot) != 1 || ot[0].TaskID != "open" || ot[0].SeenAt != 2500 ||
			!ot[0].Sampled || *ot[0].Interval != 60 {
			t.Fatalf("open tasks after the upgrade: %+v %v", ot, err)
		}
		// The claims still answer from task_gpus' copies: a newer task on
		// GPU-1 ends open's claim, not done's.
		mustRegister(t, s, reg("newer", "vision", "bob", 2600, wire.RegisteredGPU{UUID: "GPU-1", Name: "Tesla T4"}))
		if o, _ := s.Task(ctx, "open", "", nil); o.GPUs[0].ClaimEnded == nil || *o.GPUs[0].ClaimEnded != 2600 {
			t.Errorf("open's claim after a newer task: %v, want 2600", deref(o.GPUs[0].ClaimEnded))
		}
		if d, _ := s.Task(ctx, "done", "", nil); *d.GPUs[0].ClaimEnded != 2000 {
			t.Errorf("done's claim changed: %v", deref(d.GPUs[0].ClaimEnded))
		}
		// The pending completion of schema 6 joins its registration.
		mustRegister(t, s, reg("late", "nlp", "cho", 3000))
		if late, _ := s.Task(ctx, "late", "", nil); late == nil || late.State != "failed" || late.Completion.EndTime != 3100 {
			t.Fatalf("the migrated pending completion was not joined: %+v", late)
		}
		// One task_id, several projects: the new identity. The admin
		// (nil scope) sees task open of vision: a different body is 409.
		if _, err := register(s, reg("open", "other", "bob", 4000)); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("admin registration of open in another project: %v, want ErrConflict", err)
		}
		r := reg("open", "other", "bob", 4000)
		r.From.Scope = &access.Scope{Projects: []string{"other"}}
		if created, err := register(s, r); err != nil || !created {
			t.Fatalf("task open in another scope after the upgrade: created=%v %v", created, err)
		}
	})
}

// TestMigrateCountedEndFromPrevious: a database of the schema before the
// counted end's index (the version before this binary's), with a
// completed task heard from after its end and one that was not, upgrades
// in place: the index exists, the first counts until its last heartbeat
// (max(end_time, last_seen)) in a window after its end, the second does
// not count there, and a heartbeat of a completed task moves its
// last_seen.
func TestMigrateCountedEndFromPrevious(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		prev := store.SchemaVersion() - 1
		old, err := store.OpenAtVersionForTest(ctx, dsn, prev)
		if err != nil {
			t.Fatal(err)
		}
		// Both started at 0 and claim to have ended at 1 (second); "seen"
		// sent heartbeats until 36000 (10 h).
		for _, q := range []string{
			`INSERT INTO tasks (id, task_id, task_name, project, owner, start_time, gpu_count, gpu_unlisted, registration, registered_at, last_seen, end_time, duration_seconds, exit_code)
				VALUES (1000, 'seen', 'train', 'p', 'o', 0, 1, 1, '{}', 1, 36000, 1, 1, 0)`,
			`INSERT INTO tasks (id, task_id, task_name, project, owner, start_time, gpu_count, gpu_unlisted, registration, registered_at, end_time, duration_seconds, exit_code)
				VALUES (1001, 'quiet', 'train', 'q', 'o', 0, 1, 1, '{}', 1, 1, 1, 0)`,
		} {
			if _, err := store.DBForTest(old).Exec(q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		old.Close()
		s := open(t, dsn)
		var n int
		q := "SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND name = 'tasks_done_seen'"
		if s.Dialect() == store.Postgres {
			q = "SELECT COUNT(*) FROM pg_indexes WHERE indexname = 'tasks_done_seen'"
		}
		if err := store.DBForTest(s).QueryRow(q).Scan(&n); err != nil || n != 1 {
			t.Fatalf("tasks_done_seen after the upgrade: %d, %v", n, err)
		}
		// The window [1 h, 11 h): "seen" counts 1 h → 10 h = 9 GPU-hours;
		// "quiet" ended before it and is not in it.
		w := facts.Window{From: time.Unix(3600, 0), To: time.Unix(39600, 0)}
		rep, err := report.Compute(ctx, s, report.Query{Window: w, By: []string{"project"}})
		if err != nil || rep.Total.GPUHours != 9 || rep.Total.Tasks != 1 {
			t.Fatalf("after the upgrade: %+v, %v; want 9 GPU-hours of 1 task", rep.Total, err)
		}
		// A heartbeat of the completed "quiet" at 7200 moves its counted
		// end: 1 h more in the window.
		if err := s.Heartbeat(ctx, "quiet", 7200, nil); err != nil {
			t.Fatal(err)
		}
		if rep, err = report.Compute(ctx, s, report.Query{Window: w, By: []string{"project"}}); err != nil || rep.Total.GPUHours != 10 || rep.Total.Tasks != 2 {
			t.Fatalf("after a heartbeat of a completed task: %+v, %v; want 10 GPU-hours of 2 tasks", rep.Total, err)
		}
	})
}
