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
	_, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock(hashtext($1))", taskID)
	return err
}

// Register stores a registration. created is true when the task_id was new;
// a registration whose body is the same JSON value as the stored one returns
// false and nil; a different one ErrConflict, leaving the stored one as it
// was. A completion that was waiting for this registration is joined when the
// registration is within the scope of the token that sent it.
func (s *Store) Register(ctx context.Context, r *Registration) (created bool, err error) {
	if s.batch != nil {
		return s.batch.register(ctx, r)
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("store: register: %w", err)
	}
	defer tx.Rollback()
	if err := s.lockTask(ctx, tx, r.TaskID); err != nil {
		return false, fmt.Errorf("store: register: %w", err)
	}
	if created, err = s.registerTx(ctx, tx, r); err != nil || !created {
		return false, err
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("store: register %s: %w", r.TaskID, err)
	}
	return true, nil
}

// registerTx is Register's work inside a transaction; it writes nothing
// unless it returns created.
func (s *Store) registerTx(ctx context.Context, tx *sql.Tx, r *Registration) (created bool, err error) {
	labels, err := json.Marshal(nonNil(r.Labels))
	if err != nil {
		return false, fmt.Errorf("store: register: %w", err)
	}
	now := s.now().Unix()
	res, err := tx.ExecContext(ctx, s.bind(`INSERT INTO tasks (task_id, task_name, project, owner, priority, env,
		pipeline, pipeline_run, step, orchestrator, k8s_namespace, k8s_pod, k8s_node, k8s_pod_uid, k8s_job_index,
		hostname, start_time, gpu_count, gpu_unlisted, duration_est, labels, registration, registered_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (task_id) DO NOTHING`),
		r.TaskID, r.TaskName, r.Project, r.Owner, r.Priority, r.Env,
		r.Pipeline, r.PipelineRun, r.Step, r.Orchestrator, r.K8sNamespace, r.K8sPod, r.K8sNode, r.K8sPodUID, r.K8sJobIndex,
		r.Hostname, r.StartTime, r.GPUCount, max(r.GPUCount-int64(len(r.GPUs)), 0), r.DurationEst, string(labels), string(r.Body), now)
	if err != nil {
		return false, fmt.Errorf("store: register %s: %w", r.TaskID, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return false, fmt.Errorf("store: register %s: %w", r.TaskID, err)
	} else if n == 0 {
		var stored string
		if err := tx.QueryRowContext(ctx, s.bind("SELECT registration FROM tasks WHERE task_id = ?"), r.TaskID).Scan(&stored); err != nil {
			return false, fmt.Errorf("store: register %s: %w", r.TaskID, err)
		}
		if !sameJSON([]byte(stored), r.Body) {
			return false, ErrConflict
		}
		return false, nil
	}
	if _, err := tx.ExecContext(ctx, s.bind("INSERT INTO project_owners (project, owner) VALUES (?, ?) ON CONFLICT DO NOTHING"),
		r.Project, r.Owner); err != nil {
		return false, fmt.Errorf("store: register %s: %w", r.TaskID, err)
	}
	for i, g := range r.GPUs {
		share := g.share()
		exclusive := 0
		if wholeInstance(share, g.MIG) {
			exclusive = 1
		}
		var migUUID, profile string
		var gi, ci, slices, total *int64
		if m := g.MIG; m != nil {
			migUUID, profile = m.UUID, m.Profile
			gi, ci, slices, total = &m.GPUInstanceID, m.ComputeInstanceID, m.Slices, m.TotalSlices
		}
		if _, err := tx.ExecContext(ctx, s.bind(`INSERT INTO task_gpus (task_id, position, gpu_index, uuid, model, memory_total,
			share, exclusive, mig_uuid, gpu_instance_id, compute_instance_id, mig_profile, mig_slices, mig_total_slices)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`), r.TaskID, i, g.Index, g.UUID, g.Model, g.MemoryTotal,
			share, exclusive, migUUID, gi, ci, profile, slices, total); err != nil {
			return false, fmt.Errorf("store: register %s: gpu %d: %w", r.TaskID, i, err)
		}
		if g.UUID != "" {
			if err := s.claim(ctx, tx, r, i, g.UUID, gi, exclusive == 1); err != nil {
				return false, err
			}
		}
	}
	if err := s.joinPending(ctx, tx, r); err != nil {
		return false, err
	}
	return true, nil
}

// claim applies "one GPU instance runs one task" for the new task's GPU at
// position i: open tasks that started earlier on the same instance lose
// their claim at the new task's start, and if a later task already claims
// it (this registration came late, from a spool), the new task's own claim
// ended when that one started. Which claims collide is conflictSQL's rule.
func (s *Store) claim(ctx context.Context, tx *sql.Tx, r *Registration, i int, uuid string, gi *int64, exclusive bool) error {
	older, cargs := conflictSQL("", gi, exclusive)
	args := append([]any{r.StartTime, uuid, r.TaskID}, cargs...)
	if _, err := tx.ExecContext(ctx, s.bind(`UPDATE task_gpus SET claim_ended = ?
		WHERE uuid = ? AND uuid <> '' AND claim_ended IS NULL AND task_id <> ? AND `+older+`
		AND EXISTS (SELECT 1 FROM tasks t WHERE t.task_id = task_gpus.task_id AND t.end_time IS NULL AND t.start_time < ?)`),
		append(args, r.StartTime)...); err != nil {
		return fmt.Errorf("store: register %s: ending older claims: %w", r.TaskID, err)
	}
	cond, _ := conflictSQL("g.", gi, exclusive)
	var later sql.NullInt64
	if err := tx.QueryRowContext(ctx, s.bind(`SELECT MIN(t.start_time) FROM task_gpus g JOIN tasks t ON t.task_id = g.task_id
		WHERE g.uuid = ? AND g.uuid <> '' AND g.task_id <> ? AND `+cond+` AND t.start_time > ?`),
		append(append([]any{uuid, r.TaskID}, cargs...), r.StartTime)...).Scan(&later); err != nil {
		return fmt.Errorf("store: register %s: later claims: %w", r.TaskID, err)
	}
	if later.Valid {
		if _, err := tx.ExecContext(ctx, s.bind("UPDATE task_gpus SET claim_ended = ? WHERE task_id = ? AND position = ?"),
			later.Int64, r.TaskID, i); err != nil {
			return fmt.Errorf("store: register %s: %w", r.TaskID, err)
		}
	}
	return nil
}

// conflictSQL is the condition on another claim of the same UUID (columns
// prefixed by p) under which it and the new claim (GPU instance gi, nil for
// a whole GPU; exclusive when it holds the whole instance) cannot both
// stand, the older one ending. The rule is symmetric, so it serves both
// directions:
//   - a whole GPU held exclusively collides with every claim on it;
//   - a shared whole GPU with exclusive whole-GPU claims and every MIG
//     claim (the GPU was re-partitioned), never another shared one;
//   - a MIG instance with every whole-GPU claim on its parent, and on its
//     own instance with every claim if it is exclusive, else with
//     exclusive ones; other instances of the parent are left alone.
func conflictSQL(p string, gi *int64, exclusive bool) (string, []any) {
	switch {
	case gi == nil && exclusive:
		return "1 = 1", nil
	case gi == nil:
		return "(" + p + "gpu_instance_id IS NOT NULL OR " + p + "exclusive = 1)", nil
	case exclusive:
		return "(" + p + "gpu_instance_id IS NULL OR " + p + "gpu_instance_id = ?)", []any{*gi}
	}
	return "(" + p + "gpu_instance_id IS NULL OR (" + p + "gpu_instance_id = ? AND " + p + "exclusive = 1))", []any{*gi}
}

// share is the entry's share as the store keeps it: the registration's,
// else slices / total_slices for MIG, else 1.
func (g RegisteredGPU) share() float64 {
	if g.Share > 0 {
		return g.Share
	}
	if m := g.MIG; m != nil && m.Slices != nil && m.TotalSlices != nil && *m.TotalSlices > 0 && *m.Slices > 0 {
		return float64(*m.Slices) / float64(*m.TotalSlices)
	}
	return 1
}

// joinPending applies a completion that came before this registration, if
// the token that sent it may write this task. One it may not write stays
// where it is: never joined, never lost.
func (s *Store) joinPending(ctx context.Context, tx *sql.Tx, r *Registration) error {
	var body, scopeJSON string
	var received int64
	err := tx.QueryRowContext(ctx, s.bind("SELECT completion, scope, received_at FROM pending_completions WHERE task_id = ?"), r.TaskID).
		Scan(&body, &scopeJSON, &received)
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
	_, err = tx.ExecContext(ctx, s.bind("DELETE FROM pending_completions WHERE task_id = ?"), r.TaskID)
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
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("store: complete: %w", err)
	}
	defer tx.Rollback()
	if err := s.lockTask(ctx, tx, c.TaskID); err != nil {
		return 0, fmt.Errorf("store: complete: %w", err)
	}
	var project, owner string
	var stored sql.NullString
	err = tx.QueryRowContext(ctx, s.bind("SELECT project, owner, completion FROM tasks WHERE task_id = ?"), c.TaskID).
		Scan(&project, &owner, &stored)
	now := s.now().Unix()
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return s.completePending(ctx, tx, c, body, scope, now)
	case err != nil:
		return 0, fmt.Errorf("store: complete %s: %w", c.TaskID, err)
	case !scope.Allows(project, owner):
		return 0, ErrOutOfScope
	case stored.Valid:
		if sameJSON([]byte(stored.String), body) {
			return AlreadyCompleted, nil
		}
		return 0, ErrConflict
	}
	if err := s.applyCompletion(ctx, tx, c, body, now); err != nil {
		return 0, err
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("store: complete %s: %w", c.TaskID, err)
	}
	return Completed, nil
}

