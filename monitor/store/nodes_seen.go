package store

import (
	"context"
	"database/sql"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
)

// The tasks' statements are plan-checked with the write path's, over a
// store of tasks (TestWritePlans).
func init() {
	writeStatements["attributed seen"] = stmtAttributedSeen
	writeStatements["observed idle"] = stmtObservedIdle
}

// stmtAttributedSeen moves a task's last_seen to the last instant a node
// report attributed to it (MONITOR.md 20.3), completed or not: its counted
// end is max(end_time, last heartbeat, last attributed instant).
var stmtAttributedSeen = &stmt{sql: `UPDATE tasks SET
	last_seen = CASE WHEN last_seen IS NULL OR last_seen < ? THEN ? ELSE last_seen END
	WHERE id = ? AND (end_time IS NOT NULL OR ? = 0)`,
	sqliteIndex: "INTEGER PRIMARY KEY", postgresIndex: "tasks_pkey", example: []any{int64(2), int64(2), int64(1), int64(0)}}

// observedTasks applies report r, kept over [keptStart, keptEnd), to the
// tasks its users are tied to: each is seen to the kept span's end, never
// past now (the rest of a span from a fast clock is provisional, NODE.md
// 12.2), completed or not, from any report; and, from the node's newest
// report (newest), the open ones' idleness (docs/cost.md, "The ledger"): a
// task is idle when each of its tied users' busy_share was 0 (idle_since
// kept, or set to the report's start), busy otherwise, and it is marked as
// observed (its heartbeats no longer change idle_since).
func (s *Store) observedTasks(ctx context.Context, tx *sql.Tx, r *wire.NodeReport, newest bool, keptStart, keptEnd int64) error {
	if keptEnd <= keptStart && !newest {
		return nil
	}
	idle := map[int64]bool{}
	var order []int64
	for _, in := range r.Instances {
		if in.Samples <= 0 {
			continue
		}
		for j := range in.Users {
			u := &in.Users[j]
			id := identityOf(u)
			cands, err := s.tieCandidates(ctx, tx, r.Node, &id)
			if err != nil {
				return err
			}
			var tie *Tie
			for i := range cands {
				if cands[i].StartTime <= r.Time {
					tie = &cands[i]
				}
			}
			if tie == nil {
				continue
			}
			was, seen := idle[tie.Key]
			if !seen {
				order = append(order, tie.Key)
				was = true
			}
			idle[tie.Key] = was && u.BusyShare == 0
		}
	}
	seen := min(keptEnd, s.now().Unix())
	for _, key := range order {
		if newest {
			flag := int64(0)
			if idle[key] {
				flag = 1
			}
			if _, err := s.exec(ctx, tx, stmtObservedIdle, flag, r.Time-r.IntervalSeconds, r.Time, seen, seen, key); err != nil {
				return err
			}
		}
		if keptEnd > keptStart {
			// The open tasks moved with their idleness above when newest.
			onlyDone := int64(0)
			if newest {
				onlyDone = 1
			}
			if _, err := s.exec(ctx, tx, stmtAttributedSeen, seen, seen, key, onlyDone); err != nil {
				return err
			}
		}
	}
	return nil
}
