package store

import (
	"context"
	"database/sql"
	"fmt"
)

// stmtReportCut reads the latest report time of every node: one row per
// node, read once per close, so a scan of nodes is the plan.
var stmtReportCut = &stmt{sql: `SELECT MAX(last_time) FROM nodes`, example: []any{}}

func init() { nodeStatements["report cut"] = stmtReportCut }

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
