package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
)

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
func (s *Store) claim(ctx context.Context, tx *sql.Tx, r *registering, key int64, i int, uuid string, now int64, gi *int64, exclusive int64) error {
	c := claimArgs(gi, exclusive)
	if r.from.Scope == nil {
		if _, err := s.exec(ctx, tx, stmtEndOlderClaims, append([]any{r.start, uuid, r.start, key}, c...)...); err != nil {
			return fmt.Errorf("store: register %s: ending older claims: %w", r.TaskID, err)
		}
		var later sql.NullInt64
		if err := s.queryRow(ctx, tx, stmtLaterClaim, append([]any{uuid, r.start, key}, c...)...).Scan(&later); err != nil {
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
		return r.from.Scope.Allows(project, owner) || seen < stale || (laterTask && ended), nil
	}
	// endYielding ends, for each claim of st (a task key and a second
	// column) that yields, the claim end names; a later claim that yields
	// ends the new task's own, so only the first one counts.
	endYielding := func(st *stmt, later bool, what string, end func(p [2]int64) []any) error {
		claims, err := s.pairs(ctx, tx, st, append([]any{uuid, r.start, key}, c...)...)
		if err != nil {
			return fmt.Errorf("store: register %s: %s claims: %w", r.TaskID, what, err)
		}
		for _, p := range claims {
			ok, err := yields(p[0], later)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			if _, err := s.exec(ctx, tx, stmtEndClaim, end(p)...); err != nil {
				return fmt.Errorf("store: register %s: ending %s claims: %w", r.TaskID, what, err)
			}
			if later {
				break
			}
		}
		return nil
	}
	// Older claims: (task key, position), each ended at the new start.
	if err := endYielding(stmtOlderClaims, false, "older", func(p [2]int64) []any { return []any{r.start, p[0], p[1]} }); err != nil {
		return err
	}
	// Later claims: (task key, start_time): the new claim ends at that start.
	return endYielding(stmtLaterClaims, true, "later", func(p [2]int64) []any { return []any{p[1], key, i} })
}

// pairs runs a statement of two integer columns and returns its rows.
func (s *Store) pairs(ctx context.Context, q querier, st *stmt, args ...any) ([][2]int64, error) {
	return stmtRows(ctx, s, q, "claims", st, func(rows *sql.Rows, p *[2]int64) error {
		return rows.Scan(&p[0], &p[1])
	}, args...)
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

// shareOf is a registered GPU's share as the store keeps it: slices /
// total_slices for MIG, else the registration's share, else 1.
func shareOf(g wire.RegisteredGPU) float64 {
	if m := g.MIG; m != nil && m.Slices != nil && m.TotalSlices != nil && *m.TotalSlices > 0 && *m.Slices > 0 {
		return float64(*m.Slices) / float64(*m.TotalSlices)
	}
	if g.Share != nil && *g.Share > 0 {
		return *g.Share
	}
	return 1
}
