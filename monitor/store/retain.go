package store

// Retention (serve --retain): tasks whose counted interval ended before a
// cutoff are deleted, in short batches, only from closed months;
// statements are never deleted. The cutoff is recorded first (the
// retention table), so that a report over the trimmed days is refused
// from the moment the first task goes.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
)

var (
	stmtRetentionMark = &stmt{sql: "SELECT trimmed_before FROM retention WHERE id = 1", sqliteIndex: "INTEGER PRIMARY KEY", postgresIndex: "retention_pkey",
		fullScan: "the retention table holds one row"}
	stmtSetRetentionMark = &stmt{sql: `INSERT INTO retention (id, trimmed_before, tasks_deleted) VALUES (1, ?, ?)
		ON CONFLICT (id) DO UPDATE SET trimmed_before = CASE WHEN retention.trimmed_before > excluded.trimmed_before
		  THEN retention.trimmed_before ELSE excluded.trimmed_before END, tasks_deleted = retention.tasks_deleted + excluded.tasks_deleted`,
		postgresIndex: "retention_pkey", example: []any{int64(1), int64(0)}}
	// The batch: completed tasks ended before the cutoff (tasks_end_time),
	// then open tasks last counted before it (tasks_open).
	stmtTrimBatch = &stmt{sql: "SELECT id FROM tasks WHERE end_time < ? ORDER BY end_time LIMIT ?",
		sqliteIndex: "tasks_end_time", postgresIndex: "tasks_end_time", example: []any{int64(1700000000), 100}}
	stmtTrimOpenBatch = &stmt{sql: "SELECT id FROM tasks WHERE end_time IS NULL AND start_time < ? AND COALESCE(last_seen, start_time) < ? LIMIT ?",
		sqliteIndex: "tasks_end_start", postgresIndex: "tasks_open", example: []any{int64(1700000000), int64(1700000000), 100}}
	stmtTrimCheck = &stmt{sql: "SELECT COALESCE(end_time, last_seen, start_time) FROM tasks WHERE id = ?",
		sqliteIndex: "INTEGER PRIMARY KEY", postgresIndex: "tasks_pkey", example: []any{int64(1)}}
	stmtTrimGPUs = &stmt{sql: "DELETE FROM task_gpus WHERE task_key = ?",
		sqliteIndex: "sqlite_autoindex_task_gpus_1", postgresIndex: "task_gpus_pkey", example: []any{int64(1)}}
	stmtTrimTask = &stmt{sql: "DELETE FROM tasks WHERE id = ?",
		sqliteIndex: "INTEGER PRIMARY KEY", postgresIndex: "tasks_pkey", example: []any{int64(1)}}
	// The covered spans that ended in [from, to) (node_spans_end): trimmed
	// with the hours they cover.
	stmtTrimSpans = &stmt{sql: "DELETE FROM node_spans WHERE span_end >= ? AND span_end <= ?",
		sqliteIndex: "node_spans_end", postgresIndex: "node_spans_end", example: []any{int64(0), int64(1700000000)}}
	stmtOldestStart = &stmt{sql: "SELECT MIN(start_time) FROM tasks", sqliteIndex: "tasks_start_time", postgresIndex: "tasks_start_time"}
)

// MaxTrimHold is the longest a retention batch may hold the write lock.
const MaxTrimHold = 100 * time.Millisecond

// TrimResult is what one Trim did.
type TrimResult struct {
	// Cutoff is the instant before which tasks were deleted: the earlier
	// of the retention's and the start of the first month not closed.
	Cutoff time.Time
	Tasks  int64
	// NodeHours are the ledger's hourly rows deleted (per GPU and per
	// GPU instance and user).
	NodeHours int64
	// Batches and LongestHold: how many transactions, and the longest
	// any held the write lock.
	Batches     int
	LongestHold time.Duration
}

// TrimmedBefore returns the retention's mark: reports before it are served
// from statements only (zero when nothing was ever trimmed).
func (s *Store) TrimmedBefore(ctx context.Context) (time.Time, error) {
	var t int64
	err := s.queryRow(ctx, s.r, stmtRetentionMark).Scan(&t)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("store: retention mark: %w", err)
	}
	return time.Unix(t, 0).UTC(), nil
}

// TrimCutoff is the cutoff Trim would use for before: before, or the start
// of the first month since the oldest task that is not closed, whichever is
// earlier (an open month is never trimmed). Zero: nothing to trim.
func (s *Store) TrimCutoff(ctx context.Context, before time.Time) (time.Time, error) {
	return s.closedCutoff(ctx, "store: retention", stmtOldestStart, before)
}

// closedCutoff is before, or the start of the first month not closed from
// the month of oldest's answer on (the oldest row a retention deletes),
// whichever is earlier; zero when there is nothing before before. what
// names the retention in errors.
func (s *Store) closedCutoff(ctx context.Context, what string, oldest *stmt, before time.Time) (time.Time, error) {
	var first sql.NullInt64
	if err := s.queryRow(ctx, s.r, oldest).Scan(&first); err != nil {
		return time.Time{}, fmt.Errorf("%s: %w", what, err)
	}
	if !first.Valid || first.Int64 >= before.Unix() {
		return time.Time{}, nil
	}
	for m := facts.Month(time.Unix(first.Int64, 0).UTC()); m.From.Before(before); m = facts.Month(m.To) {
		c, err := s.Statement(ctx, m.From.Format("2006-01"))
		if err != nil {
			return time.Time{}, err
		}
		if c == nil {
			return m.From, nil
		}
	}
	return before, nil
}

