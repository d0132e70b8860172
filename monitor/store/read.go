package store

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/access"
)

// Filter selects tasks for Tasks. Zero values select everything.
type Filter struct {
	Project, Owner, Pipeline string
	// State is "", "running", "completed", "failed" or "idle" (open
	// tasks idle, last_seen − idle_since, for at least IdleFor).
	State   string
	IdleFor int64
	// From and To select by start_time: [From, To) in Unix seconds.
	From, To *int64
	// Limit is the page size (1 to MaxLimit; 0 means DefaultLimit).
	Limit int
	// Cursor continues a listing where the previous page ended ("" from
	// the start).
	Cursor string
}

// Page sizes of Tasks.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
)

// ErrBadCursor is returned for a cursor Tasks did not make.
var ErrBadCursor = errors.New("store: malformed cursor")

// failed is the SQL condition of a failed task (completed with a non-zero
// exit status or a failed gate); the report's SQL uses it too.
const failed = "(t.end_time IS NOT NULL AND (t.exit_code <> 0 OR COALESCE(t.gate_passed, 1) = 0))"

const taskColumns = `t.id, t.task_id, t.task_name, t.project, t.owner, t.priority, t.env, t.pipeline, t.pipeline_run, t.step,
	t.orchestrator, t.k8s_namespace, t.k8s_pod, t.k8s_node, t.k8s_pod_uid, t.k8s_job_index, t.slurm_job, t.hostname, t.start_time,
	t.gpu_count, t.duration_est, t.labels, t.registered_at, t.last_seen, t.end_time, t.duration_seconds, t.exit_code,
	t.signal, t.gate_passed, t.gate_expr, t.gate_reason, t.metrics, t.completed_at, t.idle_since, t.submit_time`

// The reads of tasks (the API's task and task list).
var (
	stmtTaskByID = &stmt{sql: "SELECT " + taskColumns + " FROM tasks t WHERE t.task_id = ? ORDER BY t.start_time DESC, t.id DESC",
		sqliteIndex: "tasks_identity", postgresIndex: "tasks_identity", example: []any{"t"}}
	// tasks is a template: its WHERE is the filter's conditions (the
	// instance checked: a window of start times, the common filter).
	stmtTasks = &stmt{build: func(Dialect) string { return tasksSQL([]string{"t.start_time >= ?", "t.start_time < ?"}) },
		sqliteIndex: "tasks_start_time", postgresIndex: "tasks_start_time", example: []any{int64(1705800000), int64(1705900000), int64(51)}}
	// The distinct (project, owner) pairs are few: kept in their own table
	// by Register, read whole.
	stmtProjectOwners = &stmt{sql: "SELECT project, owner FROM project_owners",
		fullScan: "the distinct (project, owner) pairs, few: the list is the answer"}
	// The listed tasks' GPUs: a key list, task_gpus' primary key.
	stmtTasksGPUs = perEngine(func(d Dialect) string {
		return `SELECT task_key, gpu_index, uuid, model, memory_total, samples, util_mean, util_p95,
		memory_used_peak_bytes, idle_share, claim_ended, share, mig_uuid, gpu_instance_id, compute_instance_id, mig_profile,
		mig_slices, mig_total_slices, energy_joules, energy_estimated, latest_samples, latest_util_mean
		FROM task_gpus WHERE task_key IN (SELECT CAST(k.value AS BIGINT) FROM ` + d.keyList("k") + `) ORDER BY task_key, position`
	}, &stmt{sqliteIndex: "sqlite_autoindex_task_gpus_1", postgresIndex: "task_gpus_pkey", example: []any{"[1, 2]"}})
)

// tasksSQL is Tasks' statement with the conditions where.
func tasksSQL(where []string) string {
	q := "SELECT " + taskColumns + " FROM tasks t"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	return q + " ORDER BY t.start_time DESC, t.task_id DESC, t.project DESC, t.owner DESC LIMIT ?"
}

// Task returns the newest task (by start_time) under taskID within scope,
// or nil (and no error) when there is none the scope may see; project, when
// not empty, picks the one of that project. The others the scope sees under
// the same task_id are listed in its SameTaskID.
func (s *Store) Task(ctx context.Context, taskID, project string, scope *access.Scope) (*Task, error) {
	all, err := stmtRows(ctx, s, s.r, "task "+taskID, stmtTaskByID, scanTask, taskID)
	if err != nil {
		return nil, err
	}
	seen := slices.DeleteFunc(all, func(t Task) bool { return !scope.Allows(t.Project, t.Owner) })
	pick := -1
	for i, t := range seen {
		if project == "" || t.Project == project {
			pick = i
			break
		}
	}
	if pick < 0 {
		return nil, nil
	}
	task := seen[pick]
	for i, t := range seen {
		if i != pick {
			task.SameTaskID = append(task.SameTaskID, SameTask{Project: t.Project, Owner: t.Owner, StartTime: t.StartTime})
		}
	}
	one := []Task{task}
	if err := s.loadGPUs(ctx, one); err != nil {
		return nil, err
	}
	return &one[0], nil
}

