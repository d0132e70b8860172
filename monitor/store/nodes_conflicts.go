package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
)

// The conflicts of GPU UUIDs between nodes (NODE.md 12.3; nodes.go).
var (
	// upsertConflict: a conflicting report's GPU, its time and kept
	// seconds added (a resolved conflict that comes back is open again).
	stmtUpsertConflict = &stmt{sql: `INSERT INTO node_gpu_conflicts (node, uuid, held_by, first_time, last_time, observed_s)
		VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (node, uuid, held_by) DO UPDATE SET
		first_time = CASE WHEN node_gpu_conflicts.resolved_at IS NOT NULL OR excluded.first_time < node_gpu_conflicts.first_time
			THEN excluded.first_time ELSE node_gpu_conflicts.first_time END,
		last_time = CASE WHEN node_gpu_conflicts.resolved_at IS NOT NULL OR excluded.last_time > node_gpu_conflicts.last_time
			THEN excluded.last_time ELSE node_gpu_conflicts.last_time END,
		observed_s = CASE WHEN node_gpu_conflicts.resolved_at IS NOT NULL THEN 0 ELSE node_gpu_conflicts.observed_s END + excluded.observed_s,
		resolved_at = NULL`,
		postgresIndex: "node_gpu_conflicts_pkey", example: []any{"n", "GPU-1", "m", int64(1), int64(1), 1.5}}
	// resolveHeld, resolveConflicting: `node retire` of the holder, of the
	// conflicting node.
	stmtResolveHeld = &stmt{sql: `UPDATE node_gpu_conflicts SET resolved_at = ? WHERE held_by = ? AND resolved_at IS NULL`,
		sqliteIndex: "node_gpu_conflicts_open", postgresIndex: "node_gpu_conflicts_open", example: []any{int64(1), "n"}}
	stmtResolveConflicting = &stmt{sql: `UPDATE node_gpu_conflicts SET resolved_at = ? WHERE node = ? AND resolved_at IS NULL`,
		sqliteIndex: "sqlite_autoindex_node_gpu_conflicts_1", postgresIndex: "node_gpu_conflicts_pkey", example: []any{int64(1), "n"}}
	// openConflicts reads every open conflict (a handful: each is an
	// alert), not part of the write path's plan tests.
	stmtOpenConflicts = &stmt{sql: `SELECT node, uuid, held_by, first_time, last_time, observed_s FROM node_gpu_conflicts
		WHERE resolved_at IS NULL ORDER BY node, uuid, held_by`, fullScan: "every open conflict: a handful, each an alert"}
)

// GPUConflicts returns the open conflicts (none resolved by `node
// retire`), by node and UUID: for /metrics (paddle_gpu_uuid_conflict) and
// the discrepancies.
func (s *Store) GPUConflicts(ctx context.Context) ([]GPUConflict, error) {
	return stmtRows(ctx, s, s.r, "GPU conflicts", stmtOpenConflicts, func(rows *sql.Rows, c *GPUConflict) error {
		return rows.Scan(&c.Node, &c.UUID, &c.HeldBy, &c.FirstTime, &c.LastTime, &c.Seconds)
	})
}

// withoutGPUs is r without the entries of the GPUs in held (r itself when
// there are none): what a report with conflicts counts.
func withoutGPUs(r *wire.NodeReport, held map[string]bool) *wire.NodeReport {
	if len(held) == 0 {
		return r
	}
	c := *r
	c.GPUs, c.Instances = nil, nil
	for _, g := range r.GPUs {
		if !held[g.UUID] {
			c.GPUs = append(c.GPUs, g)
		}
	}
	for _, in := range r.Instances {
		if !held[in.UUID] {
			c.Instances = append(c.Instances, in)
		}
	}
	return &c
}

// The provisional parts of stored spans (NODE.md 12.2; nodes.go).
var (
	stmtClipSpan = &stmt{sql: "UPDATE node_reports SET span_end = ? WHERE node = ? AND time = ?",
		sqliteIndex: "sqlite_autoindex_node_reports_1", postgresIndex: "node_reports_pkey", example: []any{int64(1), "node-1", int64(1796133600)}}
)

// clipProvisional cuts, from each stored span whose provisional tail
// (after the time it was received) overlaps the new report's kept part
// [a, b), that tail from max(received, a) on: its roll-ups are taken back
// (the same Rollup, negated) and its span ends there, so the node's own
// reports of that time count instead, once. held are the new report's
// GPUs another node holds: those of the old report were not counted
// either.
func (s *Store) clipProvisional(ctx context.Context, tx *sql.Tx, node string, spans []storedSpan, a, b int64, held map[string]bool) error {
	for _, sp := range spans {
		cut := max(sp.received, a, sp.start)
		if b <= a || cut >= sp.end || cut >= b {
			continue
		}
		var body string
		if err := s.queryRow(ctx, tx, stmtNodeReportStored, node, sp.time).Scan(&body); err != nil {
			return fmt.Errorf("reading the provisional report at %d: %w", sp.time, err)
		}
		var old wire.NodeReport
		if err := json.Unmarshal([]byte(body), &old); err != nil {
			return fmt.Errorf("the provisional report at %d: %w", sp.time, err)
		}
		gpus, users := Rollup(withoutGPUs(&old, held), cut, sp.end)
		if err := s.keepFacts(ctx, tx, gpus, users, -1); err != nil {
			return err
		}
		if _, err := s.exec(ctx, tx, stmtClipSpan, cut, node, sp.time); err != nil {
			return err
		}
	}
	return nil
}
