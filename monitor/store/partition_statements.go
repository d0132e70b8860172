package store

import "fmt"

// The statements of PostgreSQL's partitions (partition.go,
// partition_keep.go), in the registry (partitionStatements). Most are
// templates: DDL takes no bound parameters, so a partition's table, name
// and bounds are written into the text per call by the builders below
// (names the store makes, never a sender's), and each template's build
// makes the instance of node_reports and its day 2026-12-02. They run
// through Store.execBuilt and Store.queryRowBuilt.

var (
	stmtServerVersion = &stmt{sql: "SELECT CAST(current_setting('server_version_num') AS integer)", postgresOnly: true}
	// The catalogue's own indexes: a relation by its oid, by its name in
	// the schema, the partitions of a parent.
	stmtRelKind = &stmt{sql: "SELECT CAST(relkind AS text) FROM pg_class WHERE oid = to_regclass(?)", postgresOnly: true,
		postgresIndex: "pg_class_oid_index", example: []any{"node_reports"}}
	// relationExists reads pg_class itself (not to_regclass: see there).
	stmtRelationExists = &stmt{sql: `SELECT EXISTS (SELECT 1 FROM pg_class WHERE relname = ?
		AND relnamespace = CAST(current_schema() AS regnamespace))`, postgresOnly: true,
		postgresIndex: "pg_class_relname_nsp_index", example: []any{"node_reports_default"}}
	stmtPartitionsOf = &stmt{sql: `SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = to_regclass(?)`, postgresOnly: true,
		fullScan: "the catalogue's partitions of one table: a handful of rows, read as the planner likes", example: []any{"node_reports"}}
	// The advisory lock of partition changes, and the bound on waiting for
	// it and the tables' locks (partitionLockTimeout).
	stmtPartitionLock        = &stmt{sql: "SELECT pg_advisory_xact_lock(?)", postgresOnly: true, example: []any{int64(partitionLock)}}
	stmtPartitionLockTimeout = &stmt{sql: "SET LOCAL lock_timeout = '" + partitionLockTimeout + "'", postgresOnly: true,
		noPlan: "a setting of the transaction"}

	// Reads of a table whole, on purpose.
	stmtTableEmpty = &stmt{build: func(Dialect) string { return tableEmptySQL("node_reports") }, postgresOnly: true,
		fullScan: "whether a table holds a row: its first row answers"}
	stmtCountRows = &stmt{build: func(Dialect) string { return countRowsSQL("node_reports") }, postgresOnly: true,
		fullScan: "the rows a partition change moved or dropped, counted"}
	stmtBucketDays = &stmt{build: func(Dialect) string { return bucketDaysSQL("node_reports", "time") }, postgresOnly: true,
		fullScan: "the day of every row of a table being partitioned"}

	// DDL, and the rows moved with it into a table made in the same
	// transaction.
	stmtRenameTable = &stmt{build: func(Dialect) string { return renameTableSQL("node_reports", "node_reports_unpartitioned") },
		postgresOnly: true, noPlan: "DDL"}
	stmtRenameIndex = &stmt{build: func(Dialect) string { return renameIndexSQL("node_reports_pkey", "node_reports_unpartitioned_pkey") },
		postgresOnly: true, noPlan: "DDL"}
	stmtCreatePartitioned = &stmt{build: func(Dialect) string {
		return createPartitionedSQL("node_reports", "node_reports_unpartitioned", "time")
	}, postgresOnly: true, noPlan: "DDL"}
	stmtAddPrimaryKey = &stmt{build: func(Dialect) string { return addPrimaryKeySQL("node_reports", "node, time") },
		postgresOnly: true, noPlan: "DDL"}
	stmtCreateIndex = &stmt{build: func(Dialect) string { return createIndexSQL("node_reports_time", "node_reports", "time") },
		postgresOnly: true, noPlan: "DDL"}
	stmtCreateDefault = &stmt{build: func(Dialect) string { return createDefaultSQL("node_reports") },
		postgresOnly: true, noPlan: "DDL"}
	stmtCreatePartitionOf = &stmt{build: func(Dialect) string {
		return createPartitionOfSQL("node_reports_p20261202", "node_reports", 1796169600, 1796256000)
	}, postgresOnly: true, noPlan: "DDL"}
	stmtCopyRows = &stmt{build: func(Dialect) string { return copyRowsSQL("node_reports", "node_reports_unpartitioned") },
		postgresOnly: true, noPlan: "reads a table renamed in its own transaction: every row, copied"}
	stmtDropTable = &stmt{build: func(Dialect) string { return dropTableSQL("node_reports_unpartitioned") },
		postgresOnly: true, noPlan: "DDL"}
	stmtCreateLike = &stmt{build: func(Dialect) string { return createLikeSQL("node_reports_p20261202", "node_reports") },
		postgresOnly: true, noPlan: "DDL"}
	stmtMoveFromDefault = &stmt{build: func(Dialect) string {
		return moveFromDefaultSQL("node_reports", "time", "node_reports_p20261202", 1796169600, 1796256000)
	}, postgresOnly: true, noPlan: "writes a table made in its own transaction: a bucket's rows, out of the default partition"}
	stmtAttachPartition = &stmt{build: func(Dialect) string {
		return attachPartitionSQL("node_reports", "node_reports_p20261202", 1796169600, 1796256000)
	}, postgresOnly: true, noPlan: "DDL"}
	stmtDetachPartition = &stmt{build: func(Dialect) string { return detachPartitionSQL("node_reports", "node_reports_p20261202") },
		postgresOnly: true, noPlan: "DDL"}
)

