package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

var ledgerGPUs = flag.Int("ledger-gpus", 10000, "ledger: GPUs of the bulk-loaded month (one user per GPU per hour)")

var ledgerScenario = scenario{
	name:  "ledger",
	title: "Ledger and report for a month of node reports",
	header: []string{"GPUs", "hourly roll-up rows (GPU, user)", "registered tasks", "bulk load",
		"`ledger --month` (median of 3; its CPU)", "`ledger --month --by project` (median of 3; its CPU)", "`report --month --by project` (median of 3; its CPU)"},
	run: runLedger,
}

// sqlRunner runs bulk statements on a store's database (synchronous off
// on SQLite: a benchmark's fixture).
type sqlRunner struct {
	pg  *pgx.Conn
	db  *sql.DB
	ctx context.Context
}

func openRunner(dsn string) (*sqlRunner, error) {
	r := &sqlRunner{ctx: context.Background()}
	var err error
	r.pg, r.db, err = connect(r.ctx, dsn)
	return r, err
}

// exec runs q, written with %[1]s for the series of 0..n-1 as a table
// x(i), %[2]s for the key separator character and %[3]s for the
// concatenation of integers.
func (r *sqlRunner) exec(q string, n int) error {
	series := fmt.Sprintf("(WITH RECURSIVE h(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM h WHERE i < %d) SELECT i FROM h) x", n-1)
	sep := "char(31)"
	if r.pg != nil {
		series = fmt.Sprintf("(SELECT i FROM generate_series(0, %d) AS h(i)) x", n-1)
		sep = "chr(31)"
	}
	q = strings.NewReplacer("{series}", series, "{sep}", sep).Replace(q)
	if r.pg != nil {
		_, err := r.pg.Exec(r.ctx, q)
		return err
	}
	_, err := r.db.ExecContext(r.ctx, q)
	return err
}

func (r *sqlRunner) finish() error {
	if r.pg != nil {
		_, err := r.pg.Exec(r.ctx, "VACUUM ANALYZE")
		r.pg.Close(r.ctx)
		return err
	}
	_, err := r.db.ExecContext(r.ctx, "ANALYZE")
	r.db.Close()
	return err
}

// The ledger's month: June 2025 (30 days), every GPU's life covering it.
var ledgerMonth = time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)

