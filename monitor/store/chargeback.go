package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
)

// reportTaskListSQL is ReportTasks' statement (and ReportTasksByDay's,
// which reads each task's counted end, ce, too).
var reportTaskListSQL = "WITH " + spanSQL + `
SELECT sp.id, sp.task_id, sp.task_name, sp.project, sp.owner, tl.labels, sp.start_time, sp.end_time, tl.last_seen,
  sp.sec, sp.gpu_unlisted, g.position, g.model, g.mig_profile,
  CASE WHEN g.gpu_instance_id IS NULL THEN 0 ELSE 1 END, g.share, g.energy_joules, sp.ce
FROM span sp JOIN tasks tl ON tl.id = sp.id LEFT JOIN task_gpus g ON g.task_key = sp.id
ORDER BY sp.start_time, sp.task_id, sp.id, g.position`

// ReportTasks implements report.TaskLister: every task whose counted
// interval overlaps the window (span, its three indexes), with its GPUs
// (task_gpus' primary key (task_key, position)) and its labels (tasks'
// primary key), oldest start first. The seconds are span's: counted inside
// the window only.
func (s *Store) ReportTasks(ctx context.Context, w facts.Window) ([]facts.TaskUsage, error) {
	out, _, err := s.reportTaskList(ctx, w)
	return out, err
}

// reportTaskList is ReportTasks' list, with each task's counted end.
func (s *Store) reportTaskList(ctx context.Context, w facts.Window) ([]facts.TaskUsage, []int64, error) {
	rows, err := s.reportQuery(ctx, stmtReportTaskList, reportTaskListSQL, w, "")
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	var out []facts.TaskUsage
	var ends []int64
	var last int64 = -1
	if err := eachRow(rows.Rows, "report tasks", func() error {
		var id, start, sec, unlisted, ce int64
		var taskID, name, project, owner, labels string
		var end, seen, position sql.NullInt64
		var model, profile sql.NullString
		var mig sql.NullInt64
		var share, energy sql.NullFloat64
		if err := rows.Scan(&id, &taskID, &name, &project, &owner, &labels, &start, &end, &seen,
			&sec, &unlisted, &position, &model, &profile, &mig, &share, &energy, &ce); err != nil {
			return err
		}
		if id != last {
			last = id
			ends = append(ends, ce)
			t := facts.TaskUsage{ID: id, TaskID: taskID, Name: name, Project: project, Owner: owner, Start: start,
				Seconds: sec, UnlistedGPUs: unlisted}
			if end.Valid {
				t.End = &end.Int64
			}
			t.Heartbeat = seen.Valid && seen.Int64 > start
			if err := json.Unmarshal([]byte(labels), &t.Labels); err != nil {
				return fmt.Errorf("labels of %s: %w", taskID, err)
			}
			out = append(out, t)
		}
		if position.Valid {
			t := &out[len(out)-1]
			g := facts.TaskGPU{Model: model.String, Profile: profile.String, MIG: mig.Int64 == 1, Share: share.Float64}
			if energy.Valid {
				g.EnergyJoules = &energy.Float64
			}
			t.GPUs = append(t.GPUs, g)
		}
		return nil
	}); err != nil {
		return nil, nil, err
	}
	return out, ends, nil
}
