package store

// Who closed and reopened a month and why, and the FOCUS exports kept with
// each statement (migration 0014; docs/cost.md, "For finance").

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

var (
	stmtSetCloseReason = &stmt{sql: "UPDATE statements SET close_reason = ? WHERE month = ? AND version = ?",
		sqliteIndex: "sqlite_autoindex_statements_1", postgresIndex: "statements_pkey", example: []any{"r", "2026-11", int64(1)}}
	stmtReopenBecause = &stmt{sql: `UPDATE statements SET reopened_at = ?, reopened_by = ?, reopen_reason = ?
		WHERE month = ? AND version = ? AND reopened_at IS NULL`,
		sqliteIndex: "sqlite_autoindex_statements_1", postgresIndex: "statements_pkey", example: []any{int64(1), "a", "r", "2026-11", int64(1)}}
	stmtStatementNotes = &stmt{sql: "SELECT month, version, close_reason, reopen_reason FROM statements ORDER BY month, version",
		fullScan: "every version's notes: the list is the answer"}
	stmtExport = &stmt{sql: "SELECT body, sha256 FROM statement_exports WHERE month = ? AND version = ? AND format = ?",
		sqliteIndex: "sqlite_autoindex_statement_exports_1", postgresIndex: "statement_exports_pkey", example: []any{"2026-11", int64(1), "csv"}}
	stmtPutExport = &stmt{sql: `INSERT INTO statement_exports (month, version, format, body, sha256) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (month, version, format) DO NOTHING`,
		postgresIndex: "statement_exports_pkey", example: []any{"2026-11", int64(1), "csv", "", "x"}}
)

// Notes are why a statement version was closed and reopened.
type Notes struct {
	CloseReason, ReopenReason string
}

// SetCloseReason records why version of month was closed.
func (s *Store) SetCloseReason(ctx context.Context, month string, version int, reason string) error {
	if _, err := s.exec(ctx, s.w, stmtSetCloseReason, reason, month, version); err != nil {
		return fmt.Errorf("store: close reason %s: %w", month, err)
	}
	return nil
}

// ReopenMonthBecause is ReopenMonth with the reason recorded beside who, in
// one statement: a version reopened meanwhile by someone else is not
// reopened twice (ErrNotClosed).
func (s *Store) ReopenMonthBecause(ctx context.Context, month, by, reason string) (*Closed, error) {
	return s.reopen(ctx, month, by, stmtReopenBecause, reason)
}

// StatementNotes are every statement version's notes, keyed by
// NotesKey(month, version).
func (s *Store) StatementNotes(ctx context.Context) (map[string]Notes, error) {
	rows, err := s.query(ctx, s.r, stmtStatementNotes)
	if err != nil {
		return nil, fmt.Errorf("store: statement notes: %w", err)
	}
	defer rows.Close()
	out := map[string]Notes{}
	if err := eachRow(rows, "statement notes", func() error {
		var month string
		var version int
		var n Notes
		if err := rows.Scan(&month, &version, &n.CloseReason, &n.ReopenReason); err != nil {
			return err
		}
		out[NotesKey(month, version)] = n
		return nil
	}); err != nil {
		return nil, err
	}
	return out, nil
}

// NotesKey is the key of a version's notes.
func NotesKey(month string, version int) string { return fmt.Sprintf("%s/%d", month, version) }

// StatementExport returns a statement's stored export in format, or ok
// false when none is stored.
func (s *Store) StatementExport(ctx context.Context, month string, version int, format string) (body []byte, sha string, ok bool, err error) {
	var text string
	err = s.queryRow(ctx, s.r, stmtExport, month, version, format).Scan(&text, &sha)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, "", false, nil
	}
	if err != nil {
		return nil, "", false, fmt.Errorf("store: export %s version %d: %w", month, version, err)
	}
	return []byte(text), sha, true, nil
}

// PutStatementExport stores a statement's export unless one is stored
// already (the first is kept: every export of a closed month is the same
// bytes); it returns the export stored.
func (s *Store) PutStatementExport(ctx context.Context, month string, version int, format string, body []byte, sha string) ([]byte, string, error) {
	if _, err := s.exec(ctx, s.w, stmtPutExport, month, version, format, string(body), sha); err != nil {
		return nil, "", fmt.Errorf("store: export %s version %d: %w", month, version, err)
	}
	got, gotSHA, ok, err := s.StatementExport(ctx, month, version, format)
	if err != nil {
		return nil, "", err
	}
	if !ok {
		return nil, "", fmt.Errorf("store: export %s version %d: not stored", month, version)
	}
	return got, gotSHA, nil
}
