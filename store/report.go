package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/paddle-entrypoint/paddle-entrypoint/report"
)

// The report's SQL. Both stores run the same statements (only the
// placeholders differ), so they answer the same sums. Times are Unix
// seconds; w binds the window once (CAST makes the type explicit for
// PostgreSQL, and is a no-op for SQLite).
//
// span selects the tasks whose counted interval overlaps the window and
// computes the seconds counted inside it:
//   - the counted end is end_time for a completed task, else the last
//     heartbeat (last_seen), else the start (a task with no end and no
//     heartbeat counts zero hours, and counts as a task when it started
//     inside the window);
//   - only [max(start, from), min(end, to)) counts.
//
// The WHERE clause is written so that an index on start_time bounds the
// scan from above, and one on end_time serves completed tasks.
const spanSQL = `w AS (SELECT CAST(? AS BIGINT) AS f, CAST(? AS BIGINT) AS t),
span AS (
  SELECT x.*,
    CASE WHEN x.e1 > x.s0 THEN x.e1 - x.s0 ELSE 0 END AS sec
  FROM (
    SELECT tk.task_id, tk.task_name, tk.project, tk.owner, tk.priority, tk.env,
      tk.pipeline, tk.step, tk.hostname, tk.gpu_count, tk.duration_est,
      tk.duration_seconds, tk.end_time,
      CASE WHEN tk.end_time IS NOT NULL THEN 1 ELSE 0 END AS completed,
      CASE WHEN tk.end_time IS NOT NULL AND (tk.exit_code <> 0 OR tk.gate_passed = 0) THEN 1 ELSE 0 END AS failed,
      CASE WHEN tk.start_time > w.f THEN tk.start_time ELSE w.f END AS s0,
      CASE WHEN COALESCE(tk.end_time, tk.last_seen, tk.start_time) < w.t
           THEN COALESCE(tk.end_time, tk.last_seen, tk.start_time) ELSE w.t END AS e1,
      w.f AS wf, w.t AS wt
    FROM tasks tk CROSS JOIN w
    WHERE tk.start_time < w.t
      AND (tk.start_time >= w.f OR tk.end_time > w.f
           OR (tk.end_time IS NULL AND tk.last_seen > w.f))
  ) x
)`

// unitsSQL splits every spanned task into GPU units: one per GPU it listed
// (with the completion's per-GPU summary), plus one unit for the GPUs it
// counted without listing them (device nodes: the empty model).
const unitsSQL = `, listed AS (
  SELECT g.task_id, COUNT(*) AS n FROM task_gpus g JOIN span sp ON sp.task_id = g.task_id GROUP BY g.task_id
),
units AS (
  SELECT sp.task_id, sp.task_name, sp.project, sp.owner, sp.priority, sp.env, sp.pipeline,
    sp.step, sp.hostname, sp.sec, sp.failed, g.model AS model, 1 AS n,
    CASE WHEN g.samples > 0 THEN g.util_mean END AS um,
    CASE WHEN g.samples > 0 THEN g.idle_share END AS idle
  FROM span sp JOIN task_gpus g ON g.task_id = sp.task_id
  UNION ALL
  SELECT sp.task_id, sp.task_name, sp.project, sp.owner, sp.priority, sp.env, sp.pipeline,
    sp.step, sp.hostname, sp.sec, sp.failed, '' AS model, sp.gpu_count - COALESCE(l.n, 0) AS n,
    NULL AS um, NULL AS idle
  FROM span sp LEFT JOIN listed l ON l.task_id = sp.task_id
  WHERE sp.gpu_count > COALESCE(l.n, 0)
)`

// groupColumns returns the GROUP BY columns of a report: its keys, then
// project and owner (the reader's scope is applied on those), then model
// when gpu is set, each once.
func groupColumns(keys []string, gpu bool) ([]string, error) {
	cols := []string{}
	add := func(k string) {
		for _, c := range cols {
			if c == k {
				return
			}
		}
		cols = append(cols, k)
	}
	for _, k := range keys {
		ok := false
		for _, allowed := range report.Keys {
			ok = ok || allowed == k
		}
		if !ok {
			return nil, fmt.Errorf("store: report key %q is not a column", k)
		}
		add(k)
	}
	add("project")
	add("owner")
	if gpu {
		add("model")
	}
	return cols, nil
}

