package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// planTasks is the size of the store the plans are checked on: large
// enough that PostgreSQL's planner prefers a sequential scan wherever no
// index fits, with statistics (ANALYZE) on both stores.
const planTasks = 100000

// loadPlanTasks bulk-loads planTasks tasks of two GPUs each: a tenth of them
// open, the GPUs spread over 1,600 UUIDs (200 nodes of 8: each GPU ran
// about 125 tasks, as in a store that holds months of work), and a backlog
// of 10,000 completions waiting for their registrations, then ANALYZE.
func loadPlanTasks(t *testing.T, s *store.Store, dsn string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	task := func(i int) []any {
		var end any
		if i%10 != 9 {
			end = int64(1700000000 + i*60 + 3600)
		}
		return []any{int64(i + 1), fmt.Sprintf("plan-%06d", i), "train", fmt.Sprintf("p%02d", i%50), fmt.Sprintf("o%03d", i%500),
			int64(1700000000 + i*60), int64(2), "{}", int64(1700000000 + i*60), end, fmt.Sprintf("tok%02d", i%20), int64(1700000000 + i*60)}
	}
	gpu := func(i, pos int, end any) []any {
		return []any{int64(i + 1), int64(pos), int64(pos), fmt.Sprintf("GPU-%04d", (i*2+pos)%1600),
			"NVIDIA A100", int64(1700000000 + i*60), end}
	}
	pending := func(i int) []any {
		return []any{fmt.Sprintf("pending-%05d", i), "{}", "", int64(1700000000 + i), fmt.Sprintf("tok%02d", i%20)}
	}
	const pendingN = 10000
	pendingCols := []string{"task_id", "completion", "scope", "received_at", "token"}
	taskCols := []string{"id", "task_id", "task_name", "project", "owner", "start_time", "gpu_count", "registration", "registered_at",
		"end_time", "token", "seen_at"}
	gpuCols := []string{"task_key", "position", "gpu_index", "uuid", "model", "task_start", "task_end"}
	if s.Dialect() == store.Postgres {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var tasks, gpus, pend [][]any
		for i := range pendingN {
			pend = append(pend, pending(i))
		}
		if _, err := conn.CopyFrom(ctx, pgx.Identifier{"pending_completions"}, pendingCols, pgx.CopyFromRows(pend)); err != nil {
			t.Fatal(err)
		}
		for i := range planTasks {
			tk := task(i)
			tasks = append(tasks, tk)
			gpus = append(gpus, gpu(i, 0, tk[9]), gpu(i, 1, tk[9]))
		}
		if _, err := conn.CopyFrom(ctx, pgx.Identifier{"tasks"}, taskCols, pgx.CopyFromRows(tasks)); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.CopyFrom(ctx, pgx.Identifier{"task_gpus"}, gpuCols, pgx.CopyFromRows(gpus)); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, "ANALYZE"); err != nil {
			t.Fatal(err)
		}
		return
	}
	db := store.DBForTest(s)
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	insert := func(table string, cols []string) *sql.Stmt {
		st, err := tx.PrepareContext(ctx, "INSERT INTO "+table+" ("+strings.Join(cols, ", ")+") VALUES (?"+
			strings.Repeat(", ?", len(cols)-1)+")")
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	ti, gi, pi := insert("tasks", taskCols), insert("task_gpus", gpuCols), insert("pending_completions", pendingCols)
	for i := range pendingN {
		if _, err := pi.ExecContext(ctx, pending(i)...); err != nil {
			t.Fatal(err)
		}
	}
	for i := range planTasks {
		tk := task(i)
		if _, err := ti.ExecContext(ctx, tk...); err != nil {
			t.Fatal(err)
		}
		for pos := range 2 {
			if _, err := gi.ExecContext(ctx, gpu(i, pos, tk[9])...); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "ANALYZE"); err != nil {
		t.Fatal(err)
	}
}

// The tables of the tasks: the write path must never read one of them but
// through an index.
var (
	sqliteScan   = regexp.MustCompile(`\bSCAN (tasks|task_gpus|pending_completions|project_owners)\b|LIST SUBQUERY`)
	postgresScan = regexp.MustCompile(`Seq Scan on (tasks|task_gpus|pending_completions|project_owners)\b`)
)

// TestWritePlans: every statement a registration, a completion or a
// heartbeat runs (the store's own table of them, the very strings it runs)
// is served by the index it names, on a store of 100,000 tasks with
// statistics: SQLite's EXPLAIN QUERY PLAN has no SCAN of the tasks' tables
// and no subquery list; PostgreSQL's EXPLAIN no Seq Scan.
func TestWritePlans(t *testing.T) {
	if testing.Short() {
		t.Skip("bulk-loads 100,000 tasks")
	}
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := storetest.Open(t, dsn)
		loadPlanTasks(t, s, dsn)
		checkWritePlans(t, s)
	})
}

