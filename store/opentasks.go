package store

import (
	"context"
	"fmt"

	"github.com/paddle-entrypoint/paddle-entrypoint/report"
)

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

// OpenGPU is a GPU an open task claims: it has a UUID and no newer task
// took it over.
type OpenGPU struct {
	UUID, Model string
	// LatestUtilMean is the newest sampled heartbeat's mean utilisation
	// (percent) of this GPU; nil without one.
	LatestUtilMean *float64
}

// OpenTasks returns the tasks without a completion seen (started or
// heartbeat) at or after seenSince (Unix seconds), oldest start first, at
// most limit of them (0: no limit).
func (s *Store) OpenTasks(ctx context.Context, seenSince int64, limit int) ([]OpenTask, error) {
	q := `SELECT t.task_id, t.task_name, t.project, t.owner, t.priority, t.env, t.pipeline, t.step, t.hostname,
		t.k8s_pod_uid, t.gpu_count, t.start_time, CASE WHEN t.last_seen > t.start_time THEN t.last_seen ELSE t.start_time END,
		t.duration_est, t.gpus_seen, t.idle_since, t.heartbeat_interval
		FROM tasks t
		WHERE t.end_time IS NULL AND (t.start_time >= ? OR t.last_seen >= ?)
		ORDER BY t.start_time, t.task_id`
	args := []any{seenSince, seenSince}
	if limit > 0 {
		q += " LIMIT ?"
		args = append(args, limit)
	}
	rows, err := s.r.QueryContext(ctx, s.bind(q), args...)
	if err != nil {
		return nil, fmt.Errorf("store: open tasks: %w", err)
	}
	var tasks []OpenTask
	index := map[string]int{}
	for rows.Next() {
		var t OpenTask
		var gpusSeen *int64
		if err := rows.Scan(&t.TaskID, &t.TaskName, &t.Project, &t.Owner, &t.Priority, &t.Env, &t.Pipeline,
			&t.Step, &t.Hostname, &t.K8sPodUID, &t.GPUCount, &t.StartTime, &t.LastSeen, &t.DurationEst, &gpusSeen, &t.IdleSince,
			&t.Interval); err != nil {
			rows.Close()
			return nil, fmt.Errorf("store: open tasks: %w", err)
		}
		t.Sampled = gpusSeen != nil
		index[t.TaskID] = len(tasks)
		tasks = append(tasks, t)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: open tasks: %w", err)
	}
	if len(tasks) == 0 {
		return tasks, nil
	}
	// The claimed GPUs of the same tasks: one query, matched in Go.
	gq := `SELECT g.task_id, g.uuid, g.model, g.latest_util_mean FROM task_gpus g JOIN tasks t ON t.task_id = g.task_id
		WHERE t.end_time IS NULL AND (t.start_time >= ? OR t.last_seen >= ?)
		AND g.uuid <> '' AND g.claim_ended IS NULL
		ORDER BY g.task_id, g.position`
	grows, err := s.r.QueryContext(ctx, s.bind(gq), seenSince, seenSince)
	if err != nil {
		return nil, fmt.Errorf("store: open tasks: GPUs: %w", err)
	}
	defer grows.Close()
	for grows.Next() {
		var id string
		var g OpenGPU
		if err := grows.Scan(&id, &g.UUID, &g.Model, &g.LatestUtilMean); err != nil {
			return nil, fmt.Errorf("store: open tasks: GPUs: %w", err)
		}
		if i, ok := index[id]; ok {
			tasks[i].GPUs = append(tasks[i].GPUs, g)
		}
	}
	if err := grows.Err(); err != nil {
		return nil, fmt.Errorf("store: open tasks: GPUs: %w", err)
	}
	return tasks, nil
}

// RunningTasks returns the open tasks seen (started or heartbeat) at or
// after seenSince with their listed GPUs, as a budget forecast counts
// them (report.Running).
func (s *Store) RunningTasks(ctx context.Context, seenSince int64) ([]report.RunningTask, error) {
	rows, err := s.r.QueryContext(ctx, s.bind(`SELECT t.task_id, t.project, t.owner, t.gpu_count FROM tasks t
		WHERE t.end_time IS NULL AND (t.start_time >= ? OR t.last_seen >= ?)
		ORDER BY t.start_time, t.task_id`), seenSince, seenSince)
	if err != nil {
		return nil, fmt.Errorf("store: running tasks: %w", err)
	}
	var tasks []report.RunningTask
	index := map[string]int{}
	for rows.Next() {
		var id string
		var t report.RunningTask
		if err := rows.Scan(&id, &t.Project, &t.Owner, &t.GPUCount); err != nil {
			rows.Close()
			return nil, fmt.Errorf("store: running tasks: %w", err)
		}
		index[id] = len(tasks)
		tasks = append(tasks, t)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: running tasks: %w", err)
	}
	if len(tasks) == 0 {
		return tasks, nil
	}
	grows, err := s.r.QueryContext(ctx, s.bind(`SELECT g.task_id, g.model, `+shareColumn+` FROM task_gpus g JOIN tasks t ON t.task_id = g.task_id
		WHERE t.end_time IS NULL AND (t.start_time >= ? OR t.last_seen >= ?)
		ORDER BY g.task_id, g.position`), seenSince, seenSince)
	if err != nil {
		return nil, fmt.Errorf("store: running tasks: GPUs: %w", err)
	}
	defer grows.Close()
	for grows.Next() {
		var id string
		var g report.RunningGPU
		if err := grows.Scan(&id, &g.Model, &g.Share); err != nil {
			return nil, fmt.Errorf("store: running tasks: GPUs: %w", err)
		}
		if i, ok := index[id]; ok {
			tasks[i].GPUs = append(tasks[i].GPUs, g)
		}
	}
	if err := grows.Err(); err != nil {
		return nil, fmt.Errorf("store: running tasks: GPUs: %w", err)
	}
	return tasks, nil
}

// shareColumn is the share of a task_gpus row (the fraction of the GPU
// the task holds) once the schema has one; until then every GPU is whole.
const shareColumn = "CAST(1 AS DOUBLE PRECISION)"
