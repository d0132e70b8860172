package store

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
)

// The report's SQL. Both stores run the same statements (only the
// placeholders and fence differ; PostgreSQL runs them with
// Dialect.readSettings), so they answer the same sums. Times are Unix
// seconds; ?1 and ?2 are the window's ends.
//
// span selects the tasks whose counted interval overlaps the window and
// computes the seconds counted inside it:
//   - the counted end (ce) is max(end_time, last_seen) for a completed task
//     (a task the monitor heard from after the end it claims counts until
//     then), else the last heartbeat (last_seen), else the start (a task
//     with no end and no heartbeat counts zero seconds, and is in the
//     window when it started inside it);
//   - only [max(start, f), min(ce, t)) counts.
//
// A task without a completion that is idle now (idle_since, from its
// sampled heartbeats; a task observed by node reports has its idleness
// from them, in the billing's observed figures) has idle_sec: the part of [idle_since, its counted
// end) inside the window, the hours "Idle now" shows; its GPUs' idle
// GPU-hours count them at each GPU's share until its completion's
// idle_share takes over.
//
// The four branches are disjoint and each has its index: tasks started
// inside the window, completed tasks that started before and ended after
// its start, open tasks that started before and were seen after it
// (migration 0003), and completed tasks that started before it, ended
// before its start and were seen after it (tasks_done_seen, migration
// 0011: only tasks heard from after their end are in that index).
var spanSQL = func() string {
	parts := make([]string, len(spanBranches))
	for i, b := range spanBranches {
		parts[i] = "    SELECT " + spanColumns + " FROM tasks tk WHERE " + b.where
	}
	return `span AS (
  SELECT x.*, CASE WHEN x.e1 > x.s0 THEN x.e1 - x.s0 ELSE 0 END AS sec,
    CASE WHEN x.i0 IS NOT NULL AND x.e1 > x.i0 THEN x.e1 - x.i0 ELSE 0 END AS idle_sec FROM (
` + strings.Join(parts, "\n    UNION ALL\n") + `
  ) x
)`
}()

// spanBranches are span's disjoint sets of tasks, each with the index
// that serves it (the same on both stores; TestWritePlans checks them).
var spanBranches = []struct{ where, index string }{
	{"tk.start_time >= ?1 AND tk.start_time < ?2", "tasks_start_time"},
	// tasks_end_time (end_time): with statistics both planners take the
	// range end_time > f over tasks_end_start (end_time, start_time).
	{"tk.end_time > ?1 AND tk.start_time < ?1", "tasks_end_time"},
	{"tk.end_time IS NULL AND tk.last_seen > ?1 AND tk.start_time < ?1", "tasks_open_seen"},
	{"tk.end_time IS NOT NULL AND tk.last_seen > tk.end_time AND tk.last_seen > ?1 AND tk.end_time <= ?1 AND tk.start_time < ?1", "tasks_done_seen"},
}

// countedEnd is a task's counted end: max(end_time, last_seen) when it has
// an end, else last_seen, else its start.
const countedEnd = `CASE WHEN tk.end_time IS NULL THEN COALESCE(tk.last_seen, tk.start_time)
           WHEN tk.last_seen > tk.end_time THEN tk.last_seen ELSE tk.end_time END`

// spanOf is span with, for each label key of cols ("label:NAME",
// facts.LabelName), a column lbl_<i> (i its position in cols) holding
// the task's label NAME, "" when it has none; and the expressions that
// select cols from it (sp.<col>, sp.lbl_<i>). NAME follows the labels'
// name rule (facts.ParseKeys checked it: letters, digits, '.', '_', '-'),
// so it is written into the statement as a literal; the labels column is
// JSON the monitor wrote.
func (s *Store) spanOf(cols []string) (span string, sel []string) {
	extra := ""
	sel = make([]string, len(cols))
	for i, c := range cols {
		if c == labelsCol {
			extra += ",\n      tk.labels AS lbl_all"
			sel[i] = "sp.lbl_all"
			continue
		}
		name, ok := facts.LabelName(c)
		if !ok {
			sel[i] = "sp." + c
			continue
		}
		alias := fmt.Sprintf("lbl_%d", i)
		extra += ",\n      COALESCE(" + s.dialect.jsonText("tk.labels", name) + ", '') AS " + alias
		sel[i] = "sp." + alias
	}
	if extra == "" {
		return spanSQL, sel
	}
	return strings.ReplaceAll(spanSQL, spanColumns, spanColumns+extra), sel
}