func checkWritePlans(t *testing.T, s *store.Store) {
	t.Helper()
	stmts := store.WriteStatementsForTest(s)
	if len(stmts) < 15 {
		t.Fatalf("only %d write statements listed", len(stmts))
	}
	// The report's span: each of its sets of tasks by its own index
	// (a completed task seen after its end by tasks_done_seen).
	stmts = append(stmts, store.SpanBranchesForTest(s)...)
	checkPlans(t, s, stmts)
}

// valuesScan is PostgreSQL's scan of a multi-row INSERT's own VALUES
// list (the frozen task facts'): no table is read.
var valuesScan = regexp.MustCompile(`Values Scan on "\*VALUES\*"`)

// checkPlans checks that each statement's plan reads the tasks' tables
// only through the index it names.
func checkPlans(t *testing.T, s *store.Store, stmts []store.WriteStatement) {
	t.Helper()
	db := store.DBForTest(s)
	for _, st := range stmts {
		t.Run(st.Name, func(t *testing.T) {
			plan := explain(t, db, s.Dialect(), st)
			text := strings.Join(plan, "\n")
			if s.Dialect() == store.SQLite {
				if sqliteScan.MatchString(text) {
					t.Fatalf("reads a table without an index:\n%s\n%s", st.SQL, text)
				}
				if st.Index == "" {
					if strings.Contains(text, "SEARCH ") {
						t.Fatalf("reads a table; the statement table names no index for it:\n%s", text)
					}
					return
				}
				// "INTEGER PRIMARY KEY": a lookup of tasks.id, the rowid.
				// "SEARCH tasks" alone: MAX(id), one seek at the rowid
				// b-tree's end (SQLite's min/max optimisation).
				uses := regexp.MustCompile(`USING (COVERING )?INDEX ` + st.Index + `( |$)`)
				if !uses.MatchString(text) &&
					!(st.Index == "INTEGER PRIMARY KEY" && (strings.Contains(text, "USING INTEGER PRIMARY KEY (rowid=?)") || text == "SEARCH tasks")) {
					t.Fatalf("does not use %s:\n%s\n%s", st.Index, st.SQL, text)
				}
				return
			}
			if postgresScan.MatchString(text) {
				t.Fatalf("reads a table without an index:\n%s\n%s", st.SQL, text)
			}
			if st.Index == "" {
				if strings.Contains(valuesScan.ReplaceAllString(text, ""), " Scan ") {
					t.Fatalf("reads a table; the statement table names no index for it:\n%s", text)
				}
				return
			}
			ix := indexFamily(t, db, s.Dialect(), st.Index)
			uses := regexp.MustCompile(`(Index Scan|Index Only Scan)( Backward)? using ` + ix + ` on |Bitmap Index Scan on ` +
				ix + `\b|Conflict Arbiter Indexes: ` + ix + `\b`)
			if !uses.MatchString(text) {
				t.Fatalf("does not use %s:\n%s\n%s", st.Index, st.SQL, text)
			}
		})
	}
}

// explain returns the plan's lines. It never runs the statement (an UPDATE
// is explained, not executed; PostgreSQL's EXPLAIN without ANALYZE).
func explain(t *testing.T, db interface {
	Query(string, ...any) (*sql.Rows, error)
}, d store.Dialect, st store.WriteStatement) []string {
	t.Helper()
	q := "EXPLAIN QUERY PLAN " + st.SQL
	if d == store.Postgres {
		q = "EXPLAIN " + st.SQL
	}
	rows, err := db.Query(q, st.Example...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		// SQLite: id, parent, notused, detail; PostgreSQL: one column.
		switch v := vals[len(vals)-1].(type) {
		case string:
			out = append(out, v)
		case []byte:
			out = append(out, string(v))
		default:
			out = append(out, fmt.Sprint(v))
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestWritePathRunsOnlyListedStatements: the write path's files pass no
// SQL to database/sql but through Store.exec, Store.queryRow,
// Store.query and Store.pipeline, which take a statement of the table TestWritePlans checks. A statement written inline would escape the plan test.
func TestWritePathRunsOnlyListedStatements(t *testing.T) {
	for _, file := range []string{"write.go", "batch.go", "statements.go", "idle.go", "heartbeat.go", "claim.go", "complete.go"} {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok {
				continue
			}
			if file == "statements.go" && (fn.Name.Name == "exec" || fn.Name.Name == "queryRow" || fn.Name.Name == "query" ||
				fn.Name.Name == "prepareWrites" || fn.Name.Name == "pipeline") {
				continue
			}
			ast.Inspect(fn, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				switch sel.Sel.Name {
				case "ExecContext", "QueryRowContext", "QueryContext", "PrepareContext", "Exec", "Query", "QueryRow", "Prepare":
				default:
					return true
				}
				t.Errorf("%s: %s runs SQL directly (%s); use s.exec or s.queryRow with a statement of writeStatements",
					fset.Position(call.Pos()), fn.Name.Name, sel.Sel.Name)
				return true
			})
		}
	}
}
