package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/paddle-entrypoint/paddle-entrypoint/access"
)

// lockTask serialises, on PostgreSQL, the transactions of one task_id across
// every replica: without it a completion and its registration arriving
// together at two replicas could each miss the other (READ COMMITTED) and
// the completion would never be joined. SQLite's immediate transactions
// already run one at a time.
func (s *Store) lockTask(ctx context.Context, tx *sql.Tx, taskID string) error {
	if s.dialect != Postgres {
		return nil
	}
	_, err := s.exec(ctx, tx, stmtLockTask, taskID)
	return err
}

// Register stores a registration. created is true when the task_id was new;
// a registration whose body is the same JSON value as the stored one returns
// false and nil; a different one ErrConflict, leaving the stored one as it
// was. A completion that was waiting for this registration is joined when the
// registration is within the scope of the token that sent it.
func (s *Store) Register(ctx context.Context, r *Registration) (created bool, err error) {
	err = s.write(ctx, "register "+r.TaskID, r.TaskID, false, func(ctx context.Context, tx *sql.Tx) (bool, error) {
		created, err = s.registerTx(ctx, tx, r)
		return created, err
	})
	return created && err == nil, err
}

// write runs op, a write of one task, in a transaction: on SQLite in the
// batcher's next group commit, on PostgreSQL in a transaction of its own
// that holds the task's lock. The transaction commits only when op says it
// wrote something. single: op runs one write statement (no savepoint).
func (s *Store) write(ctx context.Context, what, taskID string, single bool, op func(ctx context.Context, tx *sql.Tx) (bool, error)) error {
	if s.batch != nil {
		return s.batch.run(ctx, what, single, op)
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: %s: %w", what, err)
	}
	defer tx.Rollback()
	if err := s.lockTask(ctx, tx, taskID); err != nil {
		return fmt.Errorf("store: %s: %w", what, err)
	}
	wrote, err := op(ctx, tx)
	if err != nil || !wrote {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: %s: %w", what, err)
	}
	return nil
}

