package store

// Retention of the day and month facts: a day or month wholly before the
// retention's cutoff goes with its hours (trimNodeHours), one bucket a
// transaction; a bucket reaching past the cutoff stays whole.

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

var (
	stmtNextFactDay = &stmt{sql: "SELECT MIN(day) FROM node_gpu_days WHERE day >= ? AND day <= ?",
		sqliteIndex: "sqlite_autoindex_node_gpu_days_1", postgresIndex: "node_gpu_days_pkey", example: []any{int64(0), int64(1700000000)}}
	stmtNextFactMonth = &stmt{sql: "SELECT MIN(month) FROM node_gpu_months WHERE month >= ? AND month <= ?",
		sqliteIndex: "sqlite_autoindex_node_gpu_months_1", postgresIndex: "node_gpu_months_pkey", example: []any{int64(0), int64(1700000000)}}
	stmtTrimGPUDays = &stmt{sql: "DELETE FROM node_gpu_days WHERE day = ?",
		sqliteIndex: "sqlite_autoindex_node_gpu_days_1", postgresIndex: "node_gpu_days_pkey", example: []any{int64(1700000000)}}
	stmtTrimUserDays = &stmt{sql: "DELETE FROM node_user_days WHERE day = ?",
		sqliteIndex: "sqlite_autoindex_node_user_days_1", postgresIndex: "node_user_days_pkey", example: []any{int64(1700000000)}}
	stmtTrimGPUMonths = &stmt{sql: "DELETE FROM node_gpu_months WHERE month = ?",
		sqliteIndex: "sqlite_autoindex_node_gpu_months_1", postgresIndex: "node_gpu_months_pkey", example: []any{int64(1700000000)}}
	stmtTrimUserMonths = &stmt{sql: "DELETE FROM node_user_months WHERE month = ?",
		sqliteIndex: "sqlite_autoindex_node_user_months_1", postgresIndex: "node_user_months_pkey", example: []any{int64(1700000000)}}
)

// trimFacts deletes the day facts of the days and the month facts of the
// months ending at or before cutoff.
func (s *Store) trimFacts(ctx context.Context, cutoff int64, res *TrimResult) error {
	grains := []struct {
		next, gpu, user *stmt
		last            int64 // the latest start of a bucket ending by cutoff
	}{
		{stmtNextFactDay, stmtTrimGPUDays, stmtTrimUserDays, cutoff - 86400},
		// A month starting before the cutoff's own month's start ends by
		// the cutoff.
		{stmtNextFactMonth, stmtTrimGPUMonths, stmtTrimUserMonths, monthOf(cutoff) - 1},
	}
	for _, g := range grains {
		from := int64(0)
		for {
			var b sql.NullInt64
			if err := s.queryRow(ctx, s.r, g.next, from, g.last).Scan(&b); err != nil {
				return fmt.Errorf("store: retention: facts: %w", err)
			}
			if !b.Valid {
				break
			}
			tx, err := s.w.BeginTx(ctx, nil)
			if err != nil {
				return fmt.Errorf("store: retention: %w", err)
			}
			start := time.Now()
			for _, st := range []*stmt{g.gpu, g.user} {
				if _, err := s.exec(ctx, tx, st, b.Int64); err != nil {
					tx.Rollback()
					return fmt.Errorf("store: retention: facts: %w", err)
				}
			}
			if err := tx.Commit(); err != nil {
				return fmt.Errorf("store: retention: %w", err)
			}
			res.Batches++
			res.LongestHold = max(res.LongestHold, time.Since(start))
			from = b.Int64 + 1
		}
	}
	return nil
}
