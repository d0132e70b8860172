package main

// migrate [--db DB] [--partition]: bring a store to this binary's schema
// (what every command does at open) and, with --partition, move a
// PostgreSQL store's unpartitioned node reports and hourly tables to
// partitions (docs/monitor.md, "Partitions on PostgreSQL"): an explicit
// step, run with the monitors stopped, since each table is locked while
// its rows are copied.

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
)

func migrateCmd(args []string, stdout io.Writer) error {
	fs := flagsOf("migrate", dbSettings)
	partition := fs.Bool("partition", false, "PostgreSQL: move the node reports (by day) and hourly tables (by month) to partitions, every row kept; stop the monitors first")
	var src sources
	if err := settle(fs, args, "migrate", dbSettings, &src); err != nil {
		return err
	}
	if *partition && !store.IsPostgresDSN(src.db) {
		return fmt.Errorf("%w: migrate --partition: partitions are PostgreSQL's (--db is a SQLite file, which keeps its batched deletes)", errUsage)
	}
	// No deadline: a large store's copy takes as long as it takes.
	ctx := context.Background()
	st, err := openExisting(ctx, src.db, "migrate")
	if err != nil {
		return err
	}
	defer st.Close()
	if _, err := fmt.Fprintf(stdout, "schema version %d\n", store.SchemaVersion()); err != nil {
		return err
	}
	if !*partition {
		return nil
	}
	start := time.Now()
	res, err := st.PartitionTables(ctx)
	for _, r := range res {
		if r.Already {
			fmt.Fprintf(stdout, "%s: already partitioned\n", r.Table)
			continue
		}
		fmt.Fprintf(stdout, "%s: partitioned, %d rows in %d partitions and the default one\n", r.Table, r.Rows, r.Partitions)
	}
	if err != nil {
		return fmt.Errorf("migrate --partition: %w", err)
	}
	_, err = fmt.Fprintf(stdout, "partitioned in %s\n", time.Since(start).Round(time.Millisecond))
	return err
}
