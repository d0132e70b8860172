package main

import (
	"bytes"
	"context"
	"database/sql"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/monitorproc"
	"github.com/paddle-entrypoint/paddle-entrypoint/store"
)

var (
	metricsTasks = flag.Int("metrics-tasks", 20000, "metrics: open tasks stored (8 GPUs each)")
	metricsGPUs  = 8
)

var metricsScenario = scenario{
	name:  "metrics",
	title: "/metrics with open tasks of 8 GPUs each",
	header: []string{"open tasks (GPUs)", "bulk load", "`GET /metrics` (median of 3)", "size", "series",
		"`promtool check metrics`", "RSS at rest", "RSS serving /metrics (peak)"},
	run: runMetrics,
}

func runMetrics(e *env) ([][]string, error) {
	dsn, err := e.newDSN()
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	if err := e.schema(dsn); err != nil {
		return nil, err
	}
	started := time.Now()
	if err := loadOpenTasks(ctx, dsn, *metricsTasks); err != nil {
		return nil, fmt.Errorf("bulk load: %w", err)
	}
	load := time.Since(started).Round(100 * time.Millisecond)

	srv, err := monitorproc.Start(e.opts.monitor, []string{"--listen", "127.0.0.1:0", "--db", dsn, "--log-format", "json"},
		monitorproc.Options{Env: []string{"PATH=/usr/bin:/bin"}, Dir: e.tmp})
	if err != nil {
		return nil, err
	}
	defer srv.Stop()
	time.Sleep(time.Second)
	rest, err := procStatus(srv.Cmd.Process.Pid, "VmRSS")
	if err != nil {
		return nil, err
	}
	var times []time.Duration
	var body []byte
	for range 3 {
		t0 := time.Now()
		resp, err := http.Get(srv.URL + "/metrics")
		if err != nil {
			return nil, err
		}
		body, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != 200 {
			return nil, fmt.Errorf("/metrics: %d", resp.StatusCode)
		}
		times = append(times, time.Since(t0))
	}
	peak, err := procStatus(srv.Cmd.Process.Pid, "VmHWM")
	if err != nil {
		return nil, err
	}
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	gpuSeries := strings.Count(string(body), "\npaddle_task_gpu_info{")
	taskSeries := strings.Count(string(body), "\npaddle_task_info{")
	check := "promtool not installed"
	if _, err := exec.LookPath("promtool"); err == nil {
		cmd := exec.Command("promtool", "check", "metrics")
		cmd.Stdin = bytes.NewReader(body)
		out, err := cmd.CombinedOutput()
		switch {
		case err != nil:
			check = "**failed**: " + strings.ReplaceAll(strings.TrimSpace(firstLine(string(out))), "|", "/")
		case strings.TrimSpace(string(out)) != "":
			check = "**warnings**: " + strings.ReplaceAll(firstLine(string(out)), "|", "/")
		default:
			check = "clean"
		}
	}
	e.result("metrics.seconds", times[1].Seconds())
	return [][]string{{
		fmt.Sprintf("%d (%d)", *metricsTasks, *metricsTasks*metricsGPUs),
		load.String(),
		ms(times[1]),
		fmt.Sprintf("%.1f MiB", float64(len(body))/(1<<20)),
		fmt.Sprintf("%d task, %d GPU", taskSeries, gpuSeries),
		check,
		mib(rest),
		mib(peak),
	}}, nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// loadOpenTasks stores n open tasks of 8 GPUs each, started in the last
// day (inside --open-ttl), each on a node of its own.
func loadOpenTasks(ctx context.Context, dsn string, n int) error {
	now := time.Now().Unix()
	taskCols := []string{"task_id", "task_name", "project", "owner", "priority", "env", "hostname", "start_time",
		"gpu_count", "registration", "registered_at"}
	gpuCols := []string{"task_id", "position", "gpu_index", "uuid", "model", "memory_total", "task_start"}
	task := func(i int) []any {
		start := now - int64(i%86400)
		return []any{fmt.Sprintf("open-%06d", i), "train", fmt.Sprintf("project-%02d", i%50), fmt.Sprintf("user%03d@example.com", i%500),
			"normal", "prod", fmt.Sprintf("node-%05d", i), start, int64(metricsGPUs), "{}", start}
	}
	claims, err := hasClaimColumns(ctx, dsn)
	if err != nil {
		return err
	}
	if !claims {
		gpuCols = gpuCols[:len(gpuCols)-1]
	}
	gpu := func(i, g int, start any) []any {
		row := []any{fmt.Sprintf("open-%06d", i), int64(g), int64(g), fmt.Sprintf("GPU-%08d-%d", i, g), "NVIDIA A100-SXM4-80GB",
			int64(85899345920), start}
		if !claims {
			row = row[:len(row)-1]
		}
		return row
	}
	if store.IsPostgresDSN(dsn) {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		var tasks, gpus [][]any
		for i := range n {
			t := task(i)
			tasks = append(tasks, t)
			for g := range metricsGPUs {
				gpus = append(gpus, gpu(i, g, t[7]))
			}
		}
		if _, err := conn.CopyFrom(ctx, pgx.Identifier{"tasks"}, taskCols, pgx.CopyFromRows(tasks)); err != nil {
			return err
		}
		if _, err := conn.CopyFrom(ctx, pgx.Identifier{"task_gpus"}, gpuCols, pgx.CopyFromRows(gpus)); err != nil {
			return err
		}
		_, err = conn.Exec(ctx, "ANALYZE tasks; ANALYZE task_gpus")
		return err
	}
	db, err := sql.Open("sqlite", "file:"+dsn+"?_pragma=journal_mode(WAL)&_pragma=synchronous(OFF)&_pragma=busy_timeout(10000)")
	if err != nil {
		return err
	}
	defer db.Close()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	ins := func(table string, cols []string) (*sql.Stmt, error) {
		return tx.PrepareContext(ctx, "INSERT INTO "+table+" ("+strings.Join(cols, ", ")+") VALUES (?"+strings.Repeat(", ?", len(cols)-1)+")")
	}
	ti, err := ins("tasks", taskCols)
	if err != nil {
		return err
	}
	gi, err := ins("task_gpus", gpuCols)
	if err != nil {
		return err
	}
	for i := range n {
		t := task(i)
		if _, err := ti.ExecContext(ctx, t...); err != nil {
			return err
		}
		for g := range metricsGPUs {
			if _, err := gi.ExecContext(ctx, gpu(i, g, t[7])...); err != nil {
				return err
			}
		}
	}
	return tx.Commit()
}

// hasClaimColumns tells whether task_gpus has its task's start and end
// (migration 4), so that the benchmark also loads a store of an older
// paddle-monitor (the "before" figures).
func hasClaimColumns(ctx context.Context, dsn string) (bool, error) {
	var has bool
	if store.IsPostgresDSN(dsn) {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return false, err
		}
		defer conn.Close(ctx)
		err = conn.QueryRow(ctx, "SELECT COUNT(*) = 1 FROM information_schema.columns WHERE table_name = 'task_gpus' AND column_name = 'task_start'").Scan(&has)
		return has, err
	}
	db, err := sql.Open("sqlite", "file:"+dsn)
	if err != nil {
		return false, err
	}
	defer db.Close()
	err = db.QueryRowContext(ctx, "SELECT COUNT(*) = 1 FROM pragma_table_info('task_gpus') WHERE name = 'task_start'").Scan(&has)
	return has, err
}