// loadLedgerMonth stores a month of gpus GPUs (8 a node), each used every
// hour by one pod a day (a new pod each day), 3/4 of the hour occupied;
// the pods of even GPUs are registered tasks (tied by pod UID, one task a
// GPU a day, 50 projects), those of odd GPUs are not (20 namespaces).
func loadLedgerMonth(dsn string, gpus int) (hourRows, tasks int, err error) {
	r, err := openRunner(dsn)
	if err != nil {
		return 0, 0, err
	}
	const days = 30
	hours := days * 24
	h0 := ledgerMonth.Unix()
	node := fmt.Sprintf("'led-' || ((i %% %d) / 8)", gpus)
	uuid := fmt.Sprintf("'GPU-led-' || (i %% %d)", gpus)
	day := fmt.Sprintf("(i / %d / 24)", gpus)
	podUID := fmt.Sprintf("'pod-' || (i %% %d) || '-' || %s", gpus, day)
	cid := fmt.Sprintf("'c-' || (i %% %d) || '-' || %s", gpus, day)
	ns := fmt.Sprintf("'team-' || (i %% %d %% 20)", gpus)
	stmts := []struct {
		q string
		n int
	}{
		{fmt.Sprintf(`INSERT INTO node_gpu_hours (hour, node, uuid, model, observed_s, unallocated_s, energy_j)
			SELECT %d + 3600 * (i / %d), %s, %s, 'NVIDIA H200', 3600, 900, 1440000 FROM {series}`, h0, gpus, node, uuid), gpus * hours},
		{fmt.Sprintf(`INSERT INTO node_user_hours (hour, node, uuid, gpu_instance_id, user_key, model, runtime, container_id, pod_uid,
			namespace, pod, container, declared, last_time, equal_s, util_s, busy_equal_s, busy_util_s, energy_j)
			SELECT %d + 3600 * (i / %d), %s, %s, -1, %s, 'NVIDIA H200', 'containerd', %s, %s, %s, 'job', 'paddle', 0,
			%d + 3600 * (i / %d) + 3600, 2700, 2700, 2000, 2000, 1080000 FROM {series}`,
			h0, gpus, node, uuid, userKeyUndeclared(cid, podUID, ns), cid, podUID, ns, h0, gpus), gpus * hours},
		{fmt.Sprintf(`INSERT INTO node_gpus (node, uuid, first_start, last_end, model) SELECT %s, %s, %d, %d, 'NVIDIA H200' FROM {series}`,
			node, uuid, h0, h0+int64(hours)*3600), gpus},
		// The spans the reports covered, cut at days as the write path
		// cuts them: i over (day, GPU), and (day, node) for the node's own.
		{fmt.Sprintf(`INSERT INTO node_spans (node, uuid, span_start, span_end)
			SELECT %s, %s, %d + 86400 * (i / %d), %d + 86400 * (i / %d) + 86400 FROM {series}`, node, uuid, h0, gpus, h0, gpus),
			gpus * days},
		{fmt.Sprintf(`INSERT INTO node_spans (node, uuid, span_start, span_end)
			SELECT 'led-' || (i %% %d), '', %d + 86400 * (i / %d), %d + 86400 * (i / %d) + 86400 FROM {series}`,
			gpus/8, h0, gpus/8, h0, gpus/8), gpus / 8 * days},
		// i over (day, even GPU): the registered pods.
		{fmt.Sprintf(`INSERT INTO tasks (id, task_id, task_name, project, owner, hostname, k8s_node, k8s_pod_uid, start_time, end_time,
			gpu_count, registration, registered_at, seen_at, completion, completed_at, duration_seconds, exit_code)
			SELECT i + 1, 'task-' || i, 'train', 'project-' || (i %% 50), 'ann@example.com', 'job', 'led-' || ((2 * (i %% %d)) / 8),
			'pod-' || (2 * (i %% %d)) || '-' || (i / %d), %d + 86400 * (i / %d), %d + 86400 * (i / %d) + 86400, 1, '{}',
			%d + 86400 * (i / %d), %d + 86400 * (i / %d), '{}', %d + 86400 * (i / %d) + 86400, 86400, 0 FROM {series}`,
			gpus/2, gpus/2, gpus/2, h0, gpus/2, h0, gpus/2, h0, gpus/2, h0, gpus/2, h0, gpus/2), gpus / 2 * days},
	}
	// The day and month facts of those hours, as the node-report write
	// path keeps them beside the hours (June is one month).
	for _, g := range []struct{ grain, bucket, group string }{{"day", "hour - hour % 86400", "hour - hour % 86400, "},
		{"month", fmt.Sprint(h0), ""}} {
		stmts = append(stmts, struct {
			q string
			n int
		}{fmt.Sprintf(`INSERT INTO node_gpu_%[1]ss (%[1]s, node, uuid, model, observed_s, unallocated_s, energy_j)
			SELECT %[2]s, node, uuid, MAX(model), SUM(observed_s), SUM(unallocated_s), SUM(energy_j)
			FROM node_gpu_hours GROUP BY %[3]snode, uuid`, g.grain, g.bucket, g.group), 0}, struct {
			q string
			n int
		}{fmt.Sprintf(`INSERT INTO node_user_%[1]ss (%[1]s, node, uuid, gpu_instance_id, user_key, model, runtime, container_id,
			pod_uid, namespace, pod, container, declared, first_time, last_time, equal_s, util_s, busy_equal_s, busy_util_s, energy_j)
			SELECT %[2]s, node, uuid, gpu_instance_id, user_key, MAX(model), MAX(runtime), MAX(container_id), MAX(pod_uid),
			MAX(namespace), MAX(pod), MAX(container), MAX(declared), MIN(last_time), MAX(last_time), SUM(equal_s), SUM(util_s),
			SUM(busy_equal_s), SUM(busy_util_s), SUM(energy_j)
			FROM node_user_hours GROUP BY %[3]snode, uuid, gpu_instance_id, user_key`, g.grain, g.bucket, g.group), 0})
	}
	for _, s := range stmts {
		if err := r.exec(s.q, s.n); err != nil {
			return 0, 0, fmt.Errorf("%s: %w", strings.Fields(s.q)[2], err)
		}
	}
	return gpus * hours, gpus / 2 * days, r.finish()
}

