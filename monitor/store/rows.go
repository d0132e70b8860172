package store

import (
	"context"
	"database/sql"
	"fmt"
)

// stmtRows runs st, a statement of the registry, as Store.query runs it
// (prepared where the store prepared it), and scans each row into a T
// with scan. It is the one place that reads rows (Next, Scan, Err,
// Close), so that no read forgets rows.Err or leaks its rows; errors are
// wrapped with what ("store: what: …"). No rows: a nil slice.
func stmtRows[T any](ctx context.Context, s *Store, q querier, what string, st *stmt, scan func(*sql.Rows, *T) error, args ...any) ([]T, error) {
	rows, err := s.query(ctx, q, st, args...)
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", what, err)
	}
	return collectRows(rows, what, scan)
}

// builtRows is stmtRows for text, an instance of the template st
// (Store.queryBuilt).
func builtRows[T any](ctx context.Context, s *Store, q querier, what string, st *stmt, text string, scan func(*sql.Rows, *T) error, args ...any) ([]T, error) {
	rows, err := s.queryBuilt(ctx, q, st, text, args...)
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", what, err)
	}
	return collectRows(rows, what, scan)
}

// collectRows scans every row of rows into a T with scan and closes rows.
func collectRows[T any](rows *sql.Rows, what string, scan func(*sql.Rows, *T) error) ([]T, error) {
	var out []T
	err := eachRow(rows, what, func() error {
		var v T
		if err := scan(rows, &v); err != nil {
			return err
		}
		out = append(out, v)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// scanOne scans a row of one column into v: the scan of stmtRows for
// the reads of a list of values.
func scanOne[T any](rows *sql.Rows, v *T) error { return rows.Scan(v) }

// eachRow calls row for every row of rows (row scans it) and closes rows:
// for the reads that fold their rows into something else than a slice.
func eachRow(rows *sql.Rows, what string, row func() error) error {
	return firstRow(rows, what, func() (bool, error) { return false, row() })
}

// firstRow is eachRow for a read that stops at the first row it wants:
// row scans a row and reports whether it was that one (the rows after it
// are not read).
func firstRow(rows *sql.Rows, what string, row func() (found bool, err error)) error {
	defer rows.Close()
	for rows.Next() {
		found, err := row()
		if err != nil {
			return fmt.Errorf("store: %s: %w", what, err)
		}
		if found {
			break
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("store: %s: %w", what, err)
	}
	return nil
}