func (s *Store) completePending(ctx context.Context, tx *sql.Tx, c *Completion, body []byte, scope *access.Scope, now int64) (CompleteResult, error) {
	scopeJSON := ""
	if scope != nil {
		b, err := json.Marshal(scope)
		if err != nil {
			return 0, fmt.Errorf("store: complete %s: %w", c.TaskID, err)
		}
		scopeJSON = string(b)
	}
	res, err := tx.ExecContext(ctx, s.bind(`INSERT INTO pending_completions (task_id, completion, scope, received_at)
		VALUES (?, ?, ?, ?) ON CONFLICT (task_id) DO NOTHING`), c.TaskID, string(body), scopeJSON, now)
	if err != nil {
		return 0, fmt.Errorf("store: complete %s: %w", c.TaskID, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return 0, fmt.Errorf("store: complete %s: %w", c.TaskID, err)
	} else if n == 0 {
		var stored string
		if err := tx.QueryRowContext(ctx, s.bind("SELECT completion FROM pending_completions WHERE task_id = ?"), c.TaskID).Scan(&stored); err != nil {
			return 0, fmt.Errorf("store: complete %s: %w", c.TaskID, err)
		}
		if !sameJSON([]byte(stored), body) {
			return 0, ErrConflict
		}
		return Pending, nil
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("store: complete %s: %w", c.TaskID, err)
	}
	return Pending, nil
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
	if _, err := tx.ExecContext(ctx, s.bind(`UPDATE tasks SET end_time = ?, duration_seconds = ?, exit_code = ?, signal = ?,
		gate_passed = ?, gate_expr = ?, gate_reason = ?, metrics = ?, completion = ?, completed_at = ?
		WHERE task_id = ?`),
		c.EndTime, c.DurationSeconds, c.ExitCode, c.Signal, gatePassed, gateExpr, gateReason, metrics, string(body), receivedAt,
		c.TaskID); err != nil {
		return fmt.Errorf("store: complete %s: %w", c.TaskID, err)
	}
	for i, g := range c.GPUs {
		q := `UPDATE task_gpus SET samples = ?, util_mean = ?, util_p95 = ?, memory_used_peak_bytes = ?, idle_share = ?,
			energy_joules = ?, energy_estimated = ?
			WHERE task_id = ? AND `
		var estimated *int64
		if g.EnergyEstimated != nil {
			e := int64(0)
			if *g.EnergyEstimated {
				e = 1
			}
			estimated = &e
		}
		args := []any{g.Samples, g.UtilMean, g.UtilP95, g.MemoryUsedPeakBytes, g.IdleShare, g.EnergyJoules, estimated, c.TaskID}
		switch {
		case g.MIGUUID != "":
			// Two instances of one parent share its UUID: the instance's
			// own UUID tells them apart.
			q += "mig_uuid = ?"
			args = append(args, g.MIGUUID)
		case g.UUID != "":
			q += "uuid = ?"
			args = append(args, g.UUID)
		default:
			q += "position = ? AND uuid = ''"
			args = append(args, i)
		}
		if _, err := tx.ExecContext(ctx, s.bind(q), args...); err != nil {
			return fmt.Errorf("store: complete %s: gpu %d: %w", c.TaskID, i, err)
		}
	}
	return nil
}

// Heartbeat moves the task's last-seen time forward to at (never back); a
// completed task's heartbeat changes nothing. ErrNotFound when there is no such task within scope: a caller outside the
// scope learns nothing about the task.
func (s *Store) Heartbeat(ctx context.Context, taskID string, at int64, scope *access.Scope) error {
	var project, owner string
	err := s.r.QueryRowContext(ctx, s.bind("SELECT project, owner FROM tasks WHERE task_id = ?"), taskID).Scan(&project, &owner)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && !scope.Allows(project, owner)) {
		return ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("store: heartbeat %s: %w", taskID, err)
	}
	if _, err := s.w.ExecContext(ctx, s.bind("UPDATE tasks SET last_seen = ? WHERE task_id = ? AND end_time IS NULL AND (last_seen IS NULL OR last_seen < ?)"),
		at, taskID, at); err != nil {
		return fmt.Errorf("store: heartbeat %s: %w", taskID, err)
	}
	return nil
}

func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}
