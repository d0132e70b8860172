package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/access"
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
	all, err := stmtRows(ctx, s, q, "tasks of "+taskID, stmtSameID, func(rows *sql.Rows, t *sameID) error {
		return rows.Scan(&t.key, &t.project, &t.owner, &t.startTime, &t.registration, &t.completion)
	}, taskID)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(all, func(t sameID) bool { return !scope.Allows(t.project, t.owner) }), nil
}

// registering is a registration being stored: the decoded body, the body
// as sent (a later registration of the same task_id is "the same" when its
// body is the same JSON value), the sender (the tasks its scope sees under
// the task_id decide between new, the same and a conflict, and which older
// claims on a GPU this registration may end) and its start_time.
type registering struct {
	*wire.Registration
	body  []byte
	from  Sender
	start int64
}

// Register stores a registration (decoded and checked by
// wire.DecodeRegistration), with its body as sent and its sender. A GPU
// without an index is at its position; its share is shareOf's. created is true when the task is new to
// the sender: no task under its task_id is within the sender's scope. When
// the sender sees tasks under it, a registration whose body is the same JSON
// value as one of theirs returns false and nil, else ErrConflict, leaving
// the stored ones as they were. A new task past the sender's bound of open
// tasks is ErrTooManyOpen. The earliest completion waiting for this task_id
// whose sender's scope covers the registration is joined.
func (s *Store) Register(ctx context.Context, w *wire.Registration, body []byte, from Sender) (created bool, err error) {
	r := &registering{Registration: w, body: body, from: from, start: valueOf(w.StartTime)}
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
func (s *Store) registerTx(ctx context.Context, tx *sql.Tx, r *registering) (created bool, err error) {
	same, err := s.visible(ctx, tx, r.TaskID, r.from.Scope)
	if err != nil {
		return false, fmt.Errorf("store: register %s: %w", r.TaskID, err)
	}
	for _, t := range same {
		if sameJSON([]byte(t.registration), r.body) {
			return false, nil
		}
	}
	if len(same) > 0 {
		return false, ErrConflict
	}
	now := s.now().Unix()
	if err := s.checkOpenBound(ctx, tx, r.from, now); err != nil {
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
		r.Pipeline, r.PipelineRun, r.Step, r.Orchestrator, r.K8sNamespace, r.K8sPod, r.K8sNode, r.K8sPodUID, r.K8sJobIndex, r.SlurmJob,
		r.Hostname, r.start, r.Count(), max(r.Count()-int64(len(r.GPUs)), 0), r.DurationEst, string(labels), string(r.body), now, r.SubmitTime, r.from.Token, now).Scan(&key)
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
		share := shareOf(g)
		exclusive := int64(0)
		if wholeInstance(share, g.MIG) {
			exclusive = 1
		}
		var migUUID, profile string
		var gi, ci, slices, total *int64
		if m := g.MIG; m != nil {
			migUUID, profile = m.UUID, m.Profile
			instance := valueOf(m.GPUInstanceID)
			gi, ci, slices, total = &instance, m.ComputeInstanceID, m.Slices, m.TotalSlices
		}
		index := int64(i)
		if g.Index != nil {
			index = *g.Index
		}
		if _, err := s.exec(ctx, tx, stmtInsertGPU, key, i, index, g.UUID, g.Name, g.MemoryTotalBytes, r.start,
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
		return &TooManyOpenError{Count: open + pending, Bound: s.maxOpen}
	}
	return nil
}

// joinPending applies the earliest completion that came before this
// registration from a sender whose scope covers it. Those of other scopes
// stay where they are: never joined, never lost. One whose times do not fit
// the registration is not joined either, and is logged.
func (s *Store) joinPending(ctx context.Context, tx *sql.Tx, r *registering, key int64) error {
	rows, err := s.query(ctx, tx, stmtPendingCompletions, r.TaskID)
	if err != nil {
		return fmt.Errorf("store: register %s: pending completion: %w", r.TaskID, err)
	}
	var body, scopeJSON string
	var received int64
	found := false
	err = firstRow(rows, "register "+r.TaskID+": pending completion", func() (bool, error) {
		if err := rows.Scan(&body, &scopeJSON, &received); err != nil {
			return false, err
		}
		var scope *access.Scope
		if scopeJSON != "" {
			scope = new(access.Scope)
			if err := json.Unmarshal([]byte(scopeJSON), scope); err != nil {
				return false, fmt.Errorf("scope: %w", err)
			}
		}
		found = scope.Allows(r.Project, r.Owner)
		return found, nil
	})
	if err != nil {
		return err
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
	// The completion's end was clamped to its receipt when it came (a
	// skewed clock); the body keeps what was sent.
	end := min(valueOf(w.EndTime), received)
	w.EndTime = &end
	if err := completionFits(&w, r.start); err != nil {
		s.log.Warn("a pending completion does not fit its registration: not joined", "task_id", r.TaskID,
			"project", r.Project, "owner", r.Owner, "err", err.Error())
		return nil
	}
	if err := s.applyCompletion(ctx, tx, key, &w, []byte(body), received); err != nil {
		return err
	}
	_, err = s.exec(ctx, tx, stmtDeletePending, r.TaskID, scopeJSON)
	return err
}

// nonNil is m, or an empty map for nil (labels stored as {}, never null).
func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}
