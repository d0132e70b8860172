package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/access"
	"github.com/paddle-entrypoint/paddle-entrypoint/wire"
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

// sameID is one stored task under a task_id, as the writes compare it.
type sameID struct {
	key            int64
	project, owner string
	startTime      int64
	registration   string
	completion     sql.NullString
}

// visible returns the tasks stored under taskID that scope sees (nil: all),
// oldest start first. A task outside the scope is, for that sender, not
// there at all: it decides no answer.
func (s *Store) visible(ctx context.Context, q querier, taskID string, scope *access.Scope) ([]sameID, error) {
	rows, err := s.query(ctx, q, stmtSameID, taskID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []sameID
	for rows.Next() {
		var t sameID
		if err := rows.Scan(&t.key, &t.project, &t.owner, &t.startTime, &t.registration, &t.completion); err != nil {
			return nil, err
		}
		if scope.Allows(t.project, t.owner) {
			out = append(out, t)
		}
	}
	return out, rows.Err()
}

// Register stores a registration. created is true when the task is new to
// the sender: no task under its task_id is within the sender's scope. When
// the sender sees tasks under it, a registration whose body is the same JSON
// value as one of theirs returns false and nil, else ErrConflict, leaving
// the stored ones as they were. A new task past the sender's bound of open
// tasks is ErrTooManyOpen. The earliest completion waiting for this task_id
// whose sender's scope covers the registration is joined.
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
	same, err := s.visible(ctx, tx, r.TaskID, r.From.Scope)
	if err != nil {
		return false, fmt.Errorf("store: register %s: %w", r.TaskID, err)
	}
	for _, t := range same {
		if sameJSON([]byte(t.registration), r.Body) {
			return false, nil
		}
	}
	if len(same) > 0 {
		return false, ErrConflict
	}
	now := s.now().Unix()
	if err := s.checkOpenBound(ctx, tx, r.From, now); err != nil {
		return false, err
	}
	labels, err := json.Marshal(nonNil(r.Labels))
	if err != nil {
		return false, fmt.Errorf("store: register: %w", err)
	}
	// (task_id, project, owner) is unique: a task of the same project and
	// owner is always within the sender's scope (the API refuses a
	// registration outside it), so a conflict here was seen above.
	var key int64
	err = s.queryRow(ctx, tx, stmtInsertTask,
		r.TaskID, r.TaskName, r.Project, r.Owner, r.Priority, r.Env,
		r.Pipeline, r.PipelineRun, r.Step, r.Orchestrator, r.K8sNamespace, r.K8sPod, r.K8sNode, r.K8sPodUID, r.K8sJobIndex,
		r.Hostname, r.StartTime, r.GPUCount, max(r.GPUCount-int64(len(r.GPUs)), 0), r.DurationEst, string(labels), string(r.Body), now, r.SubmitTime, r.From.Token, now).Scan(&key)
	if errors.Is(err, sql.ErrNoRows) {
		return false, ErrConflict
	}
	if err != nil {
		return false, fmt.Errorf("store: register %s: %w", r.TaskID, err)
	}
	if _, err := s.exec(ctx, tx, stmtInsertProjectOwner, r.Project, r.Owner); err != nil {
		return false, fmt.Errorf("store: register %s: %w", r.TaskID, err)
	}
	for i, g := range r.GPUs {
		share := g.share()
		exclusive := int64(0)
		if wholeInstance(share, g.MIG) {
			exclusive = 1
		}
		var migUUID, profile string
		var gi, ci, slices, total *int64
		if m := g.MIG; m != nil {
			migUUID, profile = m.UUID, m.Profile
			gi, ci, slices, total = &m.GPUInstanceID, m.ComputeInstanceID, m.Slices, m.TotalSlices
		}
		if _, err := s.exec(ctx, tx, stmtInsertGPU, key, i, g.Index, g.UUID, g.Model, g.MemoryTotal, r.StartTime,
			share, exclusive, migUUID, gi, ci, profile, slices, total); err != nil {
			return false, fmt.Errorf("store: register %s: gpu %d: %w", r.TaskID, i, err)
		}
		if g.UUID != "" {
			if err := s.claim(ctx, tx, r, key, i, g.UUID, now, gi, exclusive); err != nil {
				return false, err
			}
		}
	}
	if err := s.joinPending(ctx, tx, r, key); err != nil {
		return false, err
	}
	return true, nil
}

