package store

// Keeping the partitions (partition.go): created ahead, dropped by
// retention.

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"time"
)

// Partitions made ahead of now: raw reports' days from yesterday to
// aheadDays after today, the hourly tables' months this one and the
// aheadMonths after it.
const (
	aheadDays   = 2
	aheadMonths = 1
)

// partitionLockTimeout bounds how long a partition change waits for a
// table's lock (a long reader): the change is tried again at the next
// round rather than queueing every writer behind it.
const partitionLockTimeout = "5s"

// EnsurePartitions creates the partitions of the buckets around now that
// do not exist yet (a no-op on SQLite and for a table not partitioned).
func (s *Store) EnsurePartitions(ctx context.Context, now time.Time) error {
	day := now.UTC().Unix()
	return s.CreatePartitions(ctx, time.Unix(day-86400, 0), time.Unix(day+aheadDays*86400, 0),
		now.AddDate(0, aheadMonths, 0))
}

// CreatePartitions creates the partitions of raw reports' days from
// rawFrom to rawTo and the hourly tables' months from rawFrom's to
// hoursTo's, both inclusive, that do not exist yet (bulk loaders call it
// for the span they load; rows already in the default partition move to
// the new partition).
func (s *Store) CreatePartitions(ctx context.Context, rawFrom, rawTo, hoursTo time.Time) error {
	if s.dialect != Postgres {
		return nil
	}
	for _, pt := range partTables {
		ok, err := s.isPartitioned(ctx, s.w, pt.table)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		to := rawTo
		if pt.monthly {
			to = hoursTo
		}
		last, _ := pt.bucket(to.Unix())
		for b, _ := pt.bucket(rawFrom.Unix()); b <= last; _, b = pt.bucket(b) {
			if err := s.createPartition(ctx, pt, b); err != nil {
				return err
			}
		}
	}
	return nil
}

// createPartition creates the partition of the bucket starting at start
// unless it exists: made as a table of the parent's columns, the rows of
// the bucket the default partition holds moved into it, then attached
// (ATTACH takes a weaker lock on the parent than CREATE … PARTITION OF:
// writers of other partitions go on).
func (s *Store) createPartition(ctx context.Context, pt partTable, start int64) error {
	name := pt.name(start)
	if exists, err := s.relationExists(ctx, s.w, name); err != nil || exists {
		return err
	}
	_, end := pt.bucket(start)
	what := "store: partition " + name
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer tx.Rollback()
	if err := s.lockPartitionsBriefly(ctx, tx); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	// Another replica may have made it while this one waited.
	if exists, err := s.relationExists(ctx, tx, name); err != nil || exists {
		return err
	}
	if err := s.execSteps(ctx, tx, what, []built{
		{stmtCreateLike, createLikeSQL(name, pt.table)},
		{stmtMoveFromDefault, moveFromDefaultSQL(pt.table, pt.column, name, start, end)},
		{stmtAttachPartition, attachPartitionSQL(pt.table, name, start, end)},
	}); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// lockPartitionsBriefly takes the advisory lock of partition changes in
// tx, waiting for it, and then for each table's lock, at most
// partitionLockTimeout.
func (s *Store) lockPartitionsBriefly(ctx context.Context, tx *sql.Tx) error {
	if _, err := s.exec(ctx, tx, stmtPartitionLockTimeout); err != nil {
		return err
	}
	_, err := s.exec(ctx, tx, stmtPartitionLock, int64(partitionLock))
	return err
}

// partitionsOf lists the partitions of pt's table named by their bucket
// (not the default one), oldest first.
func (s *Store) partitionsOf(ctx context.Context, pt partTable) ([]string, error) {
	all, err := stmtRows(ctx, s, s.w, "partitions of "+pt.table, stmtPartitionsOf, scanOne[string], pt.table)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range all {
		if _, _, ok := pt.parse(n); ok {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out, nil
}

// dropPartitions detaches and drops each partition of table whose bucket
// ends at or before cut, one a transaction; it returns the rows they held
// and the latest end of a bucket dropped (0: none). A table not
// partitioned, and SQLite, drop nothing. The default partition keeps its
// rows: the callers delete those older than the cut as before, with the
// partition straddling the cut's.
//
// DETACH … CONCURRENTLY is not allowed on a table with a default
// partition (PostgreSQL's rule), so the detach is a plain one under a
// lock timeout: it waits at most partitionLockTimeout for the readers of
// the table, and the next round tries again.
func (s *Store) dropPartitions(ctx context.Context, table string, cut int64) (rows, upTo int64, err error) {
	if s.dialect != Postgres {
		return 0, 0, nil
	}
	pt := partTableOf(table)
	if ok, err := s.isPartitioned(ctx, s.w, table); err != nil || !ok {
		return 0, 0, err
	}
	names, err := s.partitionsOf(ctx, pt)
	if err != nil {
		return 0, 0, err
	}
	for _, name := range names {
		_, end, _ := pt.parse(name)
		if end > cut {
			continue
		}
		n, err := s.dropPartition(ctx, pt, name)
		if err != nil {
			return rows, upTo, err
		}
		rows += n
		upTo = max(upTo, end)
	}
	return rows, upTo, nil
}

func (s *Store) dropPartition(ctx context.Context, pt partTable, name string) (int64, error) {
	what := "store: dropping partition " + name
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	defer tx.Rollback()
	if err := s.lockPartitionsBriefly(ctx, tx); err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	if exists, err := s.relationExists(ctx, tx, name); err != nil || !exists {
		return 0, err // another replica dropped it
	}
	var n int64
	if err := s.queryRowBuilt(ctx, tx, stmtCountRows, countRowsSQL(name)).Scan(&n); err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	if err := s.execSteps(ctx, tx, what, []built{
		{stmtDetachPartition, detachPartitionSQL(pt.table, name)},
		{stmtDropTable, dropTableSQL(name)},
	}); err != nil {
		return 0, err
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	return n, nil
}

// relationExists reads pg_class itself, in the statement's snapshot:
// to_regclass answers from the backend's catalogue cache, which an
// advisory lock does not refresh, so it may miss a partition another
// replica made while this one waited for the lock.
func (s *Store) relationExists(ctx context.Context, q querier, name string) (bool, error) {
	var exists bool
	if err := s.queryRow(ctx, q, stmtRelationExists, name).Scan(&exists); err != nil {
		return false, fmt.Errorf("store: partition %s: %w", name, err)
	}
	return exists, nil
}
