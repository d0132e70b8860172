package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
)

// SeparateQueriesForTest is the store as the oracle of ReportSums: the
// same sums from separate statements, the way the report asked them before
// ReportSums folded them into fewer passes. The task sums by keys, project
// and owner come from one statement over span (by model, joined to each
// model the task has GPUs of through spanModels), the GPU sums from
// gpuSums, and, by model, the task sums without model from the task
// statement again. Its groups always hold project and owner (scoped or
// not): the report adds up the groups that share a row.
func SeparateQueriesForTest(s *Store) facts.Source { return separateQueries{s} }

type separateQueries struct{ s *Store }

func (q separateQueries) ReportSums(ctx context.Context, w facts.Window, keys []string, _ bool) (facts.Sums, error) {
	var sums facts.Sums
	var err error
	if sums.Tasks, err = q.tasks(ctx, w, keys); err != nil {
		return sums, err
	}
	cols, err := groupCols(keys, true, true)
	if err != nil {
		return sums, err
	}
	if sums.GPUs, err = q.s.gpuSums(ctx, w, cols); err != nil {
		return sums, err
	}
	if slices.Contains(keys, "model") {
		base := slices.DeleteFunc(slices.Clone(keys), func(k string) bool { return k == "model" })
		sums.Base, err = q.tasks(ctx, w, base)
	}
	return sums, err
}

func (q separateQueries) ReportMetric(ctx context.Context, w facts.Window, keys []string, metric string) ([]facts.MetricSums, error) {
	return q.s.ReportMetric(ctx, w, keys, metric)
}

// tasks are the task-level sums grouped by keys, project and owner, in a
// statement of their own (not taskSumsSQL's, so that the oracle does not
// share the sums it checks).
func (q separateQueries) tasks(ctx context.Context, w facts.Window, keys []string) ([]facts.TaskSums, error) {
	cols, sel, stmt, from, err := q.s.taskGroups(keys)
	if err != nil {
		return nil, err
	}
	list := strings.Join(sel, ", ")
	stmt += `
SELECT ` + list + `,
  COUNT(*), CAST(SUM(sp.completed) AS BIGINT), CAST(SUM(sp.failed) AS BIGINT),
  CAST(SUM(sp.gate_failed) AS BIGINT), CAST(SUM(1 - sp.completed) AS BIGINT),
  CAST(SUM(CASE WHEN sp.completed = 1 AND sp.duration_est IS NOT NULL
    AND sp.end_time >= :f AND sp.end_time < :t THEN sp.duration_est ELSE 0 END) AS BIGINT),
  SUM(CASE WHEN sp.completed = 1 AND sp.duration_est IS NOT NULL
    AND sp.end_time >= :f AND sp.end_time < :t THEN COALESCE(sp.duration_seconds, 0) ELSE 0 END),
  CAST(SUM(sp.gpu_unlisted * sp.sec) AS BIGINT),
  CAST(SUM(sp.failed * sp.gpu_unlisted * sp.sec) AS BIGINT),
  CAST(SUM(CASE WHEN ` + queued + ` THEN sp.start_time - sp.submit_time ELSE 0 END) AS BIGINT),
  CAST(SUM(CASE WHEN ` + queued + ` THEN 1 ELSE 0 END) AS BIGINT),
  CAST(MAX(CASE WHEN ` + queued + ` THEN sp.start_time - sp.submit_time END) AS BIGINT)
FROM ` + from + `
GROUP BY ` + list
	rows, err := q.s.reportQuery(ctx, stmt, w, "")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []facts.TaskSums
	for rows.Next() {
		vals := make([]string, len(cols))
		var t facts.TaskSums
		dest := make([]any, 0, len(cols)+12)
		for i := range vals {
			dest = append(dest, &vals[i])
		}
		var actual sql.NullFloat64
		var longest sql.NullInt64
		dest = append(dest, &t.Tasks, &t.Completed, &t.Failed, &t.GateFailed, &t.Open, &t.EstSeconds, &actual,
			&t.UnlistedGPUSeconds, &t.FailedUnlistedGPUSeconds, &t.QueueWaitSeconds, &t.QueueWaitTasks, &longest)
		if err := rows.Scan(dest...); err != nil {
			return nil, fmt.Errorf("store: report: %w", err)
		}
		t.ActualSeconds = actual.Float64
		t.QueueWaitMax = longest.Int64
		t.Key = keyMap(cols, vals)
		out = append(out, t)
	}
	return out, rows.Err()
}
