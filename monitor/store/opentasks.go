package store

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
)

// The reads of the open tasks (/metrics, the page, the budgets'
// forecast): the open tasks seen since a time, by tasks_open_seen_at
// (seen_at of the tasks without an end), their GPUs by task_gpus' primary
// key.
var (
	stmtOpenTasks = &stmt{sql: openTasksSQL,
		sqliteIndex: "tasks_open_seen_at", postgresIndex: "tasks_open_seen_at", example: []any{int64(1705900000), int64(1705900000), int64(1705900000)}}
	stmtOpenTasksLimit = &stmt{sql: openTasksSQL + " LIMIT ?",
		sqliteIndex: "tasks_open_seen_at", postgresIndex: "tasks_open_seen_at",
		example: []any{int64(1705900000), int64(1705900000), int64(1705900000), int64(10)}}
	stmtOpenTaskGPUs = &stmt{sql: `SELECT g.task_key, g.uuid, g.model, g.gpu_instance_id, g.mig_profile, g.share, g.latest_util_mean
		FROM task_gpus g JOIN tasks t ON t.id = g.task_key
		WHERE t.end_time IS NULL AND t.seen_at >= ? AND (t.start_time >= ? OR t.last_seen >= ?)
		AND g.uuid <> '' AND g.claim_ended IS NULL
		ORDER BY g.task_key, g.position`,
		sqliteIndex: "tasks_open_seen_at", postgresIndex: "tasks_open_seen_at", example: []any{int64(1705900000), int64(1705900000), int64(1705900000)}}
	stmtRunningTasks = &stmt{sql: `SELECT t.id, t.project, t.owner, t.gpu_count FROM tasks t
		WHERE t.end_time IS NULL AND t.seen_at >= ? AND (t.start_time >= ? OR t.last_seen >= ?)
		ORDER BY t.start_time, t.task_id, t.id`,
		sqliteIndex: "tasks_open_seen_at", postgresIndex: "tasks_open_seen_at", example: []any{int64(1705900000), int64(1705900000), int64(1705900000)}}
	stmtRunningTaskGPUs = &stmt{sql: `SELECT g.task_key, g.model, g.share, g.gpu_instance_id IS NOT NULL, g.mig_profile FROM task_gpus g JOIN tasks t ON t.id = g.task_key
		WHERE t.end_time IS NULL AND t.seen_at >= ? AND (t.start_time >= ? OR t.last_seen >= ?)
		ORDER BY g.task_key, g.position`,
		sqliteIndex: "tasks_open_seen_at", postgresIndex: "tasks_open_seen_at", example: []any{int64(1705900000), int64(1705900000), int64(1705900000)}}
)

// openTasksSQL is OpenTasks' statement, without and with a LIMIT.
const openTasksSQL = `SELECT t.id, t.task_id, t.task_name, t.project, t.owner, t.priority, t.env, t.pipeline, t.step, t.hostname,
		t.k8s_pod_uid, t.gpu_count, t.start_time, CASE WHEN t.last_seen > t.start_time THEN t.last_seen ELSE t.start_time END, t.seen_at,
		t.duration_est, t.gpus_seen, t.idle_since, t.heartbeat_interval
		FROM tasks t
		WHERE t.end_time IS NULL AND t.seen_at >= ? AND (t.start_time >= ? OR t.last_seen >= ?)
		ORDER BY t.start_time, t.task_id, t.id`

// OpenTask is a task without a completion, as /metrics and the page show
// it, with the GPUs it still claims.
type OpenTask struct {
	TaskID, TaskName, Project, Owner string
	Priority, Env, Pipeline, Step    string
	Hostname                         string
	// K8sPodUID is the pod's UID (the registration's k8s_pod_uid), "" off
	// Kubernetes: the key that joins kube-state-metrics' pod series.
	K8sPodUID string
	GPUCount  int64
	StartTime int64
	// LastSeen is the later of the start and the last heartbeat.
	LastSeen int64
	// SeenAt is when the server last received its registration or a
	// heartbeat (the server's clock).
	SeenAt int64
	// DurationEst is the registration's duration_est (seconds), if any.
	DurationEst *int64
	// Sampled is true once a heartbeat with GPU samples came; IdleSince
	// and Interval are then the task's idle_since (nil while busy) and
	// the interval_seconds of its newest sampled heartbeat (nil when it
	// had none).
	Sampled   bool
	IdleSince *int64
	Interval  *int64
	GPUs      []OpenGPU
}

// OpenGPU is a GPU (instance) an open task claims: it has a UUID and no
// newer task took it over. For a MIG instance UUID is the parent's and
// GPUInstanceID is set.
type OpenGPU struct {
	UUID, Model string
	// GPUInstanceID is the MIG GPU instance id (nil for a whole GPU), and
	// Profile its profile ("1g.18gb"; "" for a whole GPU).
	GPUInstanceID *int64
	Profile       string
	// Share is the fraction of the physical GPU the task holds.
	Share float64
	// LatestUtilMean is the newest sampled heartbeat's mean utilisation
	// (percent) of this GPU; nil without one.
	LatestUtilMean *float64
}

