package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// TestBooksPlans: every statement of closing months, late data and
// retention (the store's own table of them) is served by the index it
// names, on the plan tests' store of 100,000 tasks with 600 statements (100
// frozen task facts each) and 50,000 watched open tasks, with statistics, on both engines.
func TestBooksPlans(t *testing.T) {
	if testing.Short() {
		t.Skip("bulk-loads 100,000 tasks")
	}
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := storetest.Open(t, dsn)
		loadPlanTasks(t, s, dsn)
		loadBooks(t, s)
		checkPlans(t, s, store.BooksStatementsForTest(s))
	})
}

// loadBooks stores 600 closed months, 50,000 watched open tasks and
// 20,000 hours of roll-ups, then ANALYZE.
func loadBooks(t *testing.T, s *store.Store) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	db := store.DBForTest(s)
	q := func(sql string) string {
		if s.Dialect() == store.Postgres {
			n := 0
			out := []byte{}
			for i := 0; i < len(sql); i++ {
				if sql[i] == '?' {
					n++
					out = append(out, fmt.Sprintf("$%d", n)...)
					continue
				}
				out = append(out, sql[i])
			}
			return string(out)
		}
		return sql
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for m := range 600 {
		month := fmt.Sprintf("%04d-%02d", 1990+m/12, m%12+1)
		if _, err := tx.ExecContext(ctx, q(`INSERT INTO statements (month, version, closed_at, closed_by, task_cut, body, sha256, by_project, by_project_owner)
			VALUES (?, 1, 1, 'a', 1, '{}', 'x', '{}', '{}')`), month); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 50000 {
		if _, err := tx.ExecContext(ctx, q("INSERT INTO statement_open (month, task_key, last_seen) VALUES (?, ?, NULL)"),
			fmt.Sprintf("%04d-%02d", 1990+i%600/12, i%12+1), int64(i+1)); err != nil {
			t.Fatal(err)
		}
	}
	// 100 frozen task facts and ledger facts per closed month
	// (migrations 0019 and 0020).
	for i := range 60000 {
		month := fmt.Sprintf("%04d-%02d", 1990+i/100/12, i/100%12+1)
		for _, table := range []string{"statement_task_facts", "statement_ledger_facts"} {
			if _, err := tx.ExecContext(ctx, q(`INSERT INTO `+table+` (month, version, line, kind, day)
				VALUES (?, 1, ?, 'part', 1)`), month, int64(i%100)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range 20000 {
		if _, err := tx.ExecContext(ctx, q("INSERT INTO node_gpu_hours (hour, node, uuid) VALUES (?, ?, ?)"),
			int64(1700000000+i/100*3600), fmt.Sprintf("node-%03d", i%100), "GPU-1"); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, q(`INSERT INTO node_user_hours (hour, node, uuid, gpu_instance_id, user_key, last_time)
			VALUES (?, ?, ?, -1, 'u', 1)`), int64(1700000000+i/100*3600), fmt.Sprintf("node-%03d", i%100), "GPU-1"); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "ANALYZE"); err != nil {
		t.Fatal(err)
	}
}
