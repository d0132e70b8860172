package store

// --hourly-retention: the hourly rows of closed months older than it are
// deleted, an hour a transaction; their day and month facts, kept by the
// write path in the transaction that kept the hours, stay (a year is
// answered from days and months). The spans stay too: a partly covered
// hour is still billed exactly.

import (
	"context"
	"fmt"
	"time"
)

var stmtOldestNodeHour = &stmt{sql: "SELECT MIN(hour) FROM node_gpu_hours",
	sqliteIndex: "sqlite_autoindex_node_gpu_hours_1", postgresIndex: "node_gpu_hours_pkey"}

// HourlyCutoff is the instant before which TrimHourly deletes hours: the
// earlier of before and the start of the first month, from the oldest
// hour on, that is not closed (zero: nothing to trim).
func (s *Store) HourlyCutoff(ctx context.Context, before time.Time) (time.Time, error) {
	return s.closedCutoff(ctx, "store: hourly retention", stmtOldestNodeHour, before)
}

// TrimHourly deletes the hourly rows (per GPU, and per GPU instance and
// user) of the hours before HourlyCutoff(before), keeping their day and
// month facts; it returns the rows deleted.
func (s *Store) TrimHourly(ctx context.Context, before time.Time) (int64, error) {
	cutoff, err := s.HourlyCutoff(ctx, before)
	if err != nil || cutoff.IsZero() {
		return 0, err
	}
	// PostgreSQL: the months ending by the cutoff go whole.
	n, _, err := s.dropHourPartitions(ctx, cutoff.Unix())
	if err != nil {
		return n, fmt.Errorf("store: hourly retention: %w", err)
	}
	k, err := s.trimRollup(ctx, "store: hourly retention", rollupTrims["hour"], cutoff.Unix()-1, &TrimResult{}, nil)
	return n + k, err
}

// dropHourPartitions drops the partitions of both hourly tables whose
// months end by cut (partition_keep.go): the rows they held, and the
// latest end of a month dropped (0: none).
func (s *Store) dropHourPartitions(ctx context.Context, cut int64) (rows, upTo int64, err error) {
	for _, table := range []string{"node_gpu_hours", "node_user_hours"} {
		n, end, err := s.dropPartitions(ctx, table, cut)
		rows += n
		upTo = max(upTo, end)
		if err != nil {
			return rows, upTo, err
		}
	}
	return rows, upTo, nil
}
