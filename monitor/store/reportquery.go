package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/report"
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
// read-only transaction with pgReportSettings).
func (s *Store) reportQuery(ctx context.Context, q string, w report.Window, metric string) (*reportRows, error) {
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
	if s.dialect != Postgres {
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
	if _, err := tx.ExecContext(ctx, pgReportSettings); err != nil {
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

// pgReportSettings are PostgreSQL's settings for the report's statements,
// local to the read-only transaction each runs in. The planner cannot know
// that the span's second set (completed tasks that started before the
// window and ended after its start: end_time > f AND start_time < f) is a
// few hundred tasks: it multiplies the two conditions' shares and expects
// a quarter of the table (219,713 of 1,000,000 tasks for 530 in the
// benchmark's month). Over-costed so, every statement was JIT-compiled
// (0.74 s of a 1.9 s statement by model, more than it ran), and the GPUs
// were joined by hashing the whole task_gpus table (2 million rows, 0.5 s,
// spilled to disk) where an index lookup per spanned task on task_gpus'
// primary key (task_key, position) takes what the month has. So: no JIT,
// and the join by nested loop on that index (hash and merge joins off);
// EXPLAIN ANALYZE of the month by model: 1.9 s before, 0.5 s after.
const pgReportSettings = `SELECT set_config('jit', 'off', true), set_config('enable_hashjoin', 'off', true),
  set_config('enable_mergejoin', 'off', true)`

// reportRows are a report statement's rows; Close ends the transaction
// they were read in, if any (PostgreSQL's, for pgReportSettings).
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

// fence, at the end of a subquery, keeps the planner from merging it into
// the query around it, so that a column computed by a correlated subquery
// (modelSums' first, baseSums' unlisted_only) is computed once per row:
// merged, SQLite copies the subquery into every expression that names the
// column (EXPLAIN QUERY PLAN listed it twelve times). A LIMIT that limits
// nothing in SQLite, an OFFSET 0 in PostgreSQL (which takes no LIMIT -1).
var fence = map[Dialect]string{SQLite: "LIMIT -1", Postgres: "OFFSET 0"}

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
func (s *Store) scanReport(ctx context.Context, q string, w report.Window, metric string, n int,
	row func(vals []string) (dest []any, done func())) error {
	rows, err := s.reportQuery(ctx, q, w, metric)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		vals := make([]string, n)
		dest := make([]any, 0, n+24)
		for i := range vals {
			dest = append(dest, &vals[i])
		}
		more, done := row(vals)
		if err := rows.Scan(append(dest, more...)...); err != nil {
			return fmt.Errorf("store: report: %w", err)
		}
		done()
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("store: report: %w", err)
	}
	return nil
}
