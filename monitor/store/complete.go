package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/access"
)

// completionFits checks a completion's times against its task's start:
// the end is not before the start, nor later than the start plus the
// duration plus an hour (no real run reports that).
func completionFits(c *wire.Completion, start int64) error {
	end, duration := valueOf(c.EndTime), valueOf(c.DurationSeconds)
	if end < start {
		return &BadCompletionError{"end_time", fmt.Sprintf("%d is before the task's start_time %d", end, start)}
	}
	if float64(end) > float64(start)+duration+3600 {
		return &BadCompletionError{"end_time", fmt.Sprintf("%d is later than the task's start_time %d + duration_seconds %g + 1h",
			end, start, duration)}
	}
	return nil
}

// CompleteResult tells what Complete did.
type CompleteResult int

const (
	// Completed: the completion is stored on its task.
	Completed CompleteResult = iota
	// AlreadyCompleted: the same completion was stored before.
	AlreadyCompleted
	// Pending: no registration yet; kept until it comes.
	Pending
)

// Complete stores a completion (decoded and checked by
// wire.DecodeCompletion, its times bounded by the API; body as sent) of the task under its task_id that the
// sender sees. With none, the completion is kept as pending for the
// sender's scope (one per task_id and scope) and joined by Register; with
// several, the one whose start_time equals the completion's is completed,
// and none matching is ErrStartMismatch. A different completion of a
// completed (or pending) task is ErrConflict; the first is kept. Times that
// do not fit the task are a *BadCompletionError; a new pending completion
// past the sender's bound is ErrTooManyOpen.
func (s *Store) Complete(ctx context.Context, c *wire.Completion, body []byte, from Sender) (CompleteResult, error) {
	var result CompleteResult
	err := s.write(ctx, "complete "+c.TaskID, c.TaskID, false, func(ctx context.Context, tx *sql.Tx) (bool, error) {
		var wrote bool
		var err error
		result, wrote, err = s.completeTx(ctx, tx, c, body, from)
		return wrote, err
	})
	if err != nil {
		return 0, err
	}
	return result, nil
}

// completeTx is Complete's work inside a transaction; wrote tells whether
// it wrote anything (not for the same completion again, nor an error).
func (s *Store) completeTx(ctx context.Context, tx *sql.Tx, c *wire.Completion, body []byte, from Sender) (_ CompleteResult, wrote bool, _ error) {
	same, err := s.visible(ctx, tx, c.TaskID, from.Scope)
	if err != nil {
		return 0, false, fmt.Errorf("store: complete %s: %w", c.TaskID, err)
	}
	now := s.now().Unix()
	var t *sameID
	switch {
	case len(same) == 0:
		return s.completePending(ctx, tx, c, body, from, now)
	case len(same) == 1:
		t = &same[0]
	default:
		for i := range same {
			if c.StartTime != nil && same[i].startTime == *c.StartTime {
				t = &same[i]
			}
		}
		if t == nil {
			return 0, false, ErrStartMismatch
		}
	}
	if err := completionFits(c, t.startTime); err != nil {
		return 0, false, err
	}
	if t.completion.Valid {
		if sameJSON([]byte(t.completion.String), body) {
			return AlreadyCompleted, false, nil
		}
		return 0, false, ErrConflict
	}
	if err := s.applyCompletion(ctx, tx, t.key, c, body, now); err != nil {
		return 0, false, err
	}
	return Completed, true, nil
}

// scopeKey is how a pending completion records its sender's scope: the
// JSON of the patterns, ” for every task.
func scopeKey(scope *access.Scope) (string, error) {
	if scope == nil {
		return "", nil
	}
	b, err := json.Marshal(scope)
	return string(b), err
}

func (s *Store) completePending(ctx context.Context, tx *sql.Tx, c *wire.Completion, body []byte, from Sender, now int64) (CompleteResult, bool, error) {
	scopeJSON, err := scopeKey(from.Scope)
	if err != nil {
		return 0, false, fmt.Errorf("store: complete %s: %w", c.TaskID, err)
	}
	var stored string
	switch err := s.queryRow(ctx, tx, stmtStoredPending, c.TaskID, scopeJSON).Scan(&stored); {
	case err == nil:
		if !sameJSON([]byte(stored), body) {
			return 0, false, ErrConflict
		}
		return Pending, false, nil
	case !errors.Is(err, sql.ErrNoRows):
		return 0, false, fmt.Errorf("store: complete %s: %w", c.TaskID, err)
	}
	if err := s.checkOpenBound(ctx, tx, from, now); err != nil {
		return 0, false, err
	}
	if _, err := s.exec(ctx, tx, stmtInsertPending, c.TaskID, string(body), scopeJSON, now, from.Token); err != nil {
		return 0, false, fmt.Errorf("store: complete %s: %w", c.TaskID, err)
	}
	return Pending, true, nil
}

// applyCompletion writes c onto its registered task (key) and its GPUs. A
// GPU of the completion is matched by UUID, or by position when it has none
// (GPUs counted from device nodes).
func (s *Store) applyCompletion(ctx context.Context, tx *sql.Tx, key int64, c *wire.Completion, body []byte, receivedAt int64) error {
	var gatePassed *int64
	var gateExpr, gateReason string
	if c.Gate != nil {
		p := int64(0)
		if valueOf(c.Gate.Passed) {
			p = 1
		}
		gatePassed, gateExpr, gateReason = &p, c.Gate.Expr, c.Gate.Reason
	}
	var metrics *string
	if c.Metrics != nil {
		b, err := json.Marshal(c.Metrics)
		if err != nil {
			return fmt.Errorf("store: complete %s: metrics: %w", c.TaskID, err)
		}
		m := string(b)
		metrics = &m
	}
	if _, err := s.exec(ctx, tx, stmtCompleteTask,
		valueOf(c.EndTime), valueOf(c.DurationSeconds), valueOf(c.ExitCode), c.Signal, gatePassed, gateExpr, gateReason, metrics, string(body), receivedAt,
		key); err != nil {
		return fmt.Errorf("store: complete %s: %w", c.TaskID, err)
	}
	if _, err := s.exec(ctx, tx, stmtCompleteGPUs, valueOf(c.EndTime), key); err != nil {
		return fmt.Errorf("store: complete %s: %w", c.TaskID, err)
	}
	for i, g := range c.GPUs {
		var estimated *int64
		if g.EnergyEstimated != nil {
			e := int64(0)
			if *g.EnergyEstimated {
				e = 1
			}
			estimated = &e
		}
		args := []any{g.Samples, g.UtilMean, g.UtilP95, g.MemoryUsedPeakBytes, g.IdleShare, g.EnergyJoules, estimated, key}
		var st *stmt
		switch {
		case g.MIGUUID != "":
			// Two instances of one parent share its UUID: the instance's
			// own UUID tells them apart.
			st, args = stmtGPUSummaryByMIG, append(args, g.MIGUUID)
		case g.UUID != "":
			st, args = stmtGPUSummaryByUUID, append(args, g.UUID)
		default:
			st, args = stmtGPUSummaryByPosition, append(args, i)
		}
		if _, err := s.exec(ctx, tx, st, args...); err != nil {
			return fmt.Errorf("store: complete %s: gpu %d: %w", c.TaskID, i, err)
		}
	}
	return nil
}
