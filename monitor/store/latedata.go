package store

import (
	"context"
	"database/sql"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
)

// LateTask is a task whose part of a closed month changed after the close:
// as it is now, and as the month last counted it (Before false: not at
// all, a late registration).
type LateTask struct {
	Key                 int64
	TaskID              string
	Project, Owner      string
	Start               int64
	End, LastSeen       *int64 // now
	Before              bool
	BeforeLastSeen      *int64 // the last_seen counted then (the task was open)
	GPUUnlisted         int64
	Failed              bool
	GPUs                []LateGPU
	RegisteredLate      bool
	CompletedAfterClose bool
}

// LateGPU is a listed GPU of a late task, as the report prices it.
type LateGPU struct {
	Model, Profile string
	Share          float64
	MIG            bool
}

// lateSlack covers requests received before a close but stored after its
// cut was read (registered_at is the receipt's time).
const lateSlack = 600

// LateTasks returns the closed month's late tasks (c its statement in
// force): what changed it since its statement, or since its late data last
// went into a later statement.
func (s *Store) LateTasks(ctx context.Context, c Closed) ([]LateTask, error) {
	w, err := facts.ParseMonth("month", c.Month)
	if err != nil {
		return nil, err
	}
	return s.lateTasks(ctx, s.r, c, w)
}

func (s *Store) lateTasks(ctx context.Context, q querier, c Closed, w facts.Window) ([]LateTask, error) {
	lag := c.ClosedAt.Unix() - w.To.Unix() - lateSlack
	if lag < 0 {
		lag = 0
	}
	var out []LateTask
	what := "late data of " + c.Month
	read := func(st *stmt, args ...any) error {
		tasks, err := stmtRows(ctx, s, q, what, st, func(rows *sql.Rows, t *LateTask) error {
			var end, seen, beforeSeen sql.NullInt64
			var failed, before int
			if err := rows.Scan(&t.Key, &t.TaskID, &t.Project, &t.Owner, &t.Start, &end, &seen, &t.GPUUnlisted, &failed,
				&before, &beforeSeen); err != nil {
				return err
			}
			if end.Valid {
				t.End = &end.Int64
			}
			if seen.Valid {
				t.LastSeen = &seen.Int64
			}
			if beforeSeen.Valid {
				t.BeforeLastSeen = &beforeSeen.Int64
			}
			t.Failed, t.Before = failed == 1, before == 1
			t.RegisteredLate = !t.Before
			t.CompletedAfterClose = t.Before && t.End != nil
			return nil
		}, args...)
		out = append(out, tasks...)
		return err
	}
	if err := read(stmtLateRegistered, lag, c.TaskCut, w.To.Unix()); err != nil {
		return nil, err
	}
	if err := read(stmtLateChanged, c.Month); err != nil {
		return nil, err
	}
	for i := range out {
		gpus, err := stmtRows(ctx, s, q, what, stmtLateGPUs, func(rows *sql.Rows, g *LateGPU) error {
			var mig int
			err := rows.Scan(&g.Model, &g.Share, &mig, &g.Profile)
			g.MIG = mig == 1
			return err
		}, out[i].Key)
		if err != nil {
			return nil, err
		}
		out[i].GPUs = append(out[i].GPUs, gpus...)
	}
	return out, nil
}