// ReportTasks implements report.Source: task-level sums grouped by keys,
// project and owner. With the key model, a task counts once under every
// model it has GPUs of (the empty model for GPUs without one, and for no
// GPU at all).
func (s *Store) ReportTasks(ctx context.Context, w report.Window, keys []string) ([]report.TaskSums, error) {
	cols, err := groupColumns(keys, false)
	if err != nil {
		return nil, err
	}
	from := "span sp"
	sel := make([]string, len(cols))
	for i, c := range cols {
		sel[i] = "sp." + c
	}
	q := "WITH " + spanSQL
	for i, c := range cols {
		if c == "model" {
			q += unitsSQL + `, models AS (SELECT DISTINCT task_id, model FROM units
  UNION SELECT sp.task_id, '' FROM span sp WHERE sp.gpu_count = 0
    AND NOT EXISTS (SELECT 1 FROM task_gpus g WHERE g.task_id = sp.task_id))`
			from = "span sp JOIN models m ON m.task_id = sp.task_id"
			sel[i] = "m.model"
		}
	}
	list := strings.Join(sel, ", ")
	q += `
SELECT ` + list + `,
  COUNT(*), CAST(SUM(sp.completed) AS BIGINT), CAST(SUM(sp.failed) AS BIGINT),
  CAST(SUM(1 - sp.completed) AS BIGINT),
  CAST(SUM(CASE WHEN sp.completed = 1 AND sp.duration_est IS NOT NULL
    AND sp.end_time >= sp.wf AND sp.end_time < sp.wt THEN sp.duration_est ELSE 0 END) AS BIGINT),
  SUM(CASE WHEN sp.completed = 1 AND sp.duration_est IS NOT NULL
    AND sp.end_time >= sp.wf AND sp.end_time < sp.wt THEN COALESCE(sp.duration_seconds, 0) ELSE 0 END)
FROM ` + from + `
GROUP BY ` + list
	rows, err := s.reportQuery(ctx, q, w)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []report.TaskSums
	for rows.Next() {
		vals := make([]string, len(cols))
		var t report.TaskSums
		dest := make([]any, 0, len(cols)+6)
		for i := range vals {
			dest = append(dest, &vals[i])
		}
		var actual sql.NullFloat64
		dest = append(dest, &t.Tasks, &t.Completed, &t.Failed, &t.Open, &t.EstSeconds, &actual)
		if err := rows.Scan(dest...); err != nil {
			return nil, fmt.Errorf("store: report: %w", err)
		}
		t.ActualSeconds = actual.Float64
		t.Key = keyMap(cols, vals)
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: report: %w", err)
	}
	return out, nil
}

// ReportGPUs implements report.Source: GPU-level sums grouped by keys,
// project, owner and model.
func (s *Store) ReportGPUs(ctx context.Context, w report.Window, keys []string) ([]report.GPUSums, error) {
	cols, err := groupColumns(keys, true)
	if err != nil {
		return nil, err
	}
	list := "u." + strings.Join(cols, ", u.")
	q := "WITH " + spanSQL + unitsSQL + `
SELECT ` + list + `,
  CAST(SUM(u.n * u.sec) AS BIGINT),
  CAST(SUM(CASE WHEN u.failed = 1 THEN u.n * u.sec ELSE 0 END) AS BIGINT),
  SUM(CASE WHEN u.idle IS NOT NULL THEN u.sec * u.idle ELSE 0 END),
  SUM(CASE WHEN u.idle IS NOT NULL AND u.failed = 0 THEN u.sec * u.idle ELSE 0 END),
  SUM(CASE WHEN u.um IS NOT NULL THEN u.sec * u.um ELSE 0 END),
  CAST(SUM(CASE WHEN u.um IS NOT NULL THEN u.sec ELSE 0 END) AS BIGINT)
FROM units u
GROUP BY ` + list
	rows, err := s.reportQuery(ctx, q, w)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []report.GPUSums
	for rows.Next() {
		vals := make([]string, len(cols))
		var g report.GPUSums
		dest := make([]any, 0, len(cols)+6)
		for i := range vals {
			dest = append(dest, &vals[i])
		}
		var idle, idleOK, util sql.NullFloat64
		dest = append(dest, &g.GPUSeconds, &g.FailedGPUSeconds, &idle, &idleOK, &util, &g.UtilSeconds)
		if err := rows.Scan(dest...); err != nil {
			return nil, fmt.Errorf("store: report: %w", err)
		}
		g.IdleGPUSeconds, g.IdleOKGPUSeconds, g.UtilWeighted = idle.Float64, idleOK.Float64, util.Float64
		g.Key = keyMap(cols, vals)
		out = append(out, g)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: report: %w", err)
	}
	return out, nil
}

func keyMap(cols, vals []string) map[string]string {
	m := make(map[string]string, len(cols))
	for i, c := range cols {
		m[c] = vals[i]
	}
	return m
}

// reportQuery runs one of the report's statements with the window bound.
func (s *Store) reportQuery(ctx context.Context, q string, w report.Window) (*sql.Rows, error) {
	rows, err := s.r.QueryContext(ctx, s.bind(q), w.From.Unix(), w.To.Unix())
	if err != nil {
		return nil, fmt.Errorf("store: report: %w", err)
	}
	return rows, nil
}