// registerTx is Register's work inside a transaction; it writes nothing
// unless it returns created.
func (s *Store) registerTx(ctx context.Context, tx *sql.Tx, r *Registration) (created bool, err error) {
	labels, err := json.Marshal(nonNil(r.Labels))
	if err != nil {
		return false, fmt.Errorf("store: register: %w", err)
	}
	now := s.now().Unix()
	res, err := s.exec(ctx, tx, stmtInsertTask,
		r.TaskID, r.TaskName, r.Project, r.Owner, r.Priority, r.Env,
		r.Pipeline, r.PipelineRun, r.Step, r.Orchestrator, r.K8sNamespace, r.K8sPod, r.K8sNode, r.K8sPodUID, r.K8sJobIndex,
		r.Hostname, r.StartTime, r.GPUCount, r.DurationEst, string(labels), string(r.Body), now, r.SubmitTime)
	if err != nil {
		return false, fmt.Errorf("store: register %s: %w", r.TaskID, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return false, fmt.Errorf("store: register %s: %w", r.TaskID, err)
	} else if n == 0 {
		var stored string
		if err := s.queryRow(ctx, tx, stmtStoredRegistration, r.TaskID).Scan(&stored); err != nil {
			return false, fmt.Errorf("store: register %s: %w", r.TaskID, err)
		}
		if !sameJSON([]byte(stored), r.Body) {
			return false, ErrConflict
		}
		return false, nil
	}
	if _, err := s.exec(ctx, tx, stmtInsertProjectOwner, r.Project, r.Owner); err != nil {
		return false, fmt.Errorf("store: register %s: %w", r.TaskID, err)
	}
	for i, g := range r.GPUs {
		if _, err := s.exec(ctx, tx, stmtInsertGPU, r.TaskID, i, g.Index, g.UUID, g.Model, g.MemoryTotal, r.StartTime); err != nil {
			return false, fmt.Errorf("store: register %s: gpu %d: %w", r.TaskID, i, err)
		}
		if g.UUID != "" {
			if err := s.claim(ctx, tx, r, i, g.UUID); err != nil {
				return false, err
			}
		}
	}
	if err := s.joinPending(ctx, tx, r); err != nil {
		return false, err
	}
	return true, nil
}

// claim applies "one GPU runs one task" for the new task's GPU at position
// i: open tasks that started earlier on this UUID lose their claim at the
// new task's start, and if a later task already claims it (this
// registration came late, from a spool), the new task's own claim ended
// when that one started. Both are ranges of task_gpus' own indexes (its
// copy of each task's start and end), whatever the number of open tasks.
func (s *Store) claim(ctx context.Context, tx *sql.Tx, r *Registration, i int, uuid string) error {
	if _, err := s.exec(ctx, tx, stmtEndOlderClaims, r.StartTime, uuid, r.StartTime, r.TaskID); err != nil {
		return fmt.Errorf("store: register %s: ending older claims: %w", r.TaskID, err)
	}
	var later sql.NullInt64
	if err := s.queryRow(ctx, tx, stmtLaterClaim, uuid, r.StartTime, r.TaskID).Scan(&later); err != nil {
		return fmt.Errorf("store: register %s: later claims: %w", r.TaskID, err)
	}
	if later.Valid {
		if _, err := s.exec(ctx, tx, stmtEndOwnClaim, later.Int64, r.TaskID, i); err != nil {
			return fmt.Errorf("store: register %s: %w", r.TaskID, err)
		}
	}
	return nil
}

// joinPending applies a completion that came before this registration, if
// the token that sent it may write this task. One it may not write stays
// where it is: never joined, never lost.
func (s *Store) joinPending(ctx context.Context, tx *sql.Tx, r *Registration) error {
	var body, scopeJSON string
	var received int64
	err := s.queryRow(ctx, tx, stmtPendingCompletion, r.TaskID).Scan(&body, &scopeJSON, &received)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("store: register %s: pending completion: %w", r.TaskID, err)
	}
	var scope *access.Scope
	if scopeJSON != "" {
		scope = new(access.Scope)
		if err := json.Unmarshal([]byte(scopeJSON), scope); err != nil {
			return fmt.Errorf("store: register %s: pending completion's scope: %w", r.TaskID, err)
		}
	}
	if !scope.Allows(r.Project, r.Owner) {
		return nil
	}
	var c Completion
	if err := json.Unmarshal([]byte(body), &c); err != nil {
		// The API checked it before keeping it; should that check ever
		// have let through what this decoder refuses, the registration
		// must still be stored, and the completion stays where it is.
		return nil
	}
	if err := s.applyCompletion(ctx, tx, &c, []byte(body), received); err != nil {
		return err
	}
	_, err = s.exec(ctx, tx, stmtDeletePending, r.TaskID)
	return err
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

// Complete stores a completion. The task must be within scope (nil: any),
// else ErrOutOfScope. A completion of a task not registered yet is kept with
// the scope and joined by Register. A different completion of a completed
// (or pending) task is ErrConflict; the first is kept.
func (s *Store) Complete(ctx context.Context, c *Completion, body []byte, scope *access.Scope) (CompleteResult, error) {
	var result CompleteResult
	err := s.write(ctx, "complete "+c.TaskID, c.TaskID, false, func(ctx context.Context, tx *sql.Tx) (bool, error) {
		var wrote bool
		var err error
		result, wrote, err = s.completeTx(ctx, tx, c, body, scope)
		return wrote, err
	})
	if err != nil {
		return 0, err
	}
	return result, nil
}

// completeTx is Complete's work inside a transaction; wrote tells whether
// it wrote anything (not for the same completion again, nor an error).
func (s *Store) completeTx(ctx context.Context, tx *sql.Tx, c *Completion, body []byte, scope *access.Scope) (_ CompleteResult, wrote bool, _ error) {
	var project, owner string
	var stored sql.NullString
	err := s.queryRow(ctx, tx, stmtTaskToComplete, c.TaskID).Scan(&project, &owner, &stored)
	now := s.now().Unix()
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return s.completePending(ctx, tx, c, body, scope, now)
	case err != nil:
		return 0, false, fmt.Errorf("store: complete %s: %w", c.TaskID, err)
	case !scope.Allows(project, owner):
		return 0, false, ErrOutOfScope
	case stored.Valid:
		if sameJSON([]byte(stored.String), body) {
			return AlreadyCompleted, false, nil
		}
		return 0, false, ErrConflict
	}
	if err := s.applyCompletion(ctx, tx, c, body, now); err != nil {
		return 0, false, err
	}
	return Completed, true, nil
}