const spanColumns = `tk.id, tk.task_id, tk.task_name, tk.project, tk.owner, tk.priority, tk.env,
      tk.pipeline, tk.step, tk.hostname, tk.gpu_count, tk.gpu_unlisted, tk.duration_est, tk.duration_seconds, tk.end_time,
      tk.start_time, tk.submit_time,
      ` + nodeKey + ` AS node,
      CASE WHEN tk.end_time IS NOT NULL THEN 1 ELSE 0 END AS completed,
      CASE WHEN tk.end_time IS NOT NULL AND (tk.exit_code <> 0 OR tk.gate_passed = 0) THEN 1 ELSE 0 END AS failed,
      CASE WHEN tk.end_time IS NOT NULL AND tk.gate_passed = 0 THEN 1 ELSE 0 END AS gate_failed,
      CASE WHEN tk.start_time > ?1 THEN tk.start_time ELSE ?1 END AS s0,
      CASE WHEN tk.end_time IS NULL AND tk.idle_since IS NOT NULL AND tk.observed_at IS NULL
           THEN CASE WHEN tk.idle_since > ?1 THEN tk.idle_since ELSE ?1 END END AS i0,
      ` + countedEnd + ` AS ce,
      CASE WHEN (` + countedEnd + `) < ?2 THEN ` + countedEnd + ` ELSE ?2 END AS e1`

// nodeKey is the report key node of a task tk: its k8s_node (lower-cased,
// as the monitor keeps node names and ties pods: Kubernetes node names are
// DNS names), else its host name (nodeKeyOf, the same in Go).
const nodeKey = `CASE WHEN tk.k8s_node <> '' THEN LOWER(tk.k8s_node) ELSE tk.hostname END`

// spanModels is span with a row per model each task has GPUs of (and the
// column model): the listed GPUs' models, each once (the first GPU of a
// task with that model stands for it), and the empty model for GPUs
// counted without being listed (device nodes) or for a task without GPUs.
// One pass over span and the tasks' GPUs by index: no DISTINCT, no join
// back to span (both sorted every row of a month's GPUs).
const spanModels = `(
  SELECT sp.*, ` + modelKey + ` AS model FROM span sp JOIN task_gpus g ON g.task_key = sp.id
  WHERE NOT EXISTS (SELECT 1 FROM task_gpus g2 WHERE g2.task_key = g.task_key AND g2.position < g.position AND ` + sameModelKey + `)
  UNION ALL
  SELECT sp.*, '' AS model FROM span sp
  WHERE (sp.gpu_unlisted > 0 OR (sp.gpu_count = 0 AND NOT EXISTS (SELECT 1 FROM task_gpus g WHERE g.task_key = sp.id)))
    AND NOT EXISTS (SELECT 1 FROM task_gpus g WHERE g.task_key = sp.id AND g.model = '')
) sp`

// modelKey is the key model of a GPU row g: its model, and for a MIG
// instance with a profile the model and the profile ("NVIDIA H100 80GB
// HBM3 1g.10gb"), so a report by model keeps instances apart from whole
// GPUs and from each other; sameModelKey says g2 has g's key.
const (
	modelKey     = `CASE WHEN g.gpu_instance_id IS NOT NULL AND g.mig_profile <> '' THEN g.model || ' ' || g.mig_profile ELSE g.model END`
	sameModelKey = `g2.model = g.model AND (CASE WHEN g2.gpu_instance_id IS NOT NULL THEN g2.mig_profile ELSE '' END) = (CASE WHEN g.gpu_instance_id IS NOT NULL THEN g.mig_profile ELSE '' END)`
)

// taskGroupsSQL returns what groups spanned tasks by keys, project and owner:
// the columns, the expressions that select them, the WITH clause and the
// FROM. By model, a task joins the models it has GPUs of.
func (s *Store) taskGroupsSQL(keys []string) (cols, sel []string, with, from string, err error) {
	if cols, err = groupCols(keys, true, false); err != nil {
		return nil, nil, "", "", err
	}
	span, sel := s.spanOf(cols)
	with, from = "WITH "+span, "span sp"
	if slices.Contains(cols, "model") {
		from = spanModels
	}
	return cols, sel, with, from, nil
}

// queued is the SQL condition of a spanned task whose queue wait counts:
// it has a submit_time and started inside the window (a task that started
// before the window waited in an earlier one).
const queued = "sp.submit_time IS NOT NULL AND sp.start_time >= ?1 AND sp.start_time < ?2"