// checkOpenBound refuses a new open task or pending completion of a sender
// that already has MaxOpenPerToken of them: its tasks without a completion
// seen (by the server's receipt time) within OpenTTL, and its pending
// completions. Without a tokens file every sender is the token ”.
func (s *Store) checkOpenBound(ctx context.Context, tx *sql.Tx, from Sender, now int64) error {
	if from.Unbounded || s.maxOpen < 0 {
		return nil
	}
	since := now - int64(s.openTTL/time.Second)
	var open, pending int
	if err := s.queryRow(ctx, tx, stmtOpenOfToken, from.Token, since, s.maxOpen).Scan(&open); err != nil {
		return fmt.Errorf("store: counting open tasks: %w", err)
	}
	if open < s.maxOpen {
		if err := s.queryRow(ctx, tx, stmtPendingOfToken, from.Token, s.maxOpen-open).Scan(&pending); err != nil {
			return fmt.Errorf("store: counting pending completions: %w", err)
		}
	}
	if open+pending >= s.maxOpen {
		return fmt.Errorf("%w (%d open tasks and pending completions, the bound is %d)", ErrTooManyOpen, open+pending, s.maxOpen)
	}
	return nil
}

// claim applies "one GPU instance runs one task" for the new task's GPU at
// position i (on GPU instance gi, nil for a whole GPU; exclusive 1 when it
// holds its whole instance): open tasks that started earlier on the same
// instance lose their claim at the new task's start, and if a later task
// already claims it (this registration came late, from a spool), the new
// task's own claim ended when that one started. Which claims collide is
// claimCollides' rule (statements.go). Both are ranges of task_gpus' own
// indexes (its copy of each task's start and end), whatever the number of
// open tasks.
//
// Across scopes a live task keeps its claim: another task's claim is ended,
// or lets it end this one's, only when it is within the sender's scope or
// has not been seen for the claim grace (a later task also when it has
// completed); otherwise both claims stand, and OpenTasks serves both until
// the older one is not seen for the grace. A sender that sees every task
// (nil scope) runs the two range statements alone.
func (s *Store) claim(ctx context.Context, tx *sql.Tx, r *Registration, key int64, i int, uuid string, now int64, gi *int64, exclusive int64) error {
	c := claimArgs(gi, exclusive)
	if r.From.Scope == nil {
		if _, err := s.exec(ctx, tx, stmtEndOlderClaims, append([]any{r.StartTime, uuid, r.StartTime, key}, c...)...); err != nil {
			return fmt.Errorf("store: register %s: ending older claims: %w", r.TaskID, err)
		}
		var later sql.NullInt64
		if err := s.queryRow(ctx, tx, stmtLaterClaim, append([]any{uuid, r.StartTime, key}, c...)...).Scan(&later); err != nil {
			return fmt.Errorf("store: register %s: later claims: %w", r.TaskID, err)
		}
		if later.Valid {
			if _, err := s.exec(ctx, tx, stmtEndClaim, later.Int64, key, i); err != nil {
				return fmt.Errorf("store: register %s: %w", r.TaskID, err)
			}
		}
		return nil
	}
	stale := now - int64(s.claimGrace/time.Second)
	// yields tells whether the claim of task k gives way: within the
	// sender's scope, not seen for the grace, or (a later one) completed.
	yields := func(k int64, laterTask bool) (bool, error) {
		var project, owner string
		var seen int64
		var ended bool
		if err := s.queryRow(ctx, tx, stmtClaimTask, k).Scan(&project, &owner, &seen, &ended); err != nil {
			return false, fmt.Errorf("store: register %s: claims: %w", r.TaskID, err)
		}
		return r.From.Scope.Allows(project, owner) || seen < stale || (laterTask && ended), nil
	}
	type claimRef struct{ key, position int64 }
	var older []claimRef
	rows, err := s.query(ctx, tx, stmtOlderClaims, append([]any{uuid, r.StartTime, key}, c...)...)
	if err != nil {
		return fmt.Errorf("store: register %s: older claims: %w", r.TaskID, err)
	}
	for rows.Next() {
		var c claimRef
		if err := rows.Scan(&c.key, &c.position); err != nil {
			rows.Close()
			return fmt.Errorf("store: register %s: older claims: %w", r.TaskID, err)
		}
		older = append(older, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("store: register %s: older claims: %w", r.TaskID, err)
	}
	for _, c := range older {
		ok, err := yields(c.key, false)
		if err != nil {
			return err
		}
		if ok {
			if _, err := s.exec(ctx, tx, stmtEndClaim, r.StartTime, c.key, c.position); err != nil {
				return fmt.Errorf("store: register %s: ending older claims: %w", r.TaskID, err)
			}
		}
	}
	type laterRef struct{ key, start int64 }
	var later []laterRef
	rows, err = s.query(ctx, tx, stmtLaterClaims, append([]any{uuid, r.StartTime, key}, c...)...)
	if err != nil {
		return fmt.Errorf("store: register %s: later claims: %w", r.TaskID, err)
	}
	for rows.Next() {
		var l laterRef
		if err := rows.Scan(&l.key, &l.start); err != nil {
			rows.Close()
			return fmt.Errorf("store: register %s: later claims: %w", r.TaskID, err)
		}
		later = append(later, l)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("store: register %s: later claims: %w", r.TaskID, err)
	}
	for _, l := range later {
		ok, err := yields(l.key, true)
		if err != nil {
			return err
		}
		if ok {
			if _, err := s.exec(ctx, tx, stmtEndClaim, l.start, key, i); err != nil {
				return fmt.Errorf("store: register %s: %w", r.TaskID, err)
			}
			break
		}
	}
	return nil
}

// claimArgs are the arguments of the claim statements' collision rule
// (claimCollides) for a new claim on GPU instance gi (nil: a whole GPU)
// that holds its whole instance when exclusive is 1.
func claimArgs(gi *int64, exclusive int64) []any {
	g := int64(-1)
	if gi != nil {
		g = *gi
	}
	return []any{g, exclusive, g, g, exclusive}
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

// joinPending applies the earliest completion that came before this
// registration from a sender whose scope covers it. Those of other scopes
// stay where they are: never joined, never lost. One whose times do not fit
// the registration is not joined either, and is logged.
func (s *Store) joinPending(ctx context.Context, tx *sql.Tx, r *Registration, key int64) error {
	rows, err := s.query(ctx, tx, stmtPendingCompletions, r.TaskID)
	if err != nil {
		return fmt.Errorf("store: register %s: pending completion: %w", r.TaskID, err)
	}
	var body, scopeJSON string
	var received int64
	found := false
	for !found && rows.Next() {
		if err := rows.Scan(&body, &scopeJSON, &received); err != nil {
			rows.Close()
			return fmt.Errorf("store: register %s: pending completion: %w", r.TaskID, err)
		}
		var scope *access.Scope
		if scopeJSON != "" {
			scope = new(access.Scope)
			if err := json.Unmarshal([]byte(scopeJSON), scope); err != nil {
				rows.Close()
				return fmt.Errorf("store: register %s: pending completion's scope: %w", r.TaskID, err)
			}
		}
		found = scope.Allows(r.Project, r.Owner)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("store: register %s: pending completion: %w", r.TaskID, err)
	}
	if !found {
		return nil
	}
	var w wire.Completion
	if err := json.Unmarshal([]byte(body), &w); err != nil {
		// The API checked it before keeping it; should that check ever
		// have let through what this decoder refuses, the registration
		// must still be stored, and the completion stays where it is.
		return nil
	}
	c := *CompletionOf(&w)
	// The completion's end was clamped to its receipt when it came (a
	// skewed clock); the body keeps what was sent.
	c.EndTime = min(c.EndTime, received)
	if err := completionFits(&c, r.StartTime); err != nil {
		s.log.Warn("a pending completion does not fit its registration: not joined", "task_id", r.TaskID,
			"project", r.Project, "owner", r.Owner, "err", err.Error())
		return nil
	}
	if err := s.applyCompletion(ctx, tx, key, &c, []byte(body), received); err != nil {
		return err
	}
	_, err = s.exec(ctx, tx, stmtDeletePending, r.TaskID, scopeJSON)
	return err
}

// completionFits checks a completion's times against its task's start:
// the end is not before the start, nor later than the start plus the
// duration plus an hour (no real run reports that).
func completionFits(c *Completion, start int64) error {
	if c.EndTime < start {
		return &BadCompletionError{"end_time", fmt.Sprintf("%d is before the task's start_time %d", c.EndTime, start)}
	}
	if float64(c.EndTime) > float64(start)+c.DurationSeconds+3600 {
		return &BadCompletionError{"end_time", fmt.Sprintf("%d is later than the task's start_time %d + duration_seconds %g + 1h",
			c.EndTime, start, c.DurationSeconds)}
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

// Complete stores a completion of the task under its task_id that the
// sender sees. With none, the completion is kept as pending for the
// sender's scope (one per task_id and scope) and joined by Register; with
// several, the one whose start_time equals the completion's is completed,
// and none matching is ErrStartMismatch. A different completion of a
// completed (or pending) task is ErrConflict; the first is kept. Times that
// do not fit the task are a *BadCompletionError; a new pending completion
// past the sender's bound is ErrTooManyOpen.
func (s *Store) Complete(ctx context.Context, c *Completion, body []byte, from Sender) (CompleteResult, error) {
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
func (s *Store) completeTx(ctx context.Context, tx *sql.Tx, c *Completion, body []byte, from Sender) (_ CompleteResult, wrote bool, _ error) {
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

func (s *Store) completePending(ctx context.Context, tx *sql.Tx, c *Completion, body []byte, from Sender, now int64) (CompleteResult, bool, error) {
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
func (s *Store) applyCompletion(ctx context.Context, tx *sql.Tx, key int64, c *Completion, body []byte, receivedAt int64) error {
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
		key); err != nil {
		return fmt.Errorf("store: complete %s: %w", c.TaskID, err)
	}
	if _, err := s.exec(ctx, tx, stmtCompleteGPUs, c.EndTime, key); err != nil {
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

// Heartbeat moves the last-seen time of every open task under taskID
// within scope forward to at (never back), and records the server's
// receipt time as when they were last seen; a completed task's heartbeat
// changes nothing. ErrNotFound when there is no such task within scope: a
// caller outside the scope learns nothing about the task.
//
// On SQLite heartbeats are written in the batcher's group commits (fifty
// clients must not queue for a fsync each); on PostgreSQL they are
// statements outside a transaction, as a heartbeat never races with
// anything it could corrupt (it only moves last_seen and seen_at forward).
func (s *Store) Heartbeat(ctx context.Context, taskID string, at int64, scope *access.Scope) error {
	if scope == nil {
		return s.heartbeatAll(ctx, taskID, at)
	}
	op := func(ctx context.Context, read, write querier) (bool, error) {
		same, err := s.visible(ctx, read, taskID, scope)
		if err != nil {
			return false, fmt.Errorf("store: heartbeat %s: %w", taskID, err)
		}
		if len(same) == 0 {
			return false, ErrNotFound
		}
		now := s.now().Unix()
		for _, t := range same {
			if _, err := s.exec(ctx, write, stmtHeartbeat, at, at, now, now, t.key); err != nil {
				return false, fmt.Errorf("store: heartbeat %s: %w", taskID, err)
			}
		}
		return true, nil
	}
	if s.batch != nil {
		// Several tasks under one id are several statements: a savepoint.
		return s.batch.run(ctx, "heartbeat "+taskID, false, func(ctx context.Context, tx *sql.Tx) (bool, error) {
			return op(ctx, tx, tx)
		})
	}
	_, err := op(ctx, s.r, s.w)
	return err
}

// heartbeatAll is Heartbeat for a sender that sees every task: one
// statement updates every open task under taskID. Only when it updated
// none does a second one tell a completed task (nothing to do, no error)
// from no task (ErrNotFound). On SQLite the statement runs in the
// batcher's group commit without a savepoint (a failing statement undoes
// itself); on PostgreSQL the heartbeats waiting together are one
// statement in autocommit (hbBatcher): one round trip, one commit.
func (s *Store) heartbeatAll(ctx context.Context, taskID string, at int64) error {
	op := func(ctx context.Context, q querier) (bool, error) {
		now := s.now().Unix()
		res, err := s.exec(ctx, q, stmtHeartbeatTaskID, at, at, now, now, taskID)
		if err != nil {
			return false, fmt.Errorf("store: heartbeat %s: %w", taskID, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return false, fmt.Errorf("store: heartbeat %s: %w", taskID, err)
		}
		if n > 0 {
			return true, nil
		}
		var stored int64
		if err := s.queryRow(ctx, q, stmtTaskIDStored, taskID).Scan(&stored); err != nil {
			return false, fmt.Errorf("store: heartbeat %s: %w", taskID, err)
		}
		if stored == 0 {
			return false, ErrNotFound
		}
		return false, nil // completed: answered and ignored
	}
	if s.hb != nil {
		return s.hb.run(ctx, taskID, at)
	}
	return s.batch.run(ctx, "heartbeat "+taskID, true, func(ctx context.Context, tx *sql.Tx) (bool, error) {
		return op(ctx, tx)
	})
}

func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}