func (s *Store) completePending(ctx context.Context, tx *sql.Tx, c *Completion, body []byte, scope *access.Scope, now int64) (CompleteResult, bool, error) {
	scopeJSON := ""
	if scope != nil {
		b, err := json.Marshal(scope)
		if err != nil {
			return 0, false, fmt.Errorf("store: complete %s: %w", c.TaskID, err)
		}
		scopeJSON = string(b)
	}
	res, err := s.exec(ctx, tx, stmtInsertPending, c.TaskID, string(body), scopeJSON, now)
	if err != nil {
		return 0, false, fmt.Errorf("store: complete %s: %w", c.TaskID, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return 0, false, fmt.Errorf("store: complete %s: %w", c.TaskID, err)
	} else if n == 0 {
		var stored string
		if err := s.queryRow(ctx, tx, stmtStoredPending, c.TaskID).Scan(&stored); err != nil {
			return 0, false, fmt.Errorf("store: complete %s: %w", c.TaskID, err)
		}
		if !sameJSON([]byte(stored), body) {
			return 0, false, ErrConflict
		}
		return Pending, false, nil
	}
	return Pending, true, nil
}

// applyCompletion writes c onto its registered task and its GPUs. A GPU of
// the completion is matched by UUID, or by position when it has none
// (GPUs counted from device nodes).
func (s *Store) applyCompletion(ctx context.Context, tx *sql.Tx, c *Completion, body []byte, receivedAt int64) error {
	var gatePassed *int64
	var gateExpr, gateReason string
	if c.Gate != nil {
		p := int64(0)
		if c.Gate.Passed {
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
		c.EndTime, c.DurationSeconds, c.ExitCode, c.Signal, gatePassed, gateExpr, gateReason, metrics, string(body), receivedAt,
		c.TaskID); err != nil {
		return fmt.Errorf("store: complete %s: %w", c.TaskID, err)
	}
	if _, err := s.exec(ctx, tx, stmtCompleteGPUs, c.EndTime, c.TaskID); err != nil {
		return fmt.Errorf("store: complete %s: %w", c.TaskID, err)
	}
	for i, g := range c.GPUs {
		st, args := stmtGPUSummaryByUUID, []any{g.Samples, g.UtilMean, g.UtilP95, g.MemoryUsedPeakBytes, g.IdleShare, c.TaskID}
		if g.UUID != "" {
			args = append(args, g.UUID)
		} else {
			st, args = stmtGPUSummaryByPosition, append(args, i)
		}
		if _, err := s.exec(ctx, tx, st, args...); err != nil {
			return fmt.Errorf("store: complete %s: gpu %d: %w", c.TaskID, i, err)
		}
	}
	return nil
}

// Heartbeat moves the task's last-seen time forward to at (never back); a
// completed task's heartbeat changes nothing. ErrNotFound when there is no
// such task within scope: a caller outside the scope learns nothing about
// the task.
//
// On SQLite heartbeats are written in the batcher's group commits (fifty
// clients must not queue for a fsync each); on PostgreSQL they are two
// statements outside a transaction, as a heartbeat never races with
// anything it could corrupt (it only moves last_seen forward).
func (s *Store) Heartbeat(ctx context.Context, taskID string, at int64, scope *access.Scope) error {
	op := func(ctx context.Context, read, write querier) (bool, error) {
		var project, owner string
		err := s.queryRow(ctx, read, stmtHeartbeatScope, taskID).Scan(&project, &owner)
		if errors.Is(err, sql.ErrNoRows) || (err == nil && !scope.Allows(project, owner)) {
			return false, ErrNotFound
		}
		if err != nil {
			return false, fmt.Errorf("store: heartbeat %s: %w", taskID, err)
		}
		if _, err := s.exec(ctx, write, stmtHeartbeat, at, taskID, at); err != nil {
			return false, fmt.Errorf("store: heartbeat %s: %w", taskID, err)
		}
		return true, nil
	}
	if s.batch != nil {
		return s.batch.run(ctx, "heartbeat "+taskID, true, func(ctx context.Context, tx *sql.Tx) (bool, error) {
			return op(ctx, tx, tx)
		})
	}
	_, err := op(ctx, s.r, s.w)
	return err
}

func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}