// Tasks lists tasks within scope matching f, newest start_time first (then
// task_id, descending), one page at a time; next is the cursor of the next
// page, "" after the last.
func (s *Store) Tasks(ctx context.Context, f Filter, scope *access.Scope) (tasks []Task, next string, err error) {
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultLimit
	}
	limit = min(limit, MaxLimit)
	var where []string
	var args []any
	add := func(cond string, a ...any) { where = append(where, cond); args = append(args, a...) }
	if f.Project != "" {
		add("t.project = ?", f.Project)
	}
	if f.Owner != "" {
		add("t.owner = ?", f.Owner)
	}
	if f.Pipeline != "" {
		add("t.pipeline = ?", f.Pipeline)
	}
	switch f.State {
	case "":
	case "running":
		add("t.end_time IS NULL")
	case "completed":
		add("t.end_time IS NOT NULL AND NOT " + failed)
	case "failed":
		add(failed)
	case "idle":
		add("t.end_time IS NULL AND t.idle_since IS NOT NULL AND t.last_seen - t.idle_since >= ?", f.IdleFor)
	default:
		return nil, "", fmt.Errorf("store: unknown state %q", f.State)
	}
	if f.From != nil {
		add("t.start_time >= ?", *f.From)
	}
	if f.To != nil {
		add("t.start_time < ?", *f.To)
	}
	if f.Cursor != "" {
		c, err := decodeCursor(f.Cursor)
		if err != nil {
			return nil, "", err
		}
		add(`(t.start_time < ? OR (t.start_time = ? AND (t.task_id < ? OR (t.task_id = ? AND
			(t.project < ? OR (t.project = ? AND t.owner < ?))))))`,
			c.Start, c.Start, c.TaskID, c.TaskID, c.Project, c.Project, c.Owner)
	}
	if scope != nil {
		pairs, err := s.scopePairs(ctx, scope)
		if err != nil {
			return nil, "", err
		}
		if len(pairs) == 0 {
			return []Task{}, "", nil
		}
		add("(t.project, t.owner) IN (SELECT j.k0, j.k1 FROM "+s.dialect.pairList("j")+")", keyListArg(pairs))
	}
	args = append(args, limit+1)
	tasks, err = builtRows(ctx, s, s.r, "tasks", stmtTasks, tasksSQL(where), scanTask, args...)
	if err != nil {
		return nil, "", err
	}
	if tasks == nil {
		tasks = []Task{} // an empty page lists no tasks: [], not null
	}
	if len(tasks) > limit {
		tasks = tasks[:limit]
		last := tasks[limit-1]
		next = encodeCursor(cursor{last.StartTime, last.TaskID, last.Project, last.Owner})
	}
	if err := s.loadGPUs(ctx, tasks); err != nil {
		return nil, "", err
	}
	return tasks, next, nil
}

