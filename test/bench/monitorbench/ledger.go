package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/csv"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/monitorproc"
)

var (
	ledgerGPUs = flag.Int("ledger-gpus", 10000, "ledger: GPUs of the bulk-loaded month (one user per GPU per hour)")
	// ledgerOnly times some of the scenario's commands (to measure one
	// goal while working on it); the others' cells say they were not run.
	ledgerOnly = flag.String("ledger-only", "", "ledger: time only these of its figures, comma-separated (node, project, report, chargeback, focus, year, page; default all)")
)

// ledgerTimes says whether the scenario times its figure name
// (-ledger-only).
func ledgerTimes(name string) bool {
	return *ledgerOnly == "" || strings.Contains(","+*ledgerOnly+",", ","+strings.TrimPrefix(name, "ledger.")+",")
}

var ledgerScenario = scenario{
	name:  "ledger",
	title: "Ledger and report for a month of node reports",
	header: []string{"GPUs", "hourly roll-up rows (GPU, user)", "registered tasks", "the 11 months before: fact, span and task rows", "bulk load",
		"`ledger --month` (median of 3; its CPU)", "`ledger --month --by project` (median of 3; its CPU)", "`report --month --by project` (median of 3; its CPU)",
		"chargeback `report --month --by task --format csv` (median of 3; its CPU)", "`export focus --month` (median of 3; its CPU)",
		"`ledger --from --to` the year to the month's end (median of 3; its CPU)",
		"the page `GET /?month=` with Fleet and 12-month chart, serve restarted on the store (median of 3)"},
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

// ledgerYear is the first month of the year the year's ledger reads: the
// 11 months before ledgerMonth, then it.
var ledgerYear = ledgerMonth.AddDate(0, -11, 0)

// loadLedgerYear stores, before the month loadLedgerMonth stored, the 11
// months of the same fleet as --hourly-retention leaves them once their
// hours are trimmed: the day and month facts (per GPU, and per GPU and
// user), the covered spans (kept by that retention) and the registered
// tasks (kept by --retain), each GPU's life reaching back to the year's
// start. It returns the rows it stored.
func loadLedgerYear(dsn string, gpus int) (int, error) {
	r, err := openRunner(dsn)
	if err != nil {
		return 0, err
	}
	y0, h0 := ledgerYear.Unix(), ledgerMonth.Unix()
	days := int((h0 - y0) / 86400)
	node := fmt.Sprintf("'led-' || ((i %% %d) / 8)", gpus)
	uuid := fmt.Sprintf("'GPU-led-' || (i %% %d)", gpus)
	day := fmt.Sprintf("%d + 86400 * (i / %d)", y0, gpus)
	podUID := fmt.Sprintf("'ypod-' || (i %% %d) || '-' || (i / %d)", gpus, gpus)
	cid := fmt.Sprintf("'yc-' || (i %% %d) || '-' || (i / %d)", gpus, gpus)
	ns := fmt.Sprintf("'team-' || (i %% %d %% 20)", gpus)
	month := "CAST(strftime('%s', day, 'unixepoch', 'start of month') AS INTEGER)"
	if r.pg != nil {
		month = "CAST(EXTRACT(EPOCH FROM date_trunc('month', to_timestamp(day) AT TIME ZONE 'UTC')) AS BIGINT)"
	}
	g2 := gpus / 2
	stmts := []struct {
		q string
		n int
	}{
		{fmt.Sprintf(`UPDATE node_gpus SET first_start = %d`, y0), 0},
		// i over (day, GPU): a day of 24 hours of loadLedgerMonth's.
		{fmt.Sprintf(`INSERT INTO node_gpu_days (day, node, uuid, model, observed_s, unallocated_s, energy_j)
			SELECT %s, %s, %s, 'NVIDIA H200', 86400, 21600, 34560000 FROM {series}`, day, node, uuid), gpus * days},
		{fmt.Sprintf(`INSERT INTO node_user_days (day, node, uuid, gpu_instance_id, user_key, model, runtime, container_id, pod_uid,
			namespace, pod, container, declared, first_time, last_time, equal_s, util_s, busy_equal_s, busy_util_s, energy_j)
			SELECT %[1]s, %[2]s, %[3]s, -1, %[4]s, 'NVIDIA H200', 'containerd', %[5]s, %[6]s, %[7]s, 'job', 'paddle', 0,
			%[1]s + 3600, %[1]s + 86400, 64800, 64800, 48000, 48000, 25920000 FROM {series}`,
			day, node, uuid, userKeyUndeclared(cid, podUID, ns), cid, podUID, ns), gpus * days},
		{fmt.Sprintf(`INSERT INTO node_spans (node, uuid, span_start, span_end) SELECT %s, %s, %s, %s + 86400 FROM {series}`,
			node, uuid, day, day), gpus * days},
		{fmt.Sprintf(`INSERT INTO node_spans (node, uuid, span_start, span_end)
			SELECT 'led-' || (i %% %d), '', %d + 86400 * (i / %d), %d + 86400 * (i / %d) + 86400 FROM {series}`,
			gpus/8, y0, gpus/8, y0, gpus/8), gpus / 8 * days},
		// i over (day, even GPU): the registered pods, ids after the month's.
		{fmt.Sprintf(`INSERT INTO tasks (id, task_id, task_name, project, owner, hostname, k8s_node, k8s_pod_uid, start_time, end_time,
			gpu_count, registration, registered_at, seen_at, completion, completed_at, duration_seconds, exit_code)
			SELECT %[1]d + i + 1, 'ytask-' || i, 'train', 'project-' || (i %% 50), 'ann@example.com', 'job', 'led-' || ((2 * (i %% %[2]d)) / 8),
			'ypod-' || (2 * (i %% %[2]d)) || '-' || (i / %[2]d), %[3]d + 86400 * (i / %[2]d), %[3]d + 86400 * (i / %[2]d) + 86400, 1, '{}',
			%[3]d + 86400 * (i / %[2]d), %[3]d + 86400 * (i / %[2]d), '{}', %[3]d + 86400 * (i / %[2]d) + 86400, 86400, 0 FROM {series}`,
			g2*30, g2, y0), g2 * days},
		// The month facts of those days, as the write path keeps them.
		{fmt.Sprintf(`INSERT INTO node_gpu_months (month, node, uuid, model, observed_s, unallocated_s, energy_j)
			SELECT %s, node, uuid, MAX(model), SUM(observed_s), SUM(unallocated_s), SUM(energy_j)
			FROM node_gpu_days WHERE day < %d GROUP BY 1, node, uuid`, month, h0), 0},
		{fmt.Sprintf(`INSERT INTO node_user_months (month, node, uuid, gpu_instance_id, user_key, model, runtime, container_id,
			pod_uid, namespace, pod, container, declared, first_time, last_time, equal_s, util_s, busy_equal_s, busy_util_s, energy_j)
			SELECT %s, node, uuid, gpu_instance_id, user_key, MAX(model), MAX(runtime), MAX(container_id), MAX(pod_uid),
			MAX(namespace), MAX(pod), MAX(container), MAX(declared), MIN(first_time), MAX(last_time), SUM(equal_s), SUM(util_s),
			SUM(busy_equal_s), SUM(busy_util_s), SUM(energy_j)
			FROM node_user_days WHERE day < %d GROUP BY 1, node, uuid, gpu_instance_id, user_key`, month, h0), 0},
	}
	for _, s := range stmts {
		if err := r.exec(s.q, s.n); err != nil {
			return 0, fmt.Errorf("%s: %w", strings.Join(strings.Fields(s.q)[:3], " "), err)
		}
	}
	// Days (GPU, user), month GPUs and users (a user a GPU a day), spans
	// (GPU, node), tasks.
	return 2*gpus*days + gpus*11 + gpus*days + gpus*days + gpus/8*days + g2*days, r.finish()
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
	// The year is loaded whatever -ledger-only says: the month's reads
	// that scan every task (the export's declared tasks) meet its tasks.
	yearRows, err := loadLedgerYear(dsn, *ledgerGPUs)
	if err != nil {
		return nil, fmt.Errorf("bulk load of the year: %w", err)
	}
	load := time.Since(t0).Round(100 * time.Millisecond)
	prices := filepath.Join(e.tmp, "ledger-prices.json")
	if err := os.WriteFile(prices, []byte(ledgerPrices), 0o600); err != nil {
		return nil, err
	}
	month := ledgerMonth.Format("2006-01")
	gpus := float64(*ledgerGPUs)
	monthHours := gpus * 30 * 24
	yearHours := gpus * float64(ledgerMonth.AddDate(0, 1, 0).Sub(ledgerYear).Hours())
	row := []string{fmt.Sprint(*ledgerGPUs), fmt.Sprintf("%d, %d", rows, rows), fmt.Sprint(tasks), fmt.Sprint(yearRows), load.String()}
	figs := map[string]float64{}
	// Every command is a new process on the loaded store (the monitor
	// restarted after the load); each one's output is checked against the
	// load before its time is kept.
	for _, c := range []struct {
		result string
		args   []string
		check  func(out []byte) error
	}{
		{"ledger.node", []string{"ledger", "--month", month, "--format", "json"}, ledgerCheck(monthHours)},
		{"ledger.project", []string{"ledger", "--month", month, "--by", "project", "--format", "json"}, ledgerCheck(monthHours)},
		{"ledger.report", []string{"report", "--month", month, "--by", "project", "--format", "json"}, reportCheck(monthHours, tasks)},
		{"ledger.chargeback", []string{"report", "--month", month, "--by", "task", "--format", "csv", "--prices", prices},
			chargebackCheck(monthHours, tasks)},
		{"ledger.focus", []string{"export", "focus", "--month", month, "--prices", prices}, focusCheck(monthHours * ledgerPrice)},
		{"ledger.year", []string{"ledger", "--from", ledgerYear.Format("2006-01"), "--to", ledgerMonth.AddDate(0, 1, 0).Format("2006-01"),
			"--format", "json"}, ledgerCheck(yearHours)},
	} {
		if !ledgerTimes(c.result) {
			row = append(row, "not run (-ledger-only)")
			continue
		}
		wall, cpu, out, err := e.median3(append(c.args, "--db", dsn)...)
		if err != nil {
			return nil, err
		}
		if err := c.check(out); err != nil {
			return nil, fmt.Errorf("%s: %w", strings.Join(c.args, " "), err)
		}
		figs[c.result] = wall.Seconds()
		row = append(row, ms(wall)+"; "+ms(cpu))
	}
	if ledgerTimes("ledger.page") {
		page, err := e.timePage(dsn, prices, month, monthHours)
		if err != nil {
			return nil, fmt.Errorf("the page: %w", err)
		}
		figs["ledger.page"] = page.Seconds()
		row = append(row, ms(page))
	} else {
		row = append(row, "not run (-ledger-only)")
	}
	for name, v := range figs {
		e.result(name, v)
	}
	return [][]string{row}, nil
}

// ledgerPrice is the price of the ledger's GPU-hour (every GPU an H200):
// the FOCUS export bills in it and the chargeback and page show cost.
const (
	ledgerPrice  = 3.0
	ledgerPrices = `{"currency": "USD", "default": 3.0, "models": {"NVIDIA H200*": 3.0}}`
)

// ledgerCheck checks a ledger's total against the load: capacity is every
// GPU's hours of the window, a quarter of it unallocated, the registered
// half's occupied 3/4 attributed, the other half's unattributed (no
// namespace is mapped to a project), nothing unobserved.
func ledgerCheck(capacity float64) func([]byte) error {
	return func(out []byte) error {
		var l struct {
			Rows  []json.RawMessage  `json:"rows"`
			Total map[string]float64 `json:"total"`
		}
		if err := json.Unmarshal(out, &l); err != nil {
			return fmt.Errorf("not the ledger's JSON: %w: %.200s", err, out)
		}
		t := l.Total
		if len(l.Rows) == 0 || !near(t["capacity_gpu_hours"], capacity) || !near(t["unallocated_gpu_hours"], capacity/4) ||
			!near(t["attributed_gpu_hours"], capacity*3/8) || !near(t["unattributed_gpu_hours"], capacity*3/8) ||
			t["undeclared_gpu_hours"] != 0 || t["unobserved_gpu_hours"] != 0 {
			return fmt.Errorf("the ledger's total is not the load's (capacity %g GPU-hours: 1/4 unallocated, 3/8 attributed, 3/8 unattributed): %d rows, total %v",
				capacity, len(l.Rows), t)
		}
		return nil
	}
}

// reportCheck checks the month's report billed from observations: the
// registered tasks, billed their observed hours (the registered half of
// the fleet, 3/4 of each hour).
func reportCheck(capacity float64, tasks int) func([]byte) error {
	return func(out []byte) error {
		var r struct {
			Rows  []json.RawMessage `json:"rows"`
			Total struct {
				Tasks    int     `json:"tasks"`
				GPUHours float64 `json:"gpu_hours"`
				Basis    string  `json:"billing_basis"`
			} `json:"total"`
		}
		if err := json.Unmarshal(out, &r); err != nil {
			return fmt.Errorf("not the report's JSON: %w: %.200s", err, out)
		}
		if len(r.Rows) != 50 || r.Total.Tasks != tasks || !near(r.Total.GPUHours, capacity*3/8) || r.Total.Basis != "observed" {
			return fmt.Errorf("the report bills %g GPU-hours (%s) for %d tasks in %d rows: the load's are %g for %d in 50",
				r.Total.GPUHours, r.Total.Basis, r.Total.Tasks, len(r.Rows), capacity*3/8, tasks)
		}
		return nil
	}
}

// chargebackCheck checks the chargeback statement: a line per registered
// task (after the header), their GPU-hours the report's and their cost
// those hours at the price.
func chargebackCheck(capacity float64, tasks int) func([]byte) error {
	return func(out []byte) error {
		recs, err := csv.NewReader(bytes.NewReader(out)).ReadAll()
		if err != nil {
			return fmt.Errorf("not CSV: %w", err)
		}
		if len(recs) != tasks+1 {
			return fmt.Errorf("the chargeback has %d lines for %d registered tasks", len(recs)-1, tasks)
		}
		hours, err := sumColumn(recs, "gpu_hours")
		if err != nil {
			return err
		}
		cost, err := sumColumn(recs, "cost")
		if err != nil {
			return err
		}
		if !near(hours, capacity*3/8) || math.Abs(cost-hours*ledgerPrice) > 0.01*float64(tasks) {
			return fmt.Errorf("the chargeback bills %g GPU-hours for %.2f, the load's are %g at %g", hours, cost, capacity*3/8, ledgerPrice)
		}
		return nil
	}
}

// sumColumn is the sum of a CSV's column named name (its first line).
func sumColumn(recs [][]string, name string) (float64, error) {
	col := -1
	if len(recs) > 0 {
		col = slices.Index(recs[0], name)
	}
	if len(recs) < 2 || col < 0 {
		return 0, fmt.Errorf("no %s column or no rows (%d lines)", name, len(recs))
	}
	sum := 0.0
	for _, r := range recs[1:] {
		v, err := strconv.ParseFloat(r[col], 64)
		if err != nil {
			return 0, fmt.Errorf("%s %q: %w", name, r[col], err)
		}
		sum += v
	}
	return sum, nil
}

// focusCheck checks the FOCUS export: its BilledCost adds up to the
// capacity's (every GPU-hour is billed to a project or to the platform),
// within a cent a row.
func focusCheck(cost float64) func([]byte) error {
	return func(out []byte) error {
		recs, err := csv.NewReader(bytes.NewReader(out)).ReadAll()
		if err != nil {
			return fmt.Errorf("not CSV: %w", err)
		}
		sum, err := sumColumn(recs, "BilledCost")
		if err != nil {
			return err
		}
		if math.Abs(sum-cost) > 0.01*float64(len(recs)) {
			return fmt.Errorf("the FOCUS rows bill %.2f, the capacity costs %.2f (%d rows)", sum, cost, len(recs)-1)
		}
		return nil
	}
}

// near says whether a figure is want within rounding (a millionth).
func near(v, want float64) bool { return math.Abs(v-want) <= 1e-6*math.Max(1, want) }

// timePage starts serve on the loaded store, with an admin token and the
// prices, and times GET / for the month (its Fleet section and 12-month
// chart): the median of 3, each page checked.
func (e *env) timePage(dsn, prices, month string, capacity float64) (time.Duration, error) {
	tokens := filepath.Join(e.tmp, fmt.Sprintf("ledger-tokens-%s.json", strings.ToLower(e.store)))
	os.Remove(tokens)
	out, err := exec.Command(e.opts.monitor, "token", "bench-admin", "--admin", "--add-to", tokens).Output()
	if err != nil {
		return 0, fmt.Errorf("token: %w", err)
	}
	secret := firstLine(strings.TrimSpace(string(out)))
	srv, err := monitorproc.Start(e.opts.monitor, []string{"--listen", "127.0.0.1:0", "--db", dsn, "--log-format", "json",
		"--tokens", tokens, "--prices", prices}, monitorproc.Options{Env: []string{"PATH=/usr/bin:/bin"}, Dir: e.tmp})
	if err != nil {
		return 0, err
	}
	defer srv.Stop()
	client := &http.Client{Timeout: 5 * time.Minute}
	var times []time.Duration
	for range 3 {
		req, err := http.NewRequest(http.MethodGet, srv.URL+"/?month="+month, nil)
		if err != nil {
			return 0, err
		}
		req.Header.Set("Authorization", "Bearer "+secret)
		t0 := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return 0, err
		}
		times = append(times, time.Since(t0))
		if err := pageCheck(resp.StatusCode, string(body), capacity); err != nil {
			return 0, err
		}
	}
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	return times[1], nil
}

// pageCheck checks the admin's page: its Fleet section with the month's
// capacity (one model: the fleet's), and the 12-month chart.
func pageCheck(status int, body string, capacity float64) error {
	if status != http.StatusOK {
		return fmt.Errorf("GET /: %d: %.200s", status, body)
	}
	// The Fleet table's capacity cell, as the page writes it (one decimal).
	cell := fmt.Sprintf("<td>%s GPU-h</td>", strconv.FormatFloat(capacity, 'f', 1, 64))
	for _, want := range []string{"<h2>Fleet</h2>", "the last 12 months", "NVIDIA H200", cell} {
		if !strings.Contains(body, want) {
			return fmt.Errorf("GET /: no %q in the page (%d bytes)", want, len(body))
		}
	}
	return nil
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