// ReportMetric implements facts.Source: the sum and count of a completion
// metric over the completed tasks whose end is inside the window and that
// reported it as a number, grouped by keys, project and owner (by model,
// a task counts under every model it has GPUs of).
func (s *Store) ReportMetric(ctx context.Context, w facts.Window, keys []string, metric string) ([]facts.MetricSums, error) {
	if _, err := facts.ParseMetrics([]string{metric}); err != nil {
		return nil, err
	}
	cols, q, err := s.reportMetricSQL(keys)
	if err != nil {
		return nil, err
	}
	var out []facts.MetricSums
	err = s.scanReport(ctx, stmtReportMetric, q, w, metric, len(cols), func(vals []string) ([]any, func()) {
		var sum sql.NullFloat64
		var m facts.MetricSums
		return []any{&sum, &m.Tasks}, func() {
			if m.Tasks > 0 {
				m.Sum, m.Key = sum.Float64, keyMap(cols, vals)
				out = append(out, m)
			}
		}
	})
	return out, err
}

// reportMetricSQL is ReportMetric's statement by keys, and its group
// columns.
func (s *Store) reportMetricSQL(keys []string) (cols []string, q string, err error) {
	cols, sel, q, from, err := s.taskGroupsSQL(keys)
	if err != nil {
		return nil, "", err
	}
	inner := make([]string, len(cols))
	outer := make([]string, len(cols))
	for i, c := range cols {
		inner[i] = sel[i] + " AS " + c
		outer[i] = "v." + c
	}
	list := strings.Join(outer, ", ")
	q += `
SELECT ` + list + `, SUM(v.x), COUNT(v.x) FROM (
  SELECT ` + strings.Join(inner, ", ") + `, ` + s.dialect.jsonNumber("tm.metrics", "?3") + ` AS x
  FROM ` + from + ` JOIN tasks tm ON tm.id = sp.id
  WHERE sp.completed = 1 AND sp.end_time >= ?1 AND sp.end_time < ?2
) v
GROUP BY ` + list
	return cols, q, nil
}

// groupCols returns the GROUP BY columns of ReportSums: its keys, then
// project and owner when scoped (the reader's scope is applied on those),
// then model when gpu is set, each once.
func groupCols(keys []string, scoped, gpu bool) ([]string, error) {
	var cols []string
	for _, k := range keys {
		if _, label := facts.LabelName(k); !label && !slices.Contains(facts.Keys, k) {
			return nil, fmt.Errorf("store: report key %q is not a column", k)
		}
		if !slices.Contains(cols, k) {
			cols = append(cols, k)
		}
	}
	for _, k := range []string{"project", "owner", "model"} {
		if ((k == "model" && gpu) || (k != "model" && scoped)) && !slices.Contains(cols, k) {
			cols = append(cols, k)
		}
	}
	return cols, nil
}

// taskSumsSQL are the task-level sums (facts.TaskSums) over the rows of
// sp, as a SELECT list. first is the column that says which rows stand
// for their task ("" when every row is one task): rows by GPU count their
// task once per model, on the task's first GPU of that model.
func taskSumsSQL(first string) string {
	n, and := "1", ""
	count := "COUNT(*)"
	if first != "" {
		n, and = first, first+" = 1 AND "
		count = "SUM(" + first + ")"
	}
	return `CAST(` + count + ` AS BIGINT), CAST(SUM(` + n + ` * sp.completed) AS BIGINT), CAST(SUM(` + n + ` * sp.failed) AS BIGINT),
  CAST(SUM(` + n + ` * sp.gate_failed) AS BIGINT), CAST(SUM(` + n + ` * (1 - sp.completed)) AS BIGINT),
  CAST(SUM(CASE WHEN ` + and + `sp.completed = 1 AND sp.duration_est IS NOT NULL
    AND sp.end_time >= ?1 AND sp.end_time < ?2 THEN sp.duration_est ELSE 0 END) AS BIGINT),
  SUM(CASE WHEN ` + and + `sp.completed = 1 AND sp.duration_est IS NOT NULL
    AND sp.end_time >= ?1 AND sp.end_time < ?2 THEN COALESCE(sp.duration_seconds, 0) ELSE 0 END),
  CAST(SUM(` + n + ` * sp.gpu_unlisted * sp.sec) AS BIGINT),
  CAST(SUM(` + n + ` * sp.failed * sp.gpu_unlisted * sp.sec) AS BIGINT),
  CAST(SUM(CASE WHEN ` + and + queued + ` THEN sp.start_time - sp.submit_time ELSE 0 END) AS BIGINT),
  CAST(SUM(CASE WHEN ` + and + queued + ` THEN 1 ELSE 0 END) AS BIGINT),
  CAST(MAX(CASE WHEN ` + and + queued + ` THEN sp.start_time - sp.submit_time END) AS BIGINT)`
}

