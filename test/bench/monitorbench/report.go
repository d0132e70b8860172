package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite" // "sqlite", for the bulk load

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
)

var reportTasks = flag.Int("report-tasks", 1000000, "report: tasks stored before the report runs")

var reportScenario = scenario{
	name:  "report",
	title: "Report for one month over the bulk-loaded store",
	header: []string{"stored tasks (GPU rows)", "tasks in the month", "bulk load",
		"`report --by project` (median of 3)", "`report --by owner` (median of 3)", "`report --by model` (median of 3)"},
	run: runReport,
}

// The stored tasks span twelve months of 2025, start times spread evenly;
// the report asks for June. Every tenth task has no completion (half of
// those with a heartbeat), a fifth of the completed ones failed.
var (
	benchYear  = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	benchMonth = [2]string{"2025-06-01", "2025-07-01"}
	benchModel = []string{"Tesla T4", "NVIDIA A100-SXM4-80GB", "NVIDIA A100-PCIE-40GB", "NVIDIA H100 80GB HBM3", "NVIDIA L4"}
	benchGPUs  = []int{1, 1, 2, 2, 4} // GPUs per task: 2 on average
)

// benchTask is one generated task.
type benchTask struct {
	id, project, owner, host string
	key                      int64 // tasks.id (schema 7 on)
	start, gpus, est         int64
	end, lastSeen            *int64
	dur                      float64
	exit, gate               *int64
	models                   []string
	util, idle               []float64
}

func genTasks(n int, visit func(t *benchTask) error) error {
	rng := rand.New(rand.NewPCG(1, 2))
	span := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Unix() - benchYear.Unix()
	for i := range n {
		t := randomTask(rng, fmt.Sprintf("bench-%07d", i), i, benchYear.Unix()+int64(i)*span/int64(n))
		if err := visit(t); err != nil {
			return err
		}
	}
	return nil
}

// bulkStore returns the database of -report-tasks bulk-loaded tasks of this
// store, loading it on first use.
func (e *env) bulkStore() (string, error) {
	if e.bulk != "" || e.bulkErr != nil {
		return e.bulk, e.bulkErr
	}
	e.bulk, e.bulkErr = e.loadBulk()
	return e.bulk, e.bulkErr
}

func (e *env) loadBulk() (string, error) {
	dsn, err := e.emptyStore()
	if err != nil {
		return "", err
	}
	ctx := context.Background()
	fmt.Fprintf(os.Stderr, "monitorbench: bulk-loading %d tasks on %s\n", *reportTasks, e.store)
	started := time.Now()
	e.bulkRows, err = loadTasks(ctx, dsn, *reportTasks)
	if err != nil {
		return "", fmt.Errorf("bulk load: %w", err)
	}
	e.bulkLoad = time.Since(started).Round(100 * time.Millisecond).String()
	return dsn, nil
}

func runReport(e *env) ([][]string, error) {
	dsn, err := e.bulkStore()
	if err != nil {
		return nil, err
	}
	rows, load := e.bulkRows, e.bulkLoad

	row := []string{fmt.Sprintf("%d (%d)", *reportTasks, rows), "?", load}
	figs := map[string]float64{}
	for _, by := range []string{"project", "owner", "model"} {
		wall, _, out, err := e.median3("report", "--db", dsn, "--from", benchMonth[0], "--to", benchMonth[1], "--by", by, "--format", "json")
		if err != nil {
			return nil, err
		}
		// The month's tasks, as the first report counts them.
		if i := strings.Index(string(out), `"total": {`); by == "project" && i >= 0 {
			var n int
			if _, err := fmt.Sscanf(strings.TrimSpace(string(out[i+len(`"total": {`):])), `"tasks": %d`, &n); err == nil {
				row[1] = fmt.Sprint(n)
			}
		}
		figs["report."+by] = wall.Seconds()
		row = append(row, ms(wall))
	}
	for name, v := range figs {
		e.result(name, v)
	}
	return [][]string{row}, nil
}

