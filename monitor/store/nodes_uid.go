package store

import (
	"context"
	"database/sql"
	"errors"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
)

// A Node object deleted and recreated under its name is another machine
// (NODE.md 12.10): the cluster names its UID in the node agent's reviewed
// token, nodes.node_uid keeps the last one (migration 0016), and a report
// of another UID ends the old machine's GPU lives and conflicts where the
// new one's first span starts, so that the old GPUs are not capacity of
// the new node and a GPU that moved with its card may be reported by its
// new node. Static node tokens name no UID and change nothing.
var (
	stmtNodeUID = &stmt{sql: "SELECT node_uid FROM nodes WHERE node = ?",
		sqliteIndex: "sqlite_autoindex_nodes_1", postgresIndex: "nodes_pkey", example: []any{"n"}}
	// setNodeUID: after the report's upsert of its nodes row.
	stmtSetNodeUID = &stmt{sql: "UPDATE nodes SET node_uid = ? WHERE node = ?",
		sqliteIndex: "sqlite_autoindex_nodes_1", postgresIndex: "nodes_pkey", example: []any{"u", "n"}}
)

// replacedNode ends the lives and conflicts of the machine that reported
// as r.Node before, when the report's Node UID uid is not the stored one,
// at the start of the part of r no stored report covers (setNodeUID
// records uid once r is stored). A report already stored (a resend) changes nothing: nodeReportTx
// answers it as it is.
func (s *Store) replacedNode(ctx context.Context, tx *sql.Tx, r *wire.NodeReport, uid string) error {
	if uid == "" {
		return nil
	}
	var stored sql.NullString
	switch err := s.queryRow(ctx, tx, stmtNodeUID, r.Node).Scan(&stored); {
	case errors.Is(err, sql.ErrNoRows):
		return nil // the node's first report
	case err != nil:
		return err
	case stored.String == "" || stored.String == uid:
		// "": the node reported with a static token before, or before
		// migration 0016; the same machine as far as the store knows.
		return nil
	}
	var body string
	switch err := s.queryRow(ctx, tx, stmtNodeReportStored, r.Node, r.Time).Scan(&body); {
	case err == nil:
		return nil
	case !errors.Is(err, sql.ErrNoRows):
		return err
	}
	start, end := r.Time-r.IntervalSeconds, r.Time
	spans, err := s.nodeSpans(ctx, tx, r.Node, start, end)
	if err != nil {
		return err
	}
	// The kept start nodeReportTx computes next: the new machine's lives
	// begin there.
	at, _ := uncovered(start, end, firmSpans(spans))
	if _, err := s.exec(ctx, tx, stmtEndLives, at, at, r.Node); err != nil {
		return err
	}
	if _, err := s.exec(ctx, tx, stmtResolveHeld, at, r.Node); err != nil {
		return err
	}
	_, err = s.exec(ctx, tx, stmtResolveConflicting, at, r.Node)
	return err
}

// setNodeUID records the UID of a stored report's sender ("": a static
// token, the stored one is kept).
func (s *Store) setNodeUID(ctx context.Context, tx *sql.Tx, node, uid string) error {
	if uid == "" {
		return nil
	}
	_, err := s.exec(ctx, tx, stmtSetNodeUID, uid, node)
	return err
}
