package store

// Retention of the roll-ups, one bucket a transaction: the hours of the
// ledger (retain.go's Trim, rollup_hourly.go's TrimHourly), and the day
// and month facts: a day or month wholly before the retention's cutoff
// goes with its hours; a bucket reaching past the cutoff stays whole.

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// rollupTrim trims a grain's roll-ups: next is the first bucket from a
// start up to a last one (both bound, inclusive), gpus and users delete a
// bucket's rows per GPU and per GPU instance and user. The primary keys
// of both tables begin with the bucket.
type rollupTrim struct{ next, gpus, users *stmt }

// rollupTrims are the trims of each grain (Grains), in the registry
// (otherStatements).
var rollupTrims = func() map[string]rollupTrim {
	out := map[string]rollupTrim{}
	for _, g := range Grains {
		del := func(table string) *stmt {
			return &stmt{sql: "DELETE FROM " + table + " WHERE " + g + " = ?",
				sqliteIndex: "sqlite_autoindex_" + table + "_1", postgresIndex: table + "_pkey", example: []any{int64(1700000000)}}
		}
		gpus := "node_gpu_" + g + "s"
		out[g] = rollupTrim{
			next: &stmt{sql: "SELECT MIN(" + g + ") FROM " + gpus + " WHERE " + g + " >= ? AND " + g + " <= ?",
				sqliteIndex: "sqlite_autoindex_" + gpus + "_1", postgresIndex: gpus + "_pkey", example: []any{int64(0), int64(1700000000)}},
			gpus:  del(gpus),
			users: del("node_user_" + g + "s"),
		}
	}
	return out
}()

func init() {
	for _, g := range Grains {
		otherStatements["next "+g+" to trim"] = rollupTrims[g].next
		otherStatements["trim GPU "+g+"s"] = rollupTrims[g].gpus
		otherStatements["trim user "+g+"s"] = rollupTrims[g].users
	}
}

// trimRollup deletes the rows of t's buckets from the first up to the
// one starting at last, one bucket a transaction, and returns how many
// it deleted; what names the step in errors. also, when not nil, runs in
// each bucket's transaction, with the bucket and the start the bucket was
// looked for from (the previous bucket's next second).
func (s *Store) trimRollup(ctx context.Context, what string, t rollupTrim, last int64, res *TrimResult,
	also func(tx *sql.Tx, from, bucket int64) error) (int64, error) {
	var n int64
	for from := int64(0); ; {
		var b sql.NullInt64
		if err := s.queryRow(ctx, s.r, t.next, from, last).Scan(&b); err != nil {
			return n, fmt.Errorf("%s: %w", what, err)
		}
		if !b.Valid {
			return n, nil
		}
		k, hold, err := s.trimBucket(ctx, t, b.Int64, func(tx *sql.Tx) error {
			if also == nil {
				return nil
			}
			return also(tx, from, b.Int64)
		})
		if err != nil {
			return n, fmt.Errorf("%s: %w", what, err)
		}
		n += k
		res.Batches++
		res.LongestHold = max(res.LongestHold, hold)
		from = b.Int64 + 1
	}
}

// trimBucket deletes bucket's rows of t and runs also, in one
// transaction: the rows deleted and how long it held the write lock.
func (s *Store) trimBucket(ctx context.Context, t rollupTrim, bucket int64, also func(tx *sql.Tx) error) (int64, time.Duration, error) {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return 0, 0, err
	}
	defer tx.Rollback()
	start := time.Now()
	var n int64
	for _, st := range []*stmt{t.gpus, t.users} {
		r, err := s.exec(ctx, tx, st, bucket)
		if err != nil {
			return 0, 0, err
		}
		k, _ := r.RowsAffected()
		n += k
	}
	if err := also(tx); err != nil {
		return 0, 0, err
	}
	if err := tx.Commit(); err != nil {
		return 0, 0, err
	}
	return n, time.Since(start), nil
}

// trimFacts deletes the day facts of the days and the month facts of the
// months ending at or before cutoff.
func (s *Store) trimFacts(ctx context.Context, cutoff int64, res *TrimResult) error {
	// The latest start of a bucket ending by cutoff: a month starting
	// before the cutoff's own month's start ends by the cutoff.
	if _, err := s.trimRollup(ctx, "store: retention: facts", rollupTrims["day"], cutoff-86400, res, nil); err != nil {
		return err
	}
	_, err := s.trimRollup(ctx, "store: retention: facts", rollupTrims["month"], monthOf(cutoff)-1, res, nil)
	return err
}