// gpuSumsSQL are the GPU sums (facts.GPUSums) over the GPU rows of sp (the span's
// columns and the GPU's, g the prefix of the GPU's), as a SELECT list.
func gpuSumsSQL(g string) string {
	return `CAST(SUM(sp.sec) AS BIGINT),
  SUM(` + g + `share * sp.sec),
  SUM(sp.failed * ` + g + `share * sp.sec),
  SUM(CASE WHEN ` + g + `samples > 0 AND ` + g + `idle_share IS NOT NULL THEN ` + g + `share * sp.sec * ` + g + `idle_share ELSE 0 END
    + ` + g + `share * sp.idle_sec),
  SUM(CASE WHEN ` + g + `samples > 0 AND ` + g + `idle_share IS NOT NULL AND sp.failed = 0 THEN ` + g + `share * sp.sec * ` + g + `idle_share ELSE 0 END
    + ` + g + `share * sp.idle_sec),
  SUM(CASE WHEN ` + g + `samples > 0 AND ` + g + `util_mean IS NOT NULL THEN ` + g + `share * sp.sec * ` + g + `util_mean ELSE 0 END),
  SUM(CASE WHEN ` + g + `samples > 0 AND ` + g + `util_mean IS NOT NULL THEN ` + g + `share * sp.sec ELSE 0 END),
  SUM(CASE WHEN sp.completed = 1 AND ` + g + `energy_joules IS NOT NULL THEN
    CASE WHEN sp.ce > sp.start_time THEN ` + g + `energy_joules * sp.sec / (sp.ce - sp.start_time) ELSE ` + g + `energy_joules END
    ELSE 0 END),
  CAST(SUM(CASE WHEN sp.completed = 1 AND ` + g + `energy_joules IS NOT NULL THEN 1 ELSE 0 END) AS BIGINT)`
}

// taskScan returns the scan destinations of taskSumsSQL's columns into t;
// done completes t once the row is scanned.
func taskScan(t *facts.TaskSums) (dest []any, done func()) {
	var actual sql.NullFloat64
	var longest sql.NullInt64
	return []any{&t.Tasks, &t.Completed, &t.Failed, &t.GateFailed, &t.Open, &t.EstSeconds, &actual,
			&t.UnlistedGPUSeconds, &t.FailedUnlistedGPUSeconds, &t.QueueWaitSeconds, &t.QueueWaitTasks, &longest},
		func() { t.ActualSeconds, t.QueueWaitMax = actual.Float64, longest.Int64 }
}

// gpuScan is taskScan for gpuSumsSQL's columns (MIG and Profile first).
func gpuScan(g *facts.GPUSums) (dest []any, done func()) {
	var mig int64
	var gpuSec, failedSec, idle, idleOK, util, utilSec, energy sql.NullFloat64
	return []any{&mig, &g.Profile, &g.InstanceSeconds, &gpuSec, &failedSec, &idle, &idleOK, &util, &utilSec,
			&energy, &g.EnergyGPUs},
		func() {
			g.MIG = mig == 1
			g.GPUSeconds, g.FailedGPUSeconds = gpuSec.Float64, failedSec.Float64
			g.IdleGPUSeconds, g.IdleOKGPUSeconds, g.UtilWeighted, g.UtilSeconds = idle.Float64, idleOK.Float64, util.Float64, utilSec.Float64
			g.EnergyJoules = energy.Float64
		}
}

// unlistedOnly is the SQL condition of a spanned task that stands in the
// row of the empty model without a listed GPU of that model: it counts
// GPUs without listing them (device nodes), or no GPU at all, and lists
// none with the empty model (one that does is in that row by its GPU).
// Both lookups are on task_gpus' primary key (task_key, position), and
// only for the tasks the first test lets through.
const unlistedOnly = `(sp.gpu_unlisted > 0 OR (sp.gpu_count = 0 AND NOT EXISTS (SELECT 1 FROM task_gpus g WHERE g.task_key = sp.id)))
    AND NOT EXISTS (SELECT 1 FROM task_gpus g WHERE g.task_key = sp.id AND g.model = '')`

