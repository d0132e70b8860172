package store

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/access"
)

// Heartbeat moves the last-seen time of every open task under taskID
// within scope forward to at (never back), and records the server's
// receipt time as when they were last seen. When none of them is open,
// the newest one's last_seen moves (a completed task's counted end is
// max(end_time, last_seen)), nothing else of it. ErrNotFound when there
// is no such task within scope: a caller outside the scope learns nothing
// about the task.
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
		var open int64
		for _, t := range same {
			res, err := s.exec(ctx, write, stmtHeartbeat, at, at, now, now, t.key)
			if err != nil {
				return false, fmt.Errorf("store: heartbeat %s: %w", taskID, err)
			}
			n, err := res.RowsAffected()
			if err != nil {
				return false, fmt.Errorf("store: heartbeat %s: %w", taskID, err)
			}
			open += n
		}
		if open == 0 {
			// All completed: the newest (visible lists the oldest first).
			if _, err := s.exec(ctx, write, stmtHeartbeatDone, at, at, same[len(same)-1].key); err != nil {
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
// none does a second one move the newest completed task's last_seen, or
// find no task (ErrNotFound). On SQLite the statement runs in the
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
		res, err = s.exec(ctx, q, stmtHeartbeatDoneTaskID, at, at, taskID)
		if err != nil {
			return false, fmt.Errorf("store: heartbeat %s: %w", taskID, err)
		}
		if n, err = res.RowsAffected(); err != nil {
			return false, fmt.Errorf("store: heartbeat %s: %w", taskID, err)
		}
		if n == 0 {
			return false, ErrNotFound
		}
		return true, nil // completed: its last_seen moved
	}
	if s.hb != nil {
		return s.hb.run(ctx, taskID, at)
	}
	return s.batch.run(ctx, "heartbeat "+taskID, true, func(ctx context.Context, tx *sql.Tx) (bool, error) {
		return op(ctx, tx)
	})
}
