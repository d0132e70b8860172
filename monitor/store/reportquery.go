package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

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

// reportQuery binds the window to every :f and :t of q, and metric to
// every :k, in order, and runs it on the read pool (on PostgreSQL in a
// read-only transaction with Dialect.readSettings).
func (s *Store) reportQuery(ctx context.Context, q string, w facts.Window, metric string) (*reportRows, error) {
	var b strings.Builder
	var args []any
	for {
		i := strings.IndexByte(q, ':')
		if i < 0 || i+1 >= len(q) || (q[i+1] != 'f' && q[i+1] != 't' && q[i+1] != 'k') {
			if i < 0 {
				b.WriteString(q)
				break
			}
			b.WriteString(q[:i+1])
			q = q[i+1:]
			continue
		}
		b.WriteString(q[:i] + "?")
		switch q[i+1] {
		case 'f':
			args = append(args, w.From.Unix())
		case 't':
			args = append(args, w.To.Unix())
		default:
			args = append(args, metric)
		}
		q = q[i+2:]
	}
	settings := s.dialect.readSettings()
	if settings == "" {
		rows, err := s.r.QueryContext(ctx, s.bind(b.String()), args...)
		if err != nil {
			return nil, fmt.Errorf("store: report: %w", err)
		}
		return &reportRows{Rows: rows}, nil
	}
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("store: report: %w", err)
	}
	if _, err := tx.ExecContext(ctx, settings); err != nil {
		tx.Rollback()
		return nil, fmt.Errorf("store: report: %w", err)
	}
	rows, err := tx.QueryContext(ctx, s.bind(b.String()), args...)
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

// scanReport runs q (metric bound to its :k) and scans each row: its
// first n columns are the group's key values, the rest go to the
// destinations row returns (it is called once per row, with the values the
// key columns will hold once the row is scanned; done runs then).
func (s *Store) scanReport(ctx context.Context, q string, w facts.Window, metric string, n int,
	row func(vals []string) (dest []any, done func())) error {
	rows, err := s.reportQuery(ctx, q, w, metric)
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
