package store

// PostgreSQL partitions (docs/monitor.md, "Partitions on PostgreSQL"): the
// raw node reports (node_reports) are range-partitioned by the UTC day of
// their time, the hourly roll-ups (node_gpu_hours, node_user_hours) by the
// UTC month of their hour, each with a DEFAULT partition that takes the
// rows of any bucket without its own partition.
//
// Guarantees:
//   - A new store is created partitioned (migration 18 partitions each of
//     the three tables that is still empty); an existing store's tables
//     with rows stay as they are until `paddle-monitor migrate --partition`
//     (PartitionTables) moves them, every row kept, in one transaction.
//   - The monitor creates the partitions ahead (at open and from the raw
//     retention's loop: yesterday to two days ahead, this month and the
//     next), idempotently: each creation takes an advisory lock and checks
//     the catalogue again, so replicas sharing a database never race. A
//     partition created for a bucket whose rows already sit in the default
//     partition takes them along (moved in the same transaction). A
//     partition not made (its lock not had within 5 s) is logged and made
//     at the next round; meanwhile its rows go to the default partition.
//   - Retention drops whole partitions older than its cut (DETACH, then
//     DROP), and deletes rows only in the partition straddling the cut and
//     in the default partition, as before.
//   - The partition key is in every primary key, so every ON CONFLICT
//     target of the write path is a unique index of the partitioned table.
//   - SQLite has no partitions: its batched deletes are unchanged.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// MinPostgresVersion is the oldest server partitions are made on
// (server_version_num): PostgreSQL 14.
const MinPostgresVersion = 140000

// ErrPostgresTooOld is returned where partitions are needed (a new store,
// migrate --partition) on a server older than MinPostgresVersion.
var ErrPostgresTooOld = errors.New("store: PostgreSQL 14 or later is required (the node reports and hourly tables are partitioned)")

// partitionLock is the advisory lock of partition changes: "paddle" + 1.
const partitionLock = 112971004210811

// partTable is one partitioned table: its partition column, its grain
// (a UTC month, else a UTC day), its primary key and its other indexes
// (name, columns), as migrations 9 made them.
type partTable struct {
	table, column string
	monthly       bool
	pkey          string
	indexes       [][2]string
}

var partTables = []partTable{
	{table: "node_reports", column: "time", pkey: "node, time", indexes: [][2]string{{"node_reports_time", "time"}}},
	{table: "node_gpu_hours", column: "hour", monthly: true, pkey: "hour, node, uuid"},
	{table: "node_user_hours", column: "hour", monthly: true, pkey: "hour, node, uuid, gpu_instance_id, user_key"},
}

func partTableOf(table string) partTable {
	for _, pt := range partTables {
		if pt.table == table {
			return pt
		}
	}
	panic("store: no partitioned table " + table)
}

// bucket is the start of the bucket holding t, end that of the next.
func (pt partTable) bucket(t int64) (start, end int64) {
	u := time.Unix(t, 0).UTC()
	if pt.monthly {
		m := time.Date(u.Year(), u.Month(), 1, 0, 0, 0, 0, time.UTC)
		return m.Unix(), m.AddDate(0, 1, 0).Unix()
	}
	d := time.Date(u.Year(), u.Month(), u.Day(), 0, 0, 0, 0, time.UTC)
	return d.Unix(), d.AddDate(0, 0, 1).Unix()
}

func (pt partTable) layout() string {
	if pt.monthly {
		return "200601"
	}
	return "20060102"
}

// name is the partition of the bucket starting at start:
// node_reports_p20261202, node_gpu_hours_p202612.
func (pt partTable) name(start int64) string {
	return pt.table + "_p" + time.Unix(start, 0).UTC().Format(pt.layout())
}

// parse is the bucket of a partition's name (ok false: not one of ours).
func (pt partTable) parse(name string) (start, end int64, ok bool) {
	rest, found := strings.CutPrefix(name, pt.table+"_p")
	if !found || len(rest) != len(pt.layout()) {
		return 0, 0, false
	}
	t, err := time.Parse(pt.layout(), rest)
	if err != nil {
		return 0, 0, false
	}
	start, end = pt.bucket(t.Unix())
	return start, end, true
}

