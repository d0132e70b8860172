package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite" // "sqlite", for the bulk load

	"github.com/paddle-entrypoint/paddle-entrypoint/store"
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
		t := &benchTask{
			id:      fmt.Sprintf("bench-%07d", i),
			project: fmt.Sprintf("project-%02d", rng.IntN(50)),
			owner:   fmt.Sprintf("user%03d@example.com", rng.IntN(500)),
			host:    fmt.Sprintf("node-%03d", rng.IntN(200)),
			start:   benchYear.Unix() + int64(i)*span/int64(n),
			gpus:    int64(benchGPUs[rng.IntN(len(benchGPUs))]),
			est:     int64(1+rng.IntN(12)) * 3600,
		}
		length := int64(600 + rng.IntN(10*3600))
		switch {
		case i%10 == 9 && i%20 == 19:
			seen := t.start + length
			t.lastSeen = &seen
		case i%10 == 9:
		default:
			end := t.start + length
			exit := int64(0)
			if rng.IntN(5) == 0 {
				exit = 1
			}
			t.end, t.exit, t.dur = &end, &exit, float64(length)
		}
		for range t.gpus {
			t.models = append(t.models, benchModel[rng.IntN(len(benchModel))])
			t.util = append(t.util, rng.Float64()*100)
			t.idle = append(t.idle, rng.Float64()/2)
		}
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
	dsn, err := e.newDSN()
	if err != nil {
		return "", err
	}
	ctx := context.Background()
	if err := e.schema(dsn); err != nil {
		return "", err
	}
	fmt.Fprintf(os.Stderr, "monitorbench: bulk-loading %d tasks on %s\n", *reportTasks, e.store)
	started := time.Now()
	if store.IsPostgresDSN(dsn) {
		e.bulkRows, err = loadPostgres(ctx, dsn, *reportTasks)
	} else {
		e.bulkRows, err = loadSQLite(ctx, dsn, *reportTasks)
	}
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

	timeReport := func(by string) (time.Duration, string, error) {
		var times []time.Duration
		var out string
		for range 3 {
			cmd := exec.Command(e.opts.monitor, "report", "--db", dsn, "--from", benchMonth[0], "--to", benchMonth[1],
				"--by", by, "--format", "json")
			t0 := time.Now()
			b, err := cmd.Output()
			if err != nil {
				return 0, "", fmt.Errorf("report --by %s: %w", by, err)
			}
			times = append(times, time.Since(t0))
			out = string(b)
		}
		sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
		return times[1], out, nil
	}
	byProject, out, err := timeReport("project")
	if err != nil {
		return nil, err
	}
	inMonth := "?"
	if i := strings.Index(out, `"total": {`); i >= 0 {
		var n int
		if _, err := fmt.Sscanf(strings.TrimSpace(out[i+len(`"total": {`):]), `"tasks": %d`, &n); err == nil {
			inMonth = fmt.Sprint(n)
		}
	}
	byOwner, _, err := timeReport("owner")
	if err != nil {
		return nil, err
	}
	byModel, _, err := timeReport("model")
	if err != nil {
		return nil, err
	}
	e.result("report.project", byProject.Seconds())
	e.result("report.owner", byOwner.Seconds())
	e.result("report.model", byModel.Seconds())
	return [][]string{{
		fmt.Sprintf("%d (%d)", *reportTasks, rows),
		inMonth,
		load,
		ms(byProject),
		ms(byOwner),
		ms(byModel),
	}}, nil
}

// loadSQLite writes the tasks in one transaction with prepared statements.
func loadSQLite(ctx context.Context, path string, n int) (int, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(OFF)&_pragma=busy_timeout(10000)")
	if err != nil {
		return 0, err
	}
	defer db.Close()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	task, err := tx.PrepareContext(ctx, `INSERT INTO tasks (task_id, task_name, project, owner, hostname, start_time,
		gpu_count, duration_est, registration, registered_at, last_seen, end_time, duration_seconds, exit_code, completion, completed_at)
		VALUES (?, 'train', ?, ?, ?, ?, ?, ?, '{}', ?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return 0, err
	}
	var n4 int
	if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM pragma_table_info('task_gpus') WHERE name = 'task_start'").Scan(&n4); err != nil {
		return 0, err
	}
	claims := n4 == 1
	gpuSQL := `INSERT INTO task_gpus (task_id, position, gpu_index, uuid, model, samples, util_mean, idle_share) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`
	if claims {
		gpuSQL = `INSERT INTO task_gpus (task_id, position, gpu_index, uuid, model, samples, util_mean, idle_share, task_start, task_end)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	}
	gpu, err := tx.PrepareContext(ctx, gpuSQL)
	if err != nil {
		return 0, err
	}
	rows := 0
	err = genTasks(n, func(t *benchTask) error {
		var completion any
		if t.end != nil {
			completion = "{}"
		}
		if _, err := task.ExecContext(ctx, t.id, t.project, t.owner, t.host, t.start, t.gpus, t.est, t.start,
			t.lastSeen, t.end, nullIfOpen(t), t.exit, completion, t.end); err != nil {
			return err
		}
		for i, m := range t.models {
			samples, util, idle := sampled(t, i)
			args := []any{t.id, i, i, gpuUUID(t, i), m, samples, util, idle}
			if claims {
				args = append(args, t.start, t.end)
			}
			if _, err := gpu.ExecContext(ctx, args...); err != nil {
				return err
			}
			rows++
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return rows, tx.Commit()
}

// loadPostgres writes the tasks with COPY.
func loadPostgres(ctx context.Context, dsn string, n int) (int, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var claims bool
	if err := conn.QueryRow(ctx, "SELECT COUNT(*) = 1 FROM information_schema.columns WHERE table_name = 'task_gpus' AND column_name = 'task_start'").Scan(&claims); err != nil {
		return 0, err
	}
	var tasks, gpus [][]any
	err = genTasks(n, func(t *benchTask) error {
		var completion any
		if t.end != nil {
			completion = "{}"
		}
		tasks = append(tasks, []any{t.id, "train", t.project, t.owner, t.host, t.start, t.gpus, t.est, "{}", t.start,
			t.lastSeen, t.end, nullIfOpen(t), t.exit, completion, t.end})
		for i, m := range t.models {
			samples, util, idle := sampled(t, i)
			row := []any{t.id, int64(i), int64(i), gpuUUID(t, i), m, samples, util, idle}
			if claims {
				row = append(row, t.start, t.end)
			}
			gpus = append(gpus, row)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	if _, err := conn.CopyFrom(ctx, pgx.Identifier{"tasks"}, []string{"task_id", "task_name", "project", "owner",
		"hostname", "start_time", "gpu_count", "duration_est", "registration", "registered_at", "last_seen", "end_time",
		"duration_seconds", "exit_code", "completion", "completed_at"}, pgx.CopyFromRows(tasks)); err != nil {
		return 0, err
	}
	gpuCols := []string{"task_id", "position", "gpu_index", "uuid", "model", "samples", "util_mean", "idle_share"}
	if claims {
		gpuCols = append(gpuCols, "task_start", "task_end")
	}
	if _, err := conn.CopyFrom(ctx, pgx.Identifier{"task_gpus"}, gpuCols, pgx.CopyFromRows(gpus)); err != nil {
		return 0, err
	}
	// What autovacuum does soon after a large load; the planner needs it.
	if _, err := conn.Exec(ctx, "ANALYZE tasks; ANALYZE task_gpus"); err != nil {
		return 0, err
	}
	return len(gpus), nil
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
