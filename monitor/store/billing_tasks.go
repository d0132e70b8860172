package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
)

// The tasks billing from observations reads, in two statements a window
// (the tasks whose counted interval overlaps it, and their GPUs) rather
// than two a task: a month of 10,000 GPUs with a pod a GPU a day has
// 150,000 registered tasks, and a lookup each was most of the report's
// time. A task tied to use in the window that the window's tasks do not
// hold (its counted interval ends at the window's start, or it started at
// its end) is read by its primary key as before (billingTaskByID).

// billingTask is a task's row as billedTask reads it.
type billingTask struct {
	keys                                 [9]string // task_id, task_name, project, owner, priority, env, pipeline, step, hostname
	k8sNode                              string
	gpuCount, unlisted, start, e, failed int64 // e: the counted end
	end                                  sql.NullInt64
	gpus                                 []billingTaskGPU // in position order
}

// billingTaskGPU is one of a task's GPUs (task_gpus) as billedTask reads
// it.
type billingTaskGPU struct {
	position               int64
	model, profile, uuid   string
	mig, samples, instance int64
	share                  float64
	idle, util, energy     sql.NullFloat64
}

// scan is dest followed by the destinations of billingTaskGPUColumns.
func (g *billingTaskGPU) scan(dest ...any) []any {
	return append(dest, &g.model, &g.mig, &g.profile, &g.share, &g.samples, &g.idle, &g.util, &g.energy, &g.uuid, &g.instance)
}

// billingTaskGPUColumns are the columns of a task_gpus row g that
// billingTaskGPU.scan reads.
const billingTaskGPUColumns = `g.model, CASE WHEN g.gpu_instance_id IS NULL THEN 0 ELSE 1 END, g.mig_profile, g.share, COALESCE(g.samples, 0),
	g.idle_share, g.util_mean, g.energy_joules, g.uuid, COALESCE(g.gpu_instance_id, -1)`

// covered says the task's counted interval overlaps [from, to) (the
// report span's sec > 0).
func (t *billingTask) covered(from, to int64) bool { return min(t.e, to) > max(t.start, from) }

// windowTasks are the tasks of window w's span, by id, with their GPUs.
func (s *Store) windowTasks(ctx context.Context, w facts.Window) (map[int64]*billingTask, error) {
	out := map[int64]*billingTask{}
	rows, err := s.reportQuery(ctx, stmtCoveredTasks, coveredTasksSQL, w, "")
	if err != nil {
		return nil, err
	}
	err = eachRow(rows.Rows, "billing", func() error {
		var id int64
		t := &billingTask{}
		k := &t.keys
		if err := rows.Scan(&id, &k[0], &k[1], &k[2], &k[3], &k[4], &k[5], &k[6], &k[7], &k[8],
			&t.gpuCount, &t.unlisted, &t.start, &t.end, &t.e, &t.failed, &t.k8sNode); err != nil {
			return err
		}
		out[id] = t
		return nil
	})
	rows.Close() // its transaction, on PostgreSQL
	if err != nil {
		return nil, err
	}
	gpus, err := s.reportQuery(ctx, stmtBillingWindowGPUs, billingWindowGPUsSQL, w, "")
	if err != nil {
		return nil, err
	}
	defer gpus.Close()
	err = eachRow(gpus.Rows, "billing", func() error {
		var id int64
		var g billingTaskGPU
		if err := gpus.Scan(g.scan(&id, &g.position)...); err != nil {
			return err
		}
		if t := out[id]; t != nil {
			t.gpus = append(t.gpus, g)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, t := range out {
		slices.SortFunc(t.gpus, func(a, b billingTaskGPU) int { return int(a.position - b.position) })
	}
	return out, nil
}

// billingTaskByID is task id's row and GPUs by its primary key.
func (s *Store) billingTaskByID(ctx context.Context, id int64) (*billingTask, error) {
	t := &billingTask{}
	k := &t.keys
	err := s.queryRow(ctx, s.r, stmtBillingTask, id).Scan(&k[0], &k[1], &k[2], &k[3], &k[4], &k[5], &k[6], &k[7], &k[8],
		&t.gpuCount, &t.unlisted, &t.start, &t.end, &t.e, &t.failed, &t.k8sNode)
	if err != nil {
		return nil, fmt.Errorf("store: billing: task %d: %w", id, err)
	}
	t.gpus, err = stmtRows(ctx, s, s.r, "billing", stmtBillingTaskGPUs, func(rows *sql.Rows, g *billingTaskGPU) error {
		return rows.Scan(g.scan()...)
	}, id)
	if err != nil {
		return nil, fmt.Errorf("store: billing: task %d: %w", id, err)
	}
	return t, nil
}

// coveredTasksSQL is windowTasks' statement: the report's span with the
// tasks' k8s_node, every column billedTask reads (stmtBillingTask's).
var coveredTasksSQL = "WITH " + strings.ReplaceAll(spanSQL, spanColumns, spanColumns+", tk.k8s_node AS k8s_node") + `
SELECT sp.id, sp.task_id, sp.task_name, sp.project, sp.owner, sp.priority, sp.env, sp.pipeline, sp.step, sp.hostname,
	sp.gpu_count, sp.gpu_unlisted, sp.start_time, sp.end_time, sp.ce, sp.failed, sp.k8s_node FROM span sp`

// billingWindowGPUsSQL is the GPUs of the span's tasks, by task_gpus'
// primary key (task_key, position).
var billingWindowGPUsSQL = "WITH " + spanSQL + `
SELECT g.task_key, g.position, ` + billingTaskGPUColumns + ` FROM span sp JOIN task_gpus g ON g.task_key = sp.id`
