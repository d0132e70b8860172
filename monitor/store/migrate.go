package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
)

// The schema: one directory per dialect, the same numbered files in each.
// Append-only: a file, once released, is never edited; the schema version is
// the number of files applied.
//
//go:embed migrations/sqlite/*.sql migrations/postgres/*.sql
var migrationFiles embed.FS

// migrations returns the dialect's steps in order.
func migrations(d Dialect) ([]string, error) {
	dir := path.Join("migrations", string(d))
	names, err := fs.Glob(migrationFiles, dir+"/*.sql")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	steps := make([]string, len(names))
	for i, n := range names {
		b, err := migrationFiles.ReadFile(n)
		if err != nil {
			return nil, err
		}
		steps[i] = string(b)
	}
	return steps, nil
}

// SchemaVersion is the version this binary's migrations bring a database to.
func SchemaVersion() int {
	steps, _ := migrations(SQLite)
	return len(steps)
}

// ErrSchemaTooNew is returned when the database was migrated by a newer
// paddle-monitor: this one must not write to a schema it does not know.
var ErrSchemaTooNew = errors.New("store: database schema is newer than this paddle-monitor")

// postgresSteps are the steps whose work on PostgreSQL is Go's, run after
// the step's file in its transaction: 18, the partitions (partition.go).
var postgresSteps = map[int]func(s *Store, ctx context.Context, tx *sql.Tx) error{
	18: (*Store).partitionEmptyTables,
}

// migrate applies the missing steps, each with its version bump in one
// transaction. On PostgreSQL each transaction first takes an advisory lock,
// so replicas starting together apply every step exactly once; on SQLite the
// immediate transaction holds the file's write lock. maxVersion > 0 stops
// at that version (tests of the upgrade from an older schema).
func (s *Store) migrate(ctx context.Context, maxVersion int) error {
	steps, err := migrations(s.dialect)
	if err != nil {
		return fmt.Errorf("store: migrations: %w", err)
	}
	if maxVersion > 0 && maxVersion < len(steps) {
		steps = steps[:maxVersion]
	}
	for i := range steps {
		done, err := s.migrateStep(ctx, i+1, steps[i], len(steps))
		if err != nil {
			return err
		}
		if done {
			return nil
		}
	}
	return nil
}

// migrateStep brings the database to version v with step, unless it already
// is there. done reports that the database is at the latest version.
func (s *Store) migrateStep(ctx context.Context, v int, step string, latest int) (done bool, err error) {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("store: migrate: %w", err)
	}
	defer tx.Rollback()
	if s.dialect == Postgres {
		// Any constant shared by every paddle-monitor: "paddle" in ASCII.
		if _, err := s.exec(ctx, tx, stmtMigrateLock); err != nil {
			return false, fmt.Errorf("store: migrate: lock: %w", err)
		}
	}
	if _, err := s.exec(ctx, tx, stmtCreateSchemaVersion); err != nil {
		return false, fmt.Errorf("store: migrate: %w", err)
	}
	var current int
	switch err := s.queryRow(ctx, tx, stmtSchemaVersion).Scan(&current); {
	case errors.Is(err, sql.ErrNoRows):
		if _, err := s.exec(ctx, tx, stmtInsertSchemaVersion); err != nil {
			return false, fmt.Errorf("store: migrate: %w", err)
		}
	case err != nil:
		return false, fmt.Errorf("store: migrate: reading the schema version: %w", err)
	}
	if current > latest {
		return false, fmt.Errorf("%w (database at version %d, this binary knows %d)", ErrSchemaTooNew, current, latest)
	}
	if current >= v {
		return current == latest, tx.Commit()
	}
	if _, err := tx.ExecContext(ctx, step); err != nil {
		return false, fmt.Errorf("store: migration %d: %w", v, err)
	}
	if hook := postgresSteps[v]; hook != nil && s.dialect == Postgres {
		if err := hook(s, ctx, tx); err != nil {
			return false, fmt.Errorf("store: migration %d: %w", v, err)
		}
	}
	if _, err := s.exec(ctx, tx, stmtSetSchemaVersion, v); err != nil {
		return false, fmt.Errorf("store: migration %d: %w", v, err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("store: migration %d: %w", v, err)
	}
	return v == latest, nil
}
