package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
)

// NodeSeen is a node's latest report time, as /metrics ages it.
type NodeSeen struct {
	Node            string
	LastTime        int64
	IntervalSeconds int64
}

// The reads of the nodes' latest reports (/metrics). Each names what
// serves it.
var (
	// The nodes table whole, no index (one row per node that ever
	// reported: the list is the answer), without the reports' bodies;
	// retired nodes and nodes silent since before the given time left out.
	stmtNodesSeen = &stmt{sql: `SELECT node, last_time, interval_seconds FROM nodes
		WHERE retired_at IS NULL AND last_time >= ? ORDER BY node`,
		fullScan: "one row per node that ever reported: the list is the answer", example: []any{int64(1)}}
	// One node's latest report, by the primary key.
	stmtNodeLatest = &stmt{sql: "SELECT last_time, latest FROM nodes WHERE node = ?",
		sqliteIndex: "sqlite_autoindex_nodes_1", postgresIndex: "nodes_pkey", example: []any{"n"}}
)

// NodesSeen lists the nodes not retired whose latest report's time is at
// least since, by name.
func (s *Store) NodesSeen(ctx context.Context, since int64) ([]NodeSeen, error) {
	return stmtRows(ctx, s, s.r, "nodes seen", stmtNodesSeen, func(rows *sql.Rows, n *NodeSeen) error {
		return rows.Scan(&n.Node, &n.LastTime, &n.IntervalSeconds)
	}, since)
}

// LatestNodeReport returns node's latest stored report (ErrUnknownNode
// when it never reported).
func (s *Store) LatestNodeReport(ctx context.Context, node string) (*wire.NodeReport, error) {
	var t int64
	var body string
	switch err := s.queryRow(ctx, s.r, stmtNodeLatest, node).Scan(&t, &body); {
	case errors.Is(err, sql.ErrNoRows):
		return nil, fmt.Errorf("%w: %s", ErrUnknownNode, node)
	case err != nil:
		return nil, fmt.Errorf("store: latest report of %s: %w", node, err)
	}
	var r wire.NodeReport
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		return nil, fmt.Errorf("store: the latest report of %s at %d: %w", node, t, err)
	}
	return &r, nil
}

// IdentityOf is a report's user as the ledger keys it.
func IdentityOf(u *wire.NodeUser) UserIdentity { return identityOf(u) }
