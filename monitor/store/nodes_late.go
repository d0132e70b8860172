package store

import (
	"context"
	"database/sql"
	"fmt"
)

// stmtReportCut reads the latest report time of any node, from the end of
// nodes_last_time (migration 0015).
var stmtReportCut = &stmt{sql: `SELECT MAX(last_time) FROM nodes`,
	sqliteIndex: "nodes_last_time", postgresIndex: "nodes_last_time", example: []any{}}

// ReportCut is the latest node report time the store holds (MONITOR.md
// 20.14): a statement closed now includes the node reports up to it, and
// one stored later is late data (observed_after_close). nil without node
// reports.
func (s *Store) ReportCut(ctx context.Context) (*int64, error) {
	var cut sql.NullInt64
	if err := s.queryRow(ctx, s.r, stmtReportCut).Scan(&cut); err != nil {
		return nil, fmt.Errorf("store: the statement's report cut: %w", err)
	}
	if !cut.Valid {
		return nil, nil
	}
	return &cut.Int64, nil
}