// partitionStatements are the statements above, by name.
var partitionStatements = map[string]*stmt{
	"partitions: server version":      stmtServerVersion,
	"partitions: relation kind":       stmtRelKind,
	"partitions: relation exists":     stmtRelationExists,
	"partitions: partitions of":       stmtPartitionsOf,
	"partitions: lock":                stmtPartitionLock,
	"partitions: lock timeout":        stmtPartitionLockTimeout,
	"partitions: table empty":         stmtTableEmpty,
	"partitions: count rows":          stmtCountRows,
	"partitions: bucket days":         stmtBucketDays,
	"partitions: rename table":        stmtRenameTable,
	"partitions: rename index":        stmtRenameIndex,
	"partitions: create partitioned":  stmtCreatePartitioned,
	"partitions: add primary key":     stmtAddPrimaryKey,
	"partitions: create index":        stmtCreateIndex,
	"partitions: create default":      stmtCreateDefault,
	"partitions: create partition of": stmtCreatePartitionOf,
	"partitions: copy rows":           stmtCopyRows,
	"partitions: drop table":          stmtDropTable,
	"partitions: create like":         stmtCreateLike,
	"partitions: move from default":   stmtMoveFromDefault,
	"partitions: attach partition":    stmtAttachPartition,
	"partitions: detach partition":    stmtDetachPartition,
}

func tableEmptySQL(table string) string { return "SELECT NOT EXISTS (SELECT 1 FROM " + table + ")" }

func countRowsSQL(table string) string { return "SELECT count(*) FROM " + table }

// bucketDaysSQL: the UTC days holding rows of table, by its partition
// column.
func bucketDaysSQL(table, column string) string {
	return fmt.Sprintf("SELECT DISTINCT %s / 86400 FROM %s", column, table)
}

func renameTableSQL(table, to string) string {
	return fmt.Sprintf("ALTER TABLE %s RENAME TO %s", table, to)
}

func renameIndexSQL(index, to string) string {
	return fmt.Sprintf("ALTER INDEX %s RENAME TO %s", index, to)
}

// createPartitionedSQL: table made again, partitioned by column's range,
// with the columns of like.
func createPartitionedSQL(table, like, column string) string {
	return fmt.Sprintf("CREATE TABLE %s (LIKE %s INCLUDING DEFAULTS INCLUDING CONSTRAINTS) PARTITION BY RANGE (%s)", table, like, column)
}

func addPrimaryKeySQL(table, columns string) string {
	return fmt.Sprintf("ALTER TABLE %s ADD CONSTRAINT %s_pkey PRIMARY KEY (%s)", table, table, columns)
}

func createIndexSQL(index, table, columns string) string {
	return fmt.Sprintf("CREATE INDEX %s ON %s (%s)", index, table, columns)
}

func createDefaultSQL(table string) string {
	return fmt.Sprintf("CREATE TABLE %s_default PARTITION OF %s DEFAULT", table, table)
}

// createPartitionOfSQL: the partition name of table, of the bucket
// [start, end).
func createPartitionOfSQL(name, table string, start, end int64) string {
	return fmt.Sprintf("CREATE TABLE %s PARTITION OF %s FOR VALUES FROM (%d) TO (%d)", name, table, start, end)
}

func copyRowsSQL(table, from string) string {
	return fmt.Sprintf("INSERT INTO %s SELECT * FROM %s", table, from)
}

func dropTableSQL(table string) string { return "DROP TABLE " + table }

// createLikeSQL: a table of like's columns, to be attached as its
// partition.
func createLikeSQL(name, like string) string {
	return fmt.Sprintf("CREATE TABLE %s (LIKE %s INCLUDING DEFAULTS INCLUDING CONSTRAINTS)", name, like)
}

// moveFromDefaultSQL: the rows of the bucket [start, end) that table's
// default partition holds, moved into name.
func moveFromDefaultSQL(table, column, name string, start, end int64) string {
	return fmt.Sprintf("WITH moved AS (DELETE FROM %s_default WHERE %s >= %d AND %s < %d RETURNING *) INSERT INTO %s SELECT * FROM moved",
		table, column, start, column, end, name)
}

func attachPartitionSQL(table, name string, start, end int64) string {
	return fmt.Sprintf("ALTER TABLE %s ATTACH PARTITION %s FOR VALUES FROM (%d) TO (%d)", table, name, start, end)
}

func detachPartitionSQL(table, name string) string {
	return fmt.Sprintf("ALTER TABLE %s DETACH PARTITION %s", table, name)
}
