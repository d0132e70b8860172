package store

import (
	"context"
	"database/sql"
	"fmt"
)

// DeclaredTask is a registered task as the discrepancies compare it with
// what the nodes observed: its declared GPUs (share of each listed GPU,
// and the unlisted ones at 1).
type DeclaredTask struct {
	Key                                       int64
	TaskID, Project, Owner, Hostname, K8sNode string
	Start                                     int64
	End                                       *int64
	Unlisted                                  int64
	GPUs                                      []DeclaredGPU
}

// DeclaredGPU is one listed GPU of a task.
type DeclaredGPU struct {
	UUID          string
	GPUInstanceID *int64
	Share         float64
	Model         string
}

// declaredTasks: the tasks whose interval reaches into [from, to), with
// their listed GPUs (tasks_start_time bounds the scan; task_gpus' primary
// key joins). A task's end is its counted end as the report counts it:
// max(end_time, last_seen) when completed, else its last heartbeat or
// observation (last_seen), else its start (an exec task is not counted to
// the window's end).
var stmtDeclaredTasks = &stmt{sql: `SELECT t.id, t.task_id, t.project, t.owner, t.hostname, t.k8s_node, t.start_time,
	CASE WHEN t.end_time IS NULL THEN COALESCE(t.last_seen, t.start_time)
	     WHEN t.last_seen > t.end_time THEN t.last_seen ELSE t.end_time END, t.gpu_unlisted,
	g.uuid, g.gpu_instance_id, g.share, g.model
	FROM tasks t LEFT JOIN task_gpus g ON g.task_key = t.id
	WHERE t.start_time < ? AND (t.end_time IS NULL OR t.end_time > ? OR t.last_seen > ?) ORDER BY t.id, g.position`,
	// The start bound is no selective range (every task started before
	// the window's end): both planners read every task.
	fullScan: "every task started before the window's end: the start bound selects no range", example: []any{int64(1705900000), int64(1705800000), int64(1705800000)}}

// DeclaredTasks lists the tasks whose counted interval reaches into
// [from, to).
func (s *Store) DeclaredTasks(ctx context.Context, from, to int64) ([]DeclaredTask, error) {
	rows, err := s.query(ctx, s.r, stmtDeclaredTasks, to, from, from)
	if err != nil {
		return nil, fmt.Errorf("store: declared tasks: %w", err)
	}
	defer rows.Close()
	var out []DeclaredTask
	if err := eachRow(rows, "declared tasks", func() error {
		var t DeclaredTask
		var end, gi sql.NullInt64
		var uuid sql.NullString
		var share sql.NullFloat64
		var model sql.NullString
		if err := rows.Scan(&t.Key, &t.TaskID, &t.Project, &t.Owner, &t.Hostname, &t.K8sNode, &t.Start, &end, &t.Unlisted,
			&uuid, &gi, &share, &model); err != nil {
			return err
		}
		if n := len(out); n == 0 || out[n-1].Key != t.Key {
			if end.Valid {
				v := end.Int64
				t.End = &v
			}
			out = append(out, t)
		}
		if uuid.Valid {
			g := DeclaredGPU{UUID: uuid.String, Share: 1, Model: model.String}
			if share.Valid {
				g.Share = share.Float64
			}
			if gi.Valid {
				v := gi.Int64
				g.GPUInstanceID = &v
			}
			last := &out[len(out)-1]
			last.GPUs = append(last.GPUs, g)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	return out, nil
}