// ReportSums implements facts.Source, grouped by the keys alone when
// scoped is false. Without the key model it is two passes over the
// window's tasks: the task sums (taskSums) and the GPU sums (gpuSums).
// With model it is two passes too, where separate statements for the
// task sums by model, the GPU sums and the task sums without model were
// three (and the first of them two joins; the store's tests keep those
// statements as the oracle these passes must equal):
//   - the task sums without model (Base), apart for the tasks that stand
//     in the row of the empty model without a GPU of it (unlistedOnly),
//     whose sums are also the task sums of that row;
//   - one join of the tasks with their GPUs (span's indexes, then
//     task_gpus' primary key (task_key, position)) that sums the GPUs and,
//     on each task's first GPU of a model (no earlier position with that
//     model: a lookup on the same primary key), the task once per model.
func (s *Store) ReportSums(ctx context.Context, w facts.Window, keys []string, scoped bool) (facts.Sums, error) {
	var sums facts.Sums
	cols, err := groupCols(keys, scoped, false)
	if err != nil {
		return sums, err
	}
	if !slices.Contains(keys, "model") {
		if sums.Tasks, err = s.taskSums(ctx, w, cols); err != nil {
			return sums, err
		}
		gcols, err := groupCols(keys, scoped, true)
		if err != nil {
			return sums, err
		}
		sums.GPUs, err = s.gpuSums(ctx, w, gcols)
		return sums, err
	}
	base := slices.DeleteFunc(slices.Clone(cols), func(c string) bool { return c == "model" })
	if sums.Base, sums.Tasks, err = s.baseSums(ctx, w, base); err != nil {
		return sums, err
	}
	tasks, gpus, err := s.modelSums(ctx, w, cols)
	if err != nil {
		return sums, err
	}
	sums.Tasks = append(sums.Tasks, tasks...)
	sums.GPUs = gpus
	return sums, nil
}

// taskSums are the task sums without model, grouped by cols: one pass over
// span (its three indexes, spanSQL).
func (s *Store) taskSums(ctx context.Context, w facts.Window, cols []string) ([]facts.TaskSums, error) {
	return keyedSums(ctx, s, stmtReportTasks, s.reportTasksSQL(cols), w, cols, taskScan, taskKey)
}

func taskKey(t *facts.TaskSums) *map[string]string { return &t.Key }

// keyedSums scans the rows of q, an instance of st grouped by cols, into
// one T each: scan gives the destinations of the sums' columns into a T
// (and what completes it), key where its group's key goes.
func keyedSums[T any](ctx context.Context, s *Store, st *stmt, q string, w facts.Window, cols []string,
	scan func(*T) ([]any, func()), key func(*T) *map[string]string) ([]T, error) {
	var out []T
	err := s.scanReport(ctx, st, q, w, "", len(cols), func(vals []string) ([]any, func()) {
		out = append(out, *new(T))
		v := &out[len(out)-1]
		dest, done := scan(v)
		return dest, func() { done(); *key(v) = keyMap(cols, vals) }
	})
	return out, err
}

// reportTasksSQL is taskSums' statement by cols.
func (s *Store) reportTasksSQL(cols []string) string {
	span, sel := s.spanOf(cols)
	q := "WITH " + span + `
SELECT ` + strings.Join(append(sel, taskSumsSQL("")), ", ") + `
FROM span sp`
	if len(sel) > 0 {
		q += `
GROUP BY ` + strings.Join(sel, ", ")
	}
	return q
}

// gpuSums are the GPU sums grouped by cols (model among them), apart for
// MIG instances by profile, hours weighted by each GPU's share; energy is
// the completed tasks' own, each task's clipped to the window in
// proportion to the part of its counted interval inside it (all of it for
// a task that lasted no time). Span's indexes, then task_gpus' primary
// key (task_key, position).
func (s *Store) gpuSums(ctx context.Context, w facts.Window, cols []string) ([]facts.GPUSums, error) {
	return keyedSums(ctx, s, stmtReportGPUs, s.reportGPUsSQL(cols), w, cols, gpuScan,
		func(g *facts.GPUSums) *map[string]string { return &g.Key })
}