// postgresVersion is the server's server_version_num.
func (s *Store) postgresVersion(ctx context.Context, q querier) (int, error) {
	var v int
	if err := s.queryRow(ctx, q, stmtServerVersion).Scan(&v); err != nil {
		return 0, fmt.Errorf("store: server version: %w", err)
	}
	return v, nil
}

func (s *Store) checkPostgresVersion(ctx context.Context, q querier) error {
	v, err := s.postgresVersion(ctx, q)
	if err != nil {
		return err
	}
	if v < MinPostgresVersion {
		return fmt.Errorf("%w: this server is %d.%d (server_version_num %d)", ErrPostgresTooOld, v/10000, v%10000, v)
	}
	return nil
}

// isPartitioned tells whether table is a partitioned table.
func (s *Store) isPartitioned(ctx context.Context, q querier, table string) (bool, error) {
	var kind string
	err := s.queryRow(ctx, q, stmtRelKind, table).Scan(&kind)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("store: partitions of %s: %w", table, err)
	}
	return kind == "p", nil
}

// Unpartitioned lists the tables that should be partitioned and are not
// (always none on SQLite): the monitor warns at open, and retention
// deletes their rows as SQLite does, until migrate --partition.
func (s *Store) Unpartitioned(ctx context.Context) ([]string, error) {
	if s.dialect != Postgres {
		return nil, nil
	}
	var out []string
	for _, pt := range partTables {
		p, err := s.isPartitioned(ctx, s.w, pt.table)
		if err != nil {
			return nil, err
		}
		if !p {
			out = append(out, pt.table)
		}
	}
	return out, nil
}

// partitionEmptyTables is migration 18 on PostgreSQL, in its transaction
// (under the migrations' advisory lock): each of the three tables that is
// still empty is made again, partitioned. Tables holding rows are left to
// migrate --partition.
func (s *Store) partitionEmptyTables(ctx context.Context, tx *sql.Tx) error {
	for _, pt := range partTables {
		var empty bool
		if err := s.queryRowBuilt(ctx, tx, stmtTableEmpty, tableEmptySQL(pt.table)).Scan(&empty); err != nil {
			return fmt.Errorf("store: partitions: %w", err)
		}
		if !empty {
			continue
		}
		if err := s.checkPostgresVersion(ctx, tx); err != nil {
			return err
		}
		if _, err := s.partitionTable(ctx, tx, pt); err != nil {
			return err
		}
	}
	return nil
}

// PartitionResult is what PartitionTables did to one table.
type PartitionResult struct {
	Table string
	// Already: it was partitioned before; nothing was done.
	Already bool
	// Rows moved, and the partitions made for them (the default one
	// aside).
	Rows       int64
	Partitions int
}

// PartitionTables moves the unpartitioned tables of a PostgreSQL store
// to partitions (migrate --partition): each in one transaction holding
// the table's exclusive lock while its rows are copied (writers of the
// table wait; docs/monitor.md says to stop the monitors first).
func (s *Store) PartitionTables(ctx context.Context) ([]PartitionResult, error) {
	if s.dialect != Postgres {
		return nil, errors.New("store: partitions are PostgreSQL's; a SQLite store keeps its batched deletes")
	}
	if err := s.checkPostgresVersion(ctx, s.w); err != nil {
		return nil, err
	}
	out, err := each(partTables, func(pt partTable) (PartitionResult, error) { return s.partitionOne(ctx, pt) })
	if err != nil {
		return out, err
	}
	return out, s.EnsurePartitions(ctx, s.now())
}