// Trim deletes the tasks whose counted interval ended before the cutoff
// (TrimCutoff of before), in transactions of at most batch tasks; a batch
// that held the lock longer than MaxTrimHold/2 halves the next one. It
// records the cutoff before deleting anything.
func (s *Store) Trim(ctx context.Context, before time.Time, batch int) (TrimResult, error) {
	var res TrimResult
	cutoff, err := s.TrimCutoff(ctx, before)
	if err != nil || cutoff.IsZero() {
		return res, err
	}
	res.Cutoff = cutoff
	if _, err := s.exec(ctx, s.w, stmtSetRetentionMark, cutoff.Unix(), 0); err != nil {
		return res, fmt.Errorf("store: retention: %w", err)
	}
	if batch < 1 {
		batch = 500
	}
	for _, pick := range []func(n int) ([]int64, error){
		func(n int) ([]int64, error) { return s.ids(ctx, stmtTrimBatch, cutoff.Unix(), n) },
		func(n int) ([]int64, error) { return s.ids(ctx, stmtTrimOpenBatch, cutoff.Unix(), cutoff.Unix(), n) },
	} {
		for {
			ids, err := pick(batch)
			if err != nil {
				return res, err
			}
			if len(ids) == 0 {
				break
			}
			n, hold, err := s.trimBatch(ctx, ids, cutoff.Unix())
			if err != nil {
				return res, err
			}
			res.Tasks += n
			res.Batches++
			res.LongestHold = max(res.LongestHold, hold)
			if hold > MaxTrimHold/2 && batch > 1 {
				batch /= 2
			} else if hold < MaxTrimHold/8 && batch < 5000 {
				batch *= 2
			}
			if n == 0 {
				// Every task picked changed meanwhile: stop rather than
				// pick them again.
				break
			}
		}
	}
	if err := s.trimNodeHours(ctx, cutoff.Unix(), &res); err != nil {
		return res, err
	}
	if err := s.trimFacts(ctx, cutoff.Unix(), &res); err != nil {
		return res, err
	}
	if _, err := s.exec(ctx, s.w, stmtSetRetentionMark, cutoff.Unix(), res.Tasks); err != nil {
		return res, fmt.Errorf("store: retention: %w", err)
	}
	return res, nil
}

// trimNodeHours deletes the ledger's hourly rows of the hours before
// cutoff, one hour a transaction (an hour holds a row per GPU and per GPU
// instance and user).
func (s *Store) trimNodeHours(ctx context.Context, cutoff int64, res *TrimResult) error {
	// PostgreSQL: the months ending by the cutoff go whole (their spans
	// with them), the rest an hour at a time below.
	n, upTo, err := s.dropHourPartitions(ctx, cutoff)
	if err != nil {
		return fmt.Errorf("store: retention: %w", err)
	}
	res.NodeHours += n
	if upTo > 0 {
		if _, err := s.exec(ctx, s.w, stmtTrimSpans, int64(0), upTo); err != nil {
			return fmt.Errorf("store: retention: node spans: %w", err)
		}
	}
	// The spans ending up to each hour's end (before the cutoff) go with
	// it: the billing reads no hour before it any more.
	n, err = s.trimRollup(ctx, "store: retention: node hours", rollupTrims["hour"], cutoff-1, res, func(tx *sql.Tx, from, hour int64) error {
		if _, err := s.exec(ctx, tx, stmtTrimSpans, from, min(hour+3600, cutoff)); err != nil {
			return fmt.Errorf("node spans: %w", err)
		}
		return nil
	})
	res.NodeHours += n
	return err
}

func (s *Store) ids(ctx context.Context, st *stmt, args ...any) ([]int64, error) {
	return stmtRows(ctx, s, s.r, "retention", st, scanOne[int64], args...)
}

// trimBatch deletes the tasks of ids still counted to before cutoff, in
// one transaction; hold is how long it held the write lock.
func (s *Store) trimBatch(ctx context.Context, ids []int64, cutoff int64) (n int64, hold time.Duration, err error) {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return 0, 0, fmt.Errorf("store: retention: %w", err)
	}
	start := time.Now()
	defer tx.Rollback()
	for _, id := range ids {
		var end int64
		if err := s.queryRow(ctx, tx, stmtTrimCheck, id).Scan(&end); errors.Is(err, sql.ErrNoRows) {
			continue
		} else if err != nil {
			return 0, 0, fmt.Errorf("store: retention: %w", err)
		}
		if end >= cutoff {
			continue
		}
		if _, err := s.exec(ctx, tx, stmtTrimGPUs, id); err != nil {
			return 0, 0, fmt.Errorf("store: retention: %w", err)
		}
		if _, err := s.exec(ctx, tx, stmtTrimTask, id); err != nil {
			return 0, 0, fmt.Errorf("store: retention: %w", err)
		}
		n++
	}
	if err := tx.Commit(); err != nil {
		return 0, 0, fmt.Errorf("store: retention: %w", err)
	}
	return n, time.Since(start), nil
}