// loadTasks writes the tasks in one transaction (SQLite) or with COPY
// (PostgreSQL).
func loadTasks(ctx context.Context, dsn string, n int) (int, error) {
	b, err := openBulk(ctx, dsn)
	if err != nil {
		return 0, err
	}
	defer b.close()
	rows := 0
	// One GPU runs one task: an open task's claim ended when the next
	// task on its GPU started, as registrations would have recorded it.
	openClaim := map[string][]any{}
	err = genTasks(n, func(t *benchTask) error {
		var completion any
		if t.end != nil {
			completion = "{}"
		}
		key := t.key
		seen := t.start
		if t.lastSeen != nil && *t.lastSeen > seen {
			seen = *t.lastSeen
		}
		if _, err := b.add("tasks", map[string]any{"id": key, "task_id": t.id, "task_name": "train", "project": t.project,
			"owner": t.owner, "hostname": t.host, "start_time": t.start, "gpu_count": t.gpus, "duration_est": t.est,
			"registration": "{}", "registered_at": t.start, "last_seen": t.lastSeen, "seen_at": seen, "end_time": t.end,
			"duration_seconds": nullIfOpen(t), "exit_code": t.exit, "completion": completion, "completed_at": t.end}); err != nil {
			return err
		}
		for i, m := range t.models {
			samples, util, idle := sampled(t, i)
			uuid := gpuUUID(t, i)
			row, err := b.add("task_gpus", map[string]any{"task_id": t.id, "task_key": key, "position": int64(i),
				"gpu_index": int64(i), "uuid": uuid, "model": m, "samples": samples, "util_mean": util,
				"idle_share": idle, "task_start": t.start, "task_end": t.end, "claim_ended": nil})
			if err != nil {
				return err
			}
			if prev, ok := openClaim[uuid]; ok {
				b.set("task_gpus", prev, "claim_ended", t.start)
				delete(openClaim, uuid)
			}
			if t.end == nil {
				openClaim[uuid] = row
			}
			rows++
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return rows, b.finish()
}

// bulk writes rows of named columns into a store's tables, fast: kept in
// memory (so that a row may still change, see set), then one transaction of
// prepared INSERTs on SQLite (synchronous off: a benchmark's fixture), COPY
// on PostgreSQL (then VACUUM ANALYZE, what autovacuum does soon after a
// large load; the benchmark must not measure it running). A row names every column any schema version has;
// only those the store's tables have are written, so that the benchmark
// also loads the store of an older paddle-monitor (the "before" figures).
type bulk struct {
	ctx    context.Context
	pg     *pgx.Conn
	db     *sql.DB
	tx     *sql.Tx
	have   map[string]map[string]bool // table → its columns
	cols   map[string][]string        // table → the columns written, in order
	order  []string                   // tables in the order of their first row
	copied map[string][][]any
}

func openBulk(ctx context.Context, dsn string) (*bulk, error) {
	b := &bulk{ctx: ctx, have: map[string]map[string]bool{}, cols: map[string][]string{},
		copied: map[string][][]any{}}
	var err error
	if b.pg, b.db, err = connect(ctx, dsn); err != nil || b.pg != nil {
		return b, err
	}
	b.tx, err = b.db.BeginTx(ctx, nil)
	return b, err
}

// sqliteSource is the bulk loads' SQLite data source for dsn: WAL, no
// fsync (a fixture, made again after a crash), a long busy wait.
func sqliteSource(dsn string) string {
	return "file:" + dsn + "?_pragma=journal_mode(WAL)&_pragma=synchronous(OFF)&_pragma=busy_timeout(10000)"
}

// connect opens dsn on its engine: a pgx connection for PostgreSQL, a
// database/sql handle for SQLite.
func connect(ctx context.Context, dsn string) (*pgx.Conn, *sql.DB, error) {
	if store.IsPostgresDSN(dsn) {
		pg, err := pgx.Connect(ctx, dsn)
		return pg, nil, err
	}
	db, err := sql.Open("sqlite", sqliteSource(dsn))
	return nil, db, err
}

func (b *bulk) columns(table string) (map[string]bool, error) {
	if c, ok := b.have[table]; ok {
		return c, nil
	}
	c := map[string]bool{}
	// One scan over either engine's rows.
	var next func() bool
	var scan func(...any) error
	var done func()
	if b.pg != nil {
		rows, err := b.pg.Query(b.ctx, "SELECT column_name FROM information_schema.columns WHERE table_name = $1", table)
		if err != nil {
			return nil, err
		}
		next, scan, done = rows.Next, rows.Scan, rows.Close
	} else {
		rows, err := b.tx.QueryContext(b.ctx, "SELECT name FROM pragma_table_info(?)", table)
		if err != nil {
			return nil, err
		}
		next, scan, done = rows.Next, rows.Scan, func() { rows.Close() }
	}
	names, err := scanNames(next, scan)
	done()
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		c[n] = true
	}
	b.have[table] = c
	return c, nil
}

// scanNames reads one string a row, from either engine's rows.
func scanNames(next func() bool, scan func(...any) error) ([]string, error) {
	var names []string
	for next() {
		var n string
		if err := scan(&n); err != nil {
			return nil, err
		}
		names = append(names, n)
	}
	return names, nil
}

// add queues a row and returns its values, in the order of the table's
// columns written.
func (b *bulk) add(table string, row map[string]any) ([]any, error) {
	cols, ok := b.cols[table]
	if !ok {
		have, err := b.columns(table)
		if err != nil {
			return nil, err
		}
		for k := range row {
			if have[k] {
				cols = append(cols, k)
			}
		}
		sort.Strings(cols)
		b.cols[table] = cols
		b.order = append(b.order, table)
	}
	vals := make([]any, len(cols))
	for i, c := range cols {
		vals[i] = row[c]
	}
	b.copied[table] = append(b.copied[table], vals)
	return vals, nil
}

// set changes a queued row's column, when the table has it.
func (b *bulk) set(table string, row []any, col string, v any) {
	for i, c := range b.cols[table] {
		if c == col {
			row[i] = v
		}
	}
}

func (b *bulk) finish() error {
	if b.tx != nil {
		for _, table := range b.order {
			cols := b.cols[table]
			st, err := b.tx.PrepareContext(b.ctx, "INSERT INTO "+table+" ("+strings.Join(cols, ", ")+") VALUES (?"+
				strings.Repeat(", ?", len(cols)-1)+")")
			if err != nil {
				return err
			}
			for _, vals := range b.copied[table] {
				if _, err := st.ExecContext(b.ctx, vals...); err != nil {
					return fmt.Errorf("INSERT INTO %s: %w", table, err)
				}
			}
			st.Close()
			delete(b.copied, table)
		}
		return b.tx.Commit()
	}
	for _, table := range b.order {
		if _, err := b.pg.CopyFrom(b.ctx, pgx.Identifier{table}, b.cols[table], pgx.CopyFromRows(b.copied[table])); err != nil {
			return fmt.Errorf("COPY %s: %w", table, err)
		}
		delete(b.copied, table)
	}
	// Rows written with their own id leave the identity's sequence where
	// it was: the next registration would take id 1 again.
	if b.have["tasks"]["id"] {
		if _, err := b.pg.Exec(b.ctx, "SELECT setval(pg_get_serial_sequence('tasks', 'id'), (SELECT MAX(id) FROM tasks))"); err != nil {
			return err
		}
	}
	_, err := b.pg.Exec(b.ctx, "VACUUM ANALYZE")
	return err
}

func (b *bulk) close() {
	if b.tx != nil {
		b.tx.Rollback()
		b.db.Close()
	}
	if b.pg != nil {
		b.pg.Close(b.ctx)
	}
}

// gpuUUID is the UUID of the task's GPU i: GPUs of its node, 8 a node, so
// that one GPU runs many tasks over the year, as on a real cluster.
func gpuUUID(t *benchTask, i int) string { return fmt.Sprintf("GPU-%s-%d", t.host, i) }

func nullIfOpen(t *benchTask) any {
	if t.end == nil {
		return nil
	}
	return t.dur
}

// sampled is GPU i's completion summary: none for an open task.
func sampled(t *benchTask, i int) (samples, util, idle any) {
	if t.end == nil {
		return nil, nil, nil
	}
	return int64(360), t.util[i], t.idle[i]
}