// scopePairs resolves a scope into the (project, owner) pairs it covers
// among the stored ones: the distinct pairs are few (projects × owners, not
// tasks), kept in their own table by Register, and globs are matched here,
// in Go, by the same rule as writes, instead of being translated into SQL.
func (s *Store) scopePairs(ctx context.Context, scope *access.Scope) ([][2]string, error) {
	rows, err := s.query(ctx, s.r, stmtProjectOwners)
	if err != nil {
		return nil, fmt.Errorf("store: scope: %w", err)
	}
	defer rows.Close()
	var out [][2]string
	if err := eachRow(rows, "scope", func() error {
		var p [2]string
		if err := rows.Scan(&p[0], &p[1]); err != nil {
			return err
		}
		if scope.Allows(p[0], p[1]) {
			out = append(out, p)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	return out, nil
}

// cursor is where a page ended: the last row's start_time and identity
// (task_id, project, owner: several tasks may share a task_id). It holds
// nothing but what that row shows its reader: not the row's key, whose
// sequence would tell how many tasks others registered meanwhile.
type cursor struct {
	Start                  int64
	TaskID, Project, Owner string
}

func encodeCursor(c cursor) string {
	b, _ := json.Marshal([]any{c.Start, c.TaskID, c.Project, c.Owner})
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(s string) (cursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return cursor{}, ErrBadCursor
	}
	var v []json.RawMessage
	var c cursor
	if json.Unmarshal(b, &v) != nil || len(v) != 4 || json.Unmarshal(v[0], &c.Start) != nil ||
		json.Unmarshal(v[1], &c.TaskID) != nil || json.Unmarshal(v[2], &c.Project) != nil ||
		json.Unmarshal(v[3], &c.Owner) != nil || c.TaskID == "" {
		return cursor{}, ErrBadCursor
	}
	return c, nil
}

// scanTask scans a row of tasksSQL's columns into t (its GPUs are
// loadGPUs').
func scanTask(rows *sql.Rows, t *Task) error {
	var labels string
	var endTime, exitCode, gatePassed, completedAt sql.NullInt64
	var duration sql.NullFloat64
	var signal, gateExpr, gateReason string
	var metrics sql.NullString
	if err := rows.Scan(&t.key, &t.TaskID, &t.TaskName, &t.Project, &t.Owner, &t.Priority, &t.Env, &t.Pipeline, &t.PipelineRun,
		&t.Step, &t.Orchestrator, &t.K8sNamespace, &t.K8sPod, &t.K8sNode, &t.K8sPodUID, &t.K8sJobIndex, &t.SlurmJob, &t.Hostname,
		&t.StartTime, &t.GPUCount, &t.DurationEst, &labels, &t.RegisteredAt, &t.LastSeen, &endTime, &duration, &exitCode,
		&signal, &gatePassed, &gateExpr, &gateReason, &metrics, &completedAt, &t.IdleSince, &t.SubmitTime); err != nil {
		return err
	}
	if err := json.Unmarshal([]byte(labels), &t.Labels); err != nil {
		return fmt.Errorf("task %s: labels: %w", t.TaskID, err)
	}
	t.State = "running"
	if endTime.Valid {
		c := &TaskCompletion{EndTime: endTime.Int64, DurationSeconds: duration.Float64, ExitCode: exitCode.Int64,
			Signal: signal, CompletedAt: completedAt.Int64}
		if gatePassed.Valid {
			passed := gatePassed.Int64 == 1
			c.Gate = &wire.Gate{Expr: gateExpr, Passed: &passed, Reason: gateReason}
		}
		if metrics.Valid {
			if err := json.Unmarshal([]byte(metrics.String), &c.Metrics); err != nil {
				return fmt.Errorf("task %s: metrics: %w", t.TaskID, err)
			}
		}
		t.Completion = c
		t.IdleSince = nil // a completed task is not idle
		t.State = "completed"
		if c.ExitCode != 0 || (c.Gate != nil && !*c.Gate.Passed) {
			t.State = "failed"
		}
	}
	t.GPUs = []TaskGPU{}
	return nil
}

// loadGPUs fills the GPUs of tasks with one query, and their efficiency.
func (s *Store) loadGPUs(ctx context.Context, tasks []Task) error {
	if len(tasks) == 0 {
		return nil
	}
	byKey := make(map[int64]*Task, len(tasks))
	keys := make([]int64, 0, len(tasks))
	for i := range tasks {
		byKey[tasks[i].key] = &tasks[i]
		keys = append(keys, tasks[i].key)
	}
	rows, err := s.query(ctx, s.r, stmtTasksGPUs, keyListArg(keys))
	if err != nil {
		return fmt.Errorf("store: gpus: %w", err)
	}
	defer rows.Close()
	if err := eachRow(rows, "gpus", func() error {
		var key int64
		var g TaskGPU
		var m MIG
		var gi, estimated sql.NullInt64
		if err := rows.Scan(&key, &g.Index, &g.UUID, &g.Name, &g.MemoryTotalBytes, &g.Samples, &g.UtilMean, &g.UtilP95,
			&g.MemoryUsedPeakBytes, &g.IdleShare, &g.ClaimEnded, &g.Share, &m.UUID, &gi, &m.ComputeInstanceID, &m.Profile,
			&m.Slices, &m.TotalSlices, &g.EnergyJoules, &estimated, &g.LatestSamples, &g.LatestUtilMean); err != nil {
			return err
		}
		if gi.Valid {
			m.GPUInstanceID = gi.Int64
			g.MIG = &m
		}
		if estimated.Valid {
			e := estimated.Int64 == 1
			g.EnergyEstimated = &e
		}
		if t := byKey[key]; t != nil {
			t.GPUs = append(t.GPUs, g)
		}
		return nil
	}); err != nil {
		return err
	}
	for i := range tasks {
		t := &tasks[i]
		t.Efficiency.UtilMean, t.Efficiency.IdleShare = meanOfSampled(t.GPUs)
		if t.Completion != nil {
			// The GPUs at their share (a MIG instance, a time-sliced GPU),
			// those counted but not listed whole: the report's GPU-hours.
			w := float64(max(t.GPUCount-int64(len(t.GPUs)), 0))
			for _, g := range t.GPUs {
				w += g.Share
			}
			gs := w * t.Completion.DurationSeconds
			t.Efficiency.GPUSeconds = &gs
		}
	}
	return nil
}

// meanOfSampled averages util_mean and idle_share over the GPUs that have
// them; nil when none has.
func meanOfSampled(gpus []TaskGPU) (util, idle *float64) {
	var su, si float64
	var nu, ni int
	for _, g := range gpus {
		if g.UtilMean != nil {
			su += *g.UtilMean
			nu++
		}
		if g.IdleShare != nil {
			si += *g.IdleShare
			ni++
		}
	}
	if nu > 0 {
		m := su / float64(nu)
		util = &m
	}
	if ni > 0 {
		m := si / float64(ni)
		idle = &m
	}
	return util, idle
}