func (s *Store) partitionOne(ctx context.Context, pt partTable) (PartitionResult, error) {
	r := PartitionResult{Table: pt.table}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return r, fmt.Errorf("store: partitions: %w", err)
	}
	defer tx.Rollback()
	if _, err := s.exec(ctx, tx, stmtPartitionLock, int64(partitionLock)); err != nil {
		return r, fmt.Errorf("store: partitions: lock: %w", err)
	}
	if r.Already, err = s.isPartitioned(ctx, tx, pt.table); err != nil || r.Already {
		return r, err
	}
	var parts []int64
	if parts, err = s.partitionTable(ctx, tx, pt); err != nil {
		return r, err
	}
	r.Partitions = len(parts)
	if err := s.queryRowBuilt(ctx, tx, stmtCountRows, countRowsSQL(pt.table)).Scan(&r.Rows); err != nil {
		return r, fmt.Errorf("store: partitions: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return r, fmt.Errorf("store: partitions: %s: %w", pt.table, err)
	}
	return r, nil
}

// partitionTable makes pt's table again, partitioned, in tx: the old one
// renamed (with its indexes) to TABLE_unpartitioned, the new one with the
// same columns, keys and index names, a default partition and one for each
// bucket holding rows; the rows copied; the old table dropped. It returns
// the buckets it made partitions of.
func (s *Store) partitionTable(ctx context.Context, tx *sql.Tx, pt partTable) ([]int64, error) {
	const what = "store: partitions"
	old := pt.table + "_unpartitioned"
	steps := []built{
		{stmtRenameTable, renameTableSQL(pt.table, old)},
		{stmtRenameIndex, renameIndexSQL(pt.table+"_pkey", old+"_pkey")},
	}
	for _, ix := range pt.indexes {
		steps = append(steps, built{stmtRenameIndex, renameIndexSQL(ix[0], old+strings.TrimPrefix(ix[0], pt.table))})
	}
	steps = append(steps,
		built{stmtCreatePartitioned, createPartitionedSQL(pt.table, old, pt.column)},
		built{stmtAddPrimaryKey, addPrimaryKeySQL(pt.table, pt.pkey)})
	for _, ix := range pt.indexes {
		steps = append(steps, built{stmtCreateIndex, createIndexSQL(ix[0], pt.table, ix[1])})
	}
	steps = append(steps, built{stmtCreateDefault, createDefaultSQL(pt.table)})
	if err := s.execSteps(ctx, tx, what, steps); err != nil {
		return nil, err
	}
	// The buckets holding rows, from their UTC days.
	rows, err := s.queryBuilt(ctx, tx, stmtBucketDays, bucketDaysSQL(old, pt.column))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	seen := map[int64]bool{}
	var buckets []int64
	err = eachRow(rows, "partitions", func() error {
		var day int64
		if err := rows.Scan(&day); err != nil {
			return err
		}
		if start, _ := pt.bucket(day * 86400); !seen[start] {
			seen[start] = true
			buckets = append(buckets, start)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(buckets, func(i, j int) bool { return buckets[i] < buckets[j] })
	steps = steps[:0]
	for _, b := range buckets {
		_, end := pt.bucket(b)
		steps = append(steps, built{stmtCreatePartitionOf, createPartitionOfSQL(pt.name(b), pt.table, b, end)})
	}
	steps = append(steps, built{stmtCopyRows, copyRowsSQL(pt.table, old)}, built{stmtDropTable, dropTableSQL(old)})
	if err := s.execSteps(ctx, tx, what, steps); err != nil {
		return nil, err
	}
	return buckets, nil
}

// built is an instance of a template: its statement and the text built
// for the call.
type built struct {
	st   *stmt
	text string
}

// execSteps runs steps in tx in order (Store.execBuilt), stopping at the
// first that fails: its error is what's, naming the step's text.
func (s *Store) execSteps(ctx context.Context, tx *sql.Tx, what string, steps []built) error {
	for _, b := range steps {
		if _, err := s.execBuilt(ctx, tx, b.st, b.text); err != nil {
			return fmt.Errorf("%s: %s: %w", what, b.text, err)
		}
	}
	return nil
}