// userKeyUndeclared is userKey for a container user that declared
// nothing.
func userKeyUndeclared(containerID, podUID, namespace string) string {
	return strings.Join([]string{"'containerd'", containerID, podUID, namespace, "'job'", "'paddle'", "''", "''", "''",
		"''", "''", "''", "''"}, " || {sep} || ")
}

func runLedger(e *env) ([][]string, error) {
	dsn, err := e.emptyStore()
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "monitorbench: bulk-loading a month of %d GPUs on %s\n", *ledgerGPUs, e.store)
	t0 := time.Now()
	rows, tasks, err := loadLedgerMonth(dsn, *ledgerGPUs)
	if err != nil {
		return nil, fmt.Errorf("bulk load: %w", err)
	}
	load := time.Since(t0).Round(100 * time.Millisecond)
	month := ledgerMonth.Format("2006-01")
	row := []string{fmt.Sprint(*ledgerGPUs), fmt.Sprintf("%d, %d", rows, rows), fmt.Sprint(tasks), load.String()}
	figs := map[string]float64{}
	for _, c := range []struct {
		result string
		args   []string
	}{
		{"ledger.node", []string{"ledger"}},
		{"ledger.project", []string{"ledger", "--by", "project"}},
		{"ledger.report", []string{"report", "--by", "project"}},
	} {
		wall, cpu, _, err := e.median3(append(c.args, "--db", dsn, "--month", month, "--format", "json")...)
		if err != nil {
			return nil, err
		}
		figs[c.result] = wall.Seconds()
		row = append(row, ms(wall)+"; "+ms(cpu))
	}
	for name, v := range figs {
		e.result(name, v)
	}
	return [][]string{row}, nil
}

// cpuTime is a process's CPU time so far (user + system, from
// /proc/PID/stat; 0 when unreadable).
func cpuTime(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command's closing parenthesis: utime and stime
	// are the 14th and 15th of the line, in clock ticks (100 a second).
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	var u, s int64
	fmt.Sscan(f[11], &u)
	fmt.Sscan(f[12], &s)
	return time.Duration(u+s) * 10 * time.Millisecond
}

// cpuPer is a server's CPU time per answered request of a load.
func cpuPer(cpu time.Duration, l writeLoad) string {
	n := l.rate * writeDuration.Seconds()
	if n < 1 {
		return "?"
	}
	return ms(time.Duration(float64(cpu) / n))
}

// median3 runs the monitor with args three times: the median run's wall
// time and CPU time (user + system), and the last run's output.
func (e *env) median3(args ...string) (wall, cpu time.Duration, out []byte, err error) {
	type run struct{ wall, cpu time.Duration }
	var runs []run
	for range 3 {
		cmd := exec.Command(e.opts.monitor, args...)
		cmd.Stderr = os.Stderr
		t0 := time.Now()
		if out, err = cmd.Output(); err != nil {
			return 0, 0, nil, fmt.Errorf("%s: %w", strings.Join(args, " "), err)
		}
		runs = append(runs, run{time.Since(t0), cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()})
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].wall < runs[j].wall })
	return runs[1].wall, runs[1].cpu, out, nil
}
