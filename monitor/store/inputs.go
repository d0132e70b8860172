package store

import (
	"context"
	"database/sql"
	"fmt"
)

// ServingInputs are the inputs that change figures, as a serving replica
// loaded them: each file's SHA-256 ("" for none) and the split rule
// (MONITOR.md section 20.12).
type ServingInputs struct {
	Replica                                 string
	PricesSHA256, BudgetsSHA256, Namespaces string
	Split                                   string
	RecordedAt                              int64
}

var (
	stmtRecordInputs = &stmt{sql: `INSERT INTO serving_inputs (replica, prices_sha256, budgets_sha256, namespaces_sha256, split, recorded_at)
		VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (replica) DO UPDATE SET prices_sha256 = excluded.prices_sha256,
		budgets_sha256 = excluded.budgets_sha256, namespaces_sha256 = excluded.namespaces_sha256, split = excluded.split,
		recorded_at = excluded.recorded_at`,
		postgresIndex: "serving_inputs_pkey", example: []any{"r", "a", "b", "c", "s", int64(1)}}
	// The table holds a row per replica that ever served: a full read.
	stmtLiveInputs = &stmt{sql: `SELECT replica, prices_sha256, budgets_sha256, namespaces_sha256, split, recorded_at FROM serving_inputs
		WHERE recorded_at >= ? ORDER BY replica`,
		fullScan: "a row per replica that ever served: a handful", example: []any{int64(1)}}
	stmtForgetInputs = &stmt{sql: `DELETE FROM serving_inputs WHERE replica = ?`,
		sqliteIndex: "sqlite_autoindex_serving_inputs_1", postgresIndex: "serving_inputs_pkey", example: []any{"r"}}
)

// RecordInputs records (or refreshes: the heartbeat) a replica's inputs.
func (s *Store) RecordInputs(ctx context.Context, in ServingInputs) error {
	_, err := s.exec(ctx, s.w, stmtRecordInputs, in.Replica, in.PricesSHA256, in.BudgetsSHA256, in.Namespaces, in.Split,
		in.RecordedAt)
	if err != nil {
		return fmt.Errorf("store: serving inputs: %w", err)
	}
	return nil
}

// LiveInputs are the inputs of the replicas heard from since since.
func (s *Store) LiveInputs(ctx context.Context, since int64) ([]ServingInputs, error) {
	return stmtRows(ctx, s, s.r, "serving inputs", stmtLiveInputs, func(rows *sql.Rows, in *ServingInputs) error {
		return rows.Scan(&in.Replica, &in.PricesSHA256, &in.BudgetsSHA256, &in.Namespaces, &in.Split, &in.RecordedAt)
	}, since)
}

// ForgetInputs removes a replica's record: it stopped serving.
func (s *Store) ForgetInputs(ctx context.Context, replica string) error {
	if _, err := s.exec(ctx, s.w, stmtForgetInputs, replica); err != nil {
		return fmt.Errorf("store: serving inputs: %w", err)
	}
	return nil
}
