package store

// Keeping the partitions (partition.go): created ahead, dropped by
// retention.

import (
	"context"
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
		ok, err := isPartitioned(ctx, s.w, pt.table)
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
	if exists, err := relationExists(ctx, s.w, name); err != nil || exists {
		return err
	}
	_, end := pt.bucket(start)
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: partition %s: %w", name, err)
	}
	defer tx.Rollback()
	for _, st := range []string{
		"SET LOCAL lock_timeout = '" + partitionLockTimeout + "'",
		fmt.Sprintf("SELECT pg_advisory_xact_lock(%d)", int64(partitionLock)),
	} {
		if _, err := tx.ExecContext(ctx, st); err != nil {
			return fmt.Errorf("store: partition %s: %w", name, err)
		}
	}
	// Another replica may have made it while this one waited.
	if exists, err := relationExists(ctx, tx, name); err != nil || exists {
		return err
	}
	for _, st := range []string{
		fmt.Sprintf("CREATE TABLE %s (LIKE %s INCLUDING DEFAULTS INCLUDING CONSTRAINTS)", name, pt.table),
		fmt.Sprintf("WITH moved AS (DELETE FROM %s_default WHERE %s >= %d AND %s < %d RETURNING *) INSERT INTO %s SELECT * FROM moved",
			pt.table, pt.column, start, pt.column, end, name),
		fmt.Sprintf("ALTER TABLE %s ATTACH PARTITION %s FOR VALUES FROM (%d) TO (%d)", pt.table, name, start, end),
	} {
		if _, err := tx.ExecContext(ctx, st); err != nil {
			return fmt.Errorf("store: partition %s: %s: %w", name, st, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: partition %s: %w", name, err)
	}
	return nil
}

// partitionsOf lists the partitions of pt's table named by their bucket
// (not the default one), oldest first.
func (s *Store) partitionsOf(ctx context.Context, pt partTable) ([]string, error) {
	rows, err := s.w.QueryContext(ctx, `SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = to_regclass($1)`, pt.table)
	if err != nil {
		return nil, fmt.Errorf("store: partitions of %s: %w", pt.table, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, fmt.Errorf("store: partitions of %s: %w", pt.table, err)
		}
		if _, _, ok := pt.parse(n); ok {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out, rows.Err()
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
	if ok, err := isPartitioned(ctx, s.w, table); err != nil || !ok {
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
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("store: dropping partition %s: %w", name, err)
	}
	defer tx.Rollback()
	for _, st := range []string{
		"SET LOCAL lock_timeout = '" + partitionLockTimeout + "'",
		fmt.Sprintf("SELECT pg_advisory_xact_lock(%d)", int64(partitionLock)),
	} {
		if _, err := tx.ExecContext(ctx, st); err != nil {
			return 0, fmt.Errorf("store: dropping partition %s: %w", name, err)
		}
	}
	if exists, err := relationExists(ctx, tx, name); err != nil || !exists {
		return 0, err // another replica dropped it
	}
	var n int64
	if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM "+name).Scan(&n); err != nil {
		return 0, fmt.Errorf("store: dropping partition %s: %w", name, err)
	}
	for _, st := range []string{
		fmt.Sprintf("ALTER TABLE %s DETACH PARTITION %s", pt.table, name),
		"DROP TABLE " + name,
	} {
		if _, err := tx.ExecContext(ctx, st); err != nil {
			return 0, fmt.Errorf("store: dropping partition %s: %s: %w", name, st, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("store: dropping partition %s: %w", name, err)
	}
	return n, nil
}

// relationExists reads pg_class itself, in the statement's snapshot:
// to_regclass answers from the backend's catalogue cache, which an
// advisory lock does not refresh, so it may miss a partition another
// replica made while this one waited for the lock.
func relationExists(ctx context.Context, q queryer, name string) (bool, error) {
	var exists bool
	err := q.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_class WHERE relname = $1
		AND relnamespace = current_schema()::regnamespace)`, name).Scan(&exists)
	if err != nil {
		return false, fmt.Errorf("store: partition %s: %w", name, err)
	}
	return exists, nil
}