// OpenTasks returns the tasks without a completion seen at or after
// seenSince (Unix seconds), oldest start first, at most limit of them (0: no
// limit). Seen means both by the task's own times (started or heartbeat)
// and by the server's receipt of its registration or a heartbeat, so a task
// that claims a start in the future still leaves after the TTL.
//
// Two open tasks may both claim one GPU when the newer one's registration
// came from outside the older one's scope while the older one was live
// (Register): both claims are served until the older task is not seen for
// the claim grace, then only the newer one.
func (s *Store) OpenTasks(ctx context.Context, seenSince int64, limit int) ([]OpenTask, error) {
	st, args := stmtOpenTasks, []any{seenSince, seenSince, seenSince}
	if limit > 0 {
		st, args = stmtOpenTasksLimit, append(args, limit)
	}
	type keyed struct {
		key int64
		OpenTask
	}
	rows, err := stmtRows(ctx, s, s.r, "open tasks", st, func(rows *sql.Rows, t *keyed) error {
		var gpusSeen *int64
		err := rows.Scan(&t.key, &t.TaskID, &t.TaskName, &t.Project, &t.Owner, &t.Priority, &t.Env, &t.Pipeline,
			&t.Step, &t.Hostname, &t.K8sPodUID, &t.GPUCount, &t.StartTime, &t.LastSeen, &t.SeenAt, &t.DurationEst, &gpusSeen, &t.IdleSince,
			&t.Interval)
		t.Sampled = gpusSeen != nil
		return err
	}, args...)
	if err != nil {
		return nil, err
	}
	var tasks []OpenTask
	index := map[int64]int{}
	for _, t := range rows {
		index[t.key] = len(tasks)
		tasks = append(tasks, t.OpenTask)
	}
	if len(tasks) == 0 {
		return tasks, nil
	}
	// The claimed GPUs of the same tasks: one query, matched in Go.
	if err := taskGPUs(ctx, s, "open tasks", stmtOpenTaskGPUs, index, func(rows *sql.Rows, key *int64, g *OpenGPU) error {
		return rows.Scan(key, &g.UUID, &g.Model, &g.GPUInstanceID, &g.Profile, &g.Share, &g.LatestUtilMean)
	}, func(i int, g OpenGPU) { tasks[i].GPUs = append(tasks[i].GPUs, g) }, seenSince, seenSince, seenSince); err != nil {
		return nil, err
	}
	s.dropStaleClaims(tasks)
	return tasks, nil
}

// dropStaleClaims removes, from tasks (oldest start first), the claims on a
// GPU that a newer task also claims when the older task has not been seen
// for the claim grace.
func (s *Store) dropStaleClaims(tasks []OpenTask) {
	stale := s.now().Add(-s.claimGrace).Unix()
	newest := map[string]int{} // UUID → the newest task claiming it
	for i, t := range tasks {
		for _, g := range t.GPUs {
			newest[g.UUID] = i
		}
	}
	for i := range tasks {
		if tasks[i].SeenAt >= stale {
			continue
		}
		kept := tasks[i].GPUs[:0]
		for _, g := range tasks[i].GPUs {
			if newest[g.UUID] == i {
				kept = append(kept, g)
			}
		}
		tasks[i].GPUs = kept
	}
}

// RunningTasks returns the open tasks seen (started or heartbeat) at or
// after seenSince with their listed GPUs, as a budget forecast counts
// them (report.Running).
func (s *Store) RunningTasks(ctx context.Context, seenSince int64) ([]facts.RunningTask, error) {
	tasks, err := stmtRows(ctx, s, s.r, "running tasks", stmtRunningTasks, func(rows *sql.Rows, t *facts.RunningTask) error {
		return rows.Scan(&t.ID, &t.Project, &t.Owner, &t.GPUCount)
	}, seenSince, seenSince, seenSince)
	if err != nil {
		return nil, err
	}
	index := map[int64]int{}
	for i, t := range tasks {
		index[t.ID] = i
	}
	if len(tasks) == 0 {
		return tasks, nil
	}
	if err := taskGPUs(ctx, s, "running tasks", stmtRunningTaskGPUs, index, func(rows *sql.Rows, id *int64, g *facts.RunningGPU) error {
		return rows.Scan(id, &g.Model, &g.Share, &g.MIG, &g.Profile)
	}, func(i int, g facts.RunningGPU) { tasks[i].GPUs = append(tasks[i].GPUs, g) }, seenSince, seenSince, seenSince); err != nil {
		return nil, err
	}
	return tasks, nil
}

// taskGPUs reads the GPU rows of st, each its task's key and a G that scan
// reads, and hands each G to add with its task's position in index (the
// rows of a task not in index are passed over): the GPUs of a list of
// tasks in one query, matched in Go.
func taskGPUs[G any](ctx context.Context, s *Store, what string, st *stmt, index map[int64]int,
	scan func(rows *sql.Rows, key *int64, g *G) error, add func(i int, g G), args ...any) error {
	rows, err := s.query(ctx, s.r, st, args...)
	if err != nil {
		return fmt.Errorf("store: %s: GPUs: %w", what, err)
	}
	return eachRow(rows, what, func() error {
		var key int64
		var g G
		if err := scan(rows, &key, &g); err != nil {
			return fmt.Errorf("GPUs: %w", err)
		}
		if i, ok := index[key]; ok {
			add(i, g)
		}
		return nil
	})
}
