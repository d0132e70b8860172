package store_test

import (
	"database/sql"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// TestStatementPlans: every statement of the registry (store.statements:
// the tasks' and the nodes' write paths, the reads, the ledger, the
// books, the report's templates by a representative instance, the
// maintenance statements) is explained on both engines with its example,
// on a store of 100,000 tasks and a month of one hundred nodes of eight
// GPUs, with statistics. One that names an index must use it and read no
// table of the tasks or the nodes without an index; one that names none
// must read no table; one marked a full scan says why and is explained
// only; one marked without a plan (DDL, transaction control, maintenance)
// says why and is not explained.
func TestStatementPlans(t *testing.T) {
	if testing.Short() {
		t.Skip("bulk-loads 100,000 tasks and a month of node reports")
	}
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := storetest.Open(t, dsn)
		loadPlanTasks(t, s, dsn)
		loadNodeHours(t, s)
		loadFacts(t, s)
		loadBooks(t, s)
		stmts := store.StatementsForTest(s)
		if len(stmts) < 150 {
			t.Fatalf("only %d statements registered", len(stmts))
		}
		db := store.DBForTest(s)
		for _, st := range stmts {
			t.Run(st.Name, func(t *testing.T) {
				switch {
				case st.NoPlan != "":
					return
				}
				var q interface {
					Query(string, ...any) (*sql.Rows, error)
				} = db
				if st.ReadSettings != "" {
					tx, err := db.Begin()
					if err != nil {
						t.Fatal(err)
					}
					defer tx.Rollback()
					if _, err := tx.Exec(st.ReadSettings); err != nil {
						t.Fatal(err)
					}
					q = tx
				}
				text := strings.Join(explain(t, q, s.Dialect(), st.WriteStatement), "\n")
				if st.FullScan != "" {
					return
				}
				// A key list (Dialect.keyList: json_each) is a list SQLite
				// builds from the bound argument, not a table it scans.
				if strings.Contains(text, "VIRTUAL TABLE INDEX") {
					text = regexp.MustCompile(`(?m)^LIST SUBQUERY \d+$`).ReplaceAllString(text, "")
				}
				scans := []*regexp.Regexp{sqliteScan, nodeSQLiteScan}
				uses := regexp.MustCompile(`(?m)USING (COVERING )?INDEX ` + regexp.QuoteMeta(st.Index) + `( |$)`)
				if s.Dialect() == store.Postgres {
					scans = []*regexp.Regexp{postgresScan, nodePostgresScan}
					// A partitioned table's index is its partitions' (indexFamily).
					ix := indexFamily(t, db, s.Dialect(), st.Index)
					uses = regexp.MustCompile(`(Index Scan|Index Only Scan)( Backward)? using ` + ix +
						` on |Bitmap Index Scan on ` + ix + `\b|Conflict Arbiter Indexes: ` + ix + `\b`)
				}
				for _, scan := range scans {
					if scan.MatchString(text) {
						t.Fatalf("reads a table without an index:\n%s\n%s", st.SQL, text)
					}
				}
				switch {
				case st.Index == "":
					if strings.Contains(text, "SEARCH ") || strings.Contains(valuesScan.ReplaceAllString(text, ""), " Scan ") {
						t.Fatalf("reads a table; the registry names no index for it:\n%s\n%s", st.SQL, text)
					}
				case st.Index == "INTEGER PRIMARY KEY" && s.Dialect() == store.SQLite:
					// A lookup of tasks.id, the rowid; "SEARCH tasks" alone:
					// MAX(id), one seek at the rowid b-tree's end.
					if !strings.Contains(text, "USING INTEGER PRIMARY KEY (rowid=?)") && !strings.Contains(text, "SEARCH tasks") {
						t.Fatalf("does not use the rowid:\n%s\n%s", st.SQL, text)
					}
				case !uses.MatchString(text):
					t.Fatalf("does not use %s:\n%s\n%s", st.Index, st.SQL, text)
				}
			})
		}
	})
}

// TestEveryStatementSaysWhy: a registered statement names an index on
// each engine that runs it, or says why it has none.
func TestEveryStatementSaysWhy(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := storetest.Open(t, dsn)
		for _, st := range store.StatementsForTest(s) {
			if st.Index == "" && st.FullScan == "" && st.NoPlan == "" && strings.Contains(strings.ToUpper(st.SQL), " FROM ") &&
				!strings.HasPrefix(strings.TrimSpace(strings.ToUpper(st.SQL)), "INSERT") {
				t.Errorf("%s reads a table, names no index and says no why:\n%s", st.Name, st.SQL)
			}
		}
	})
}

// loadFacts stores the day and month roll-ups of 100 GPUs over a year of
// days and ten years of months, 2,000 serving replicas' inputs, 2,000
// statements' exports and their ledger facts (100 each), then
// ANALYZE.
func loadFacts(t *testing.T, s *store.Store) {
	t.Helper()
	db := store.DBForTest(s)
	series := "WITH RECURSIVE h(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM h WHERE i < %d) SELECT i FROM h"
	if s.Dialect() == store.Postgres {
		series = "SELECT i FROM generate_series(0, %d) AS h(i)"
	}
	const gpus = 100
	for _, q := range []string{
		fmt.Sprintf(`INSERT INTO node_gpu_days (day, node, uuid) SELECT 86400 * (i / %d), 'node-' || (i %% %d), 'GPU-' || (i %% %d)
			FROM (`+series+`) x`, gpus, gpus, gpus, gpus*365-1),
		fmt.Sprintf(`INSERT INTO node_user_days (day, node, uuid, gpu_instance_id, user_key, first_time, last_time) SELECT 86400 * (i / %d), 'node-' || (i %% %d),
			'GPU-' || (i %% %d), -1, 'u', 1, 1 FROM (`+series+`) x`, gpus, gpus, gpus, gpus*365-1),
		fmt.Sprintf(`INSERT INTO node_gpu_months (month, node, uuid) SELECT 2678400 * (i / %d), 'node-' || (i %% %d), 'GPU-' || (i %% %d)
			FROM (`+series+`) x`, gpus, gpus, gpus, gpus*120-1),
		fmt.Sprintf(`INSERT INTO node_user_months (month, node, uuid, gpu_instance_id, user_key, first_time, last_time) SELECT 2678400 * (i / %d), 'node-' || (i %% %d),
			'GPU-' || (i %% %d), -1, 'u', 1, 1 FROM (`+series+`) x`, gpus, gpus, gpus, gpus*120-1),
		fmt.Sprintf(`INSERT INTO serving_inputs (replica, recorded_at) SELECT 'replica-' || i, i FROM (`+series+`) x`, 1999),
		fmt.Sprintf(`INSERT INTO statement_exports (month, version, format, body, sha256) SELECT 'm' || i, 1, 'csv', '', 'x' FROM (`+series+`) x`, 1999),
		fmt.Sprintf(`INSERT INTO statement_ledger_facts (month, version, line, kind, day) SELECT 'm' || (i / 100), 1, i %% 100, 'part', 1
			FROM (`+series+`) x`, 199999),
		"ANALYZE",
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}
