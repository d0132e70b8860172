package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
)

// keyMap is a group's key: the values of its key columns by name.
func keyMap(cols, vals []string) map[string]string {
	m := make(map[string]string, len(cols))
	for i, c := range cols {
		m[c] = vals[i]
	}
	return m
}

// reportQuery runs q, an instance of the registered template st written
// with the report's numbered placeholders (?1 the window's start, ?2 its
// end, ?3 the metric; Dialect.expand), on the read pool (on PostgreSQL in
// a read-only transaction with Dialect.readSettings).
func (s *Store) reportQuery(ctx context.Context, st *stmt, q string, w facts.Window, metric string) (*reportRows, error) {
	args := []any{w.From.Unix(), w.To.Unix(), metric}
	settings := s.dialect.readSettings()
	if settings == nil {
		rows, err := s.queryBuilt(ctx, s.r, st, q, args...)
		if err != nil {
			return nil, fmt.Errorf("store: report: %w", err)
		}
		return &reportRows{Rows: rows}, nil
	}
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("store: report: %w", err)
	}
	if _, err := s.exec(ctx, tx, settings); err != nil {
		tx.Rollback()
		return nil, fmt.Errorf("store: report: %w", err)
	}
	rows, err := s.queryBuilt(ctx, tx, st, q, args...)
	if err != nil {
		tx.Rollback()
		return nil, fmt.Errorf("store: report: %w", err)
	}
	return &reportRows{Rows: rows, tx: tx}, nil
}

// reportRows are a report statement's rows; Close ends the transaction
// they were read in, if any (PostgreSQL's, for its read settings).
type reportRows struct {
	*sql.Rows
	tx *sql.Tx
}

func (r *reportRows) Close() error {
	err := r.Rows.Close()
	if r.tx != nil {
		err = errors.Join(err, r.tx.Rollback())
		r.tx = nil
	}
	return err
}

func prefixed(p string, cols []string) []string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = p + c
	}
	return out
}

// scanReport runs q, an instance of st (metric bound to its ?3), and scans each row: its
// first n columns are the group's key values, the rest go to the
// destinations row returns (it is called once per row, with the values the
// key columns will hold once the row is scanned; done runs then).
func (s *Store) scanReport(ctx context.Context, st *stmt, q string, w facts.Window, metric string, n int,
	row func(vals []string) (dest []any, done func())) error {
	rows, err := s.reportQuery(ctx, st, q, w, metric)
	if err != nil {
		return err
	}
	defer rows.Close() // its transaction, on PostgreSQL
	return eachRow(rows.Rows, "report", func() error {
		vals := make([]string, n)
		dest := make([]any, 0, n+24)
		for i := range vals {
			dest = append(dest, &vals[i])
		}
		more, done := row(vals)
		if err := rows.Scan(append(dest, more...)...); err != nil {
			return err
		}
		done()
		return nil
	})
}