// reportGPUsSQL is gpuSums' statement by cols.
func (s *Store) reportGPUsSQL(cols []string) string {
	span, sel := s.spanOf(cols)
	for i, c := range cols {
		if c == "model" {
			sel[i] = modelKey
		}
	}
	list := strings.Join(append(sel, "CASE WHEN g.gpu_instance_id IS NULL THEN 0 ELSE 1 END", "g.mig_profile"), ", ")
	return "WITH " + span + `
SELECT ` + list + `, ` + gpuSumsSQL("g.") + `
FROM span sp JOIN task_gpus g ON g.task_key = sp.id
GROUP BY ` + list
}

// baseSums are the task sums grouped by cols (no model) and apart for the
// tasks of unlistedOnly: all of them are the sums without model, and
// those of unlistedOnly, keyed with the empty model, the task sums of
// that row. One pass over span (its three indexes); unlistedOnly's
// lookups on task_gpus' primary key.
func (s *Store) baseSums(ctx context.Context, w facts.Window, cols []string) (base, empty []facts.TaskSums, err error) {
	var only []int64
	base, err = keyedSums(ctx, s, stmtReportBase, s.reportBaseSQL(cols), w, cols, func(t *facts.TaskSums) ([]any, func()) {
		only = append(only, 0)
		dest, done := taskScan(t)
		return append([]any{&only[len(only)-1]}, dest...), done
	}, taskKey)
	if err != nil {
		return nil, nil, err
	}
	for i, t := range base {
		if only[i] == 1 {
			e := t
			e.Key = maps.Clone(t.Key)
			e.Key["model"] = ""
			empty = append(empty, e)
		}
	}
	return base, empty, nil
}

// reportBaseSQL is baseSums' statement by cols.
func (s *Store) reportBaseSQL(cols []string) string {
	span, sel := s.spanOf(cols)
	list := strings.Join(append(sel, "sp.unlisted_only"), ", ")
	return "WITH " + span + `
SELECT ` + list + `, ` + taskSumsSQL("") + `
FROM (SELECT sp.*, CASE WHEN ` + unlistedOnly + ` THEN 1 ELSE 0 END AS unlisted_only FROM span sp ` + s.dialect.fence() + `) sp
GROUP BY ` + list
}

// modelSums are the GPU sums and the task sums by model of the tasks'
// listed GPUs, grouped by cols (model among them), MIG and profile, in one
// join (span's indexes, then task_gpus' primary key (task_key, position));
// a task counts once per model, on its first GPU of that model (the
// NOT EXISTS of an earlier position with the model, on the same key).
func (s *Store) modelSums(ctx context.Context, w facts.Window, cols []string) ([]facts.TaskSums, []facts.GPUSums, error) {
	var tasks []facts.TaskSums
	var gpus []facts.GPUSums
	err := s.scanReport(ctx, stmtReportModels, s.reportModelsSQL(cols), w, "", len(cols), func(vals []string) ([]any, func()) {
		tasks, gpus = append(tasks, facts.TaskSums{}), append(gpus, facts.GPUSums{})
		t, g := &tasks[len(tasks)-1], &gpus[len(gpus)-1]
		gdest, gdone := gpuScan(g)
		tdest, tdone := taskScan(t)
		return append(gdest, tdest...), func() {
			gdone()
			tdone()
			g.Key = keyMap(cols, vals)
			t.Key = g.Key
		}
	})
	if err != nil {
		return nil, nil, err
	}
	return tasks, gpus, nil
}

// reportModelsSQL is modelSums' statement by cols.
func (s *Store) reportModelsSQL(cols []string) string {
	span, sel := s.spanOf(cols)
	list := strings.Join(append(sel, "CASE WHEN sp.gpu_instance_id IS NULL THEN 0 ELSE 1 END", "sp.mig_profile"), ", ")
	return "WITH " + span + `
SELECT ` + list + `, ` + gpuSumsSQL("sp.") + `,
  ` + taskSumsSQL("sp.first") + `
FROM (
  SELECT sp.*, ` + modelKey + ` AS model, g.gpu_instance_id, g.mig_profile, g.share, g.samples, g.idle_share, g.util_mean, g.energy_joules,
    CASE WHEN EXISTS (SELECT 1 FROM task_gpus g2 WHERE g2.task_key = g.task_key AND g2.position < g.position AND ` + sameModelKey + `)
      THEN 0 ELSE 1 END AS first
  FROM span sp JOIN task_gpus g ON g.task_key = sp.id ` + s.dialect.fence() + `
) sp
GROUP BY ` + list
}
