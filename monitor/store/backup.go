package store

// Backup and restore of a SQLite store (PostgreSQL has its own tools:
// pg_dump, pg_restore and point-in-time recovery, docs/monitor.md).
//
// A backup is VACUUM INTO a new file beside the target: one read
// transaction on the live database, which in WAL mode never blocks the
// writer (the serving monitor keeps committing into the WAL while the copy
// reads the snapshot it started with), then the copy is checked
// (integrity_check, schema version) and renamed into place, so a file
// named by --to is always a whole, verified copy.
//
// "In use" is a lock: every `paddle-monitor serve` on a SQLite file holds a
// shared flock(2) on the database file for as long as it runs (HoldStore);
// Restore takes it exclusively without waiting, so it refuses a file a
// monitor serves, and a serve started during a restore refuses to start.
// flock is not SQLite's own locking (POSIX record locks, which an idle
// monitor does not hold) and works on local file systems only.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"syscall"
	"time"
)

// ErrInUse is returned by Restore for a database a monitor serves, and by
// HoldStore for a database being restored.
var ErrInUse = errors.New("store: the database is in use")

// ErrBadBackup is returned for a backup file that does not verify: not a
// SQLite database, a failed integrity check, or no schema version.
var ErrBadBackup = errors.New("store: not a sound backup")

// BackupInfo describes a verified copy of a SQLite store.
type BackupInfo struct {
	Path          string
	Bytes         int64
	SchemaVersion int
	Tasks         int64
	// Statements is the number of closed-month statements it holds.
	Statements int64
}

// Backup copies the SQLite database at db into the new file to, while
// other processes keep writing to db, and verifies the copy. to must not
// exist; it appears only once the copy is whole and verified.
func Backup(ctx context.Context, db, to string) (BackupInfo, error) {
	if IsPostgresDSN(db) {
		return BackupInfo{}, errors.New("store: backup copies a SQLite file; back a PostgreSQL store up with pg_dump (docs/monitor.md)")
	}
	if _, err := os.Stat(db); err != nil {
		return BackupInfo{}, fmt.Errorf("%w: %s", ErrNoDatabase, db)
	}
	if _, err := os.Lstat(to); err == nil {
		return BackupInfo{}, fmt.Errorf("store: backup: %s already exists (a backup never overwrites a file)", to)
	}
	partial := to + ".partial"
	os.Remove(partial)
	src, err := sql.Open("sqlite", "file:"+db+"?_pragma=busy_timeout(10000)")
	if err != nil {
		return BackupInfo{}, fmt.Errorf("store: backup: %s: %w", db, err)
	}
	defer src.Close()
	src.SetMaxOpenConns(1)
	// VACUUM INTO is one read transaction: the copy is the database as it
	// was when the statement began, whatever commits meanwhile.
	if _, err := execOn(ctx, src, SQLite, stmtVacuumInto, partial); err != nil {
		os.Remove(partial)
		return BackupInfo{}, fmt.Errorf("store: backup of %s: %w", db, err)
	}
	// The copy holds what the database holds: no one else reads it.
	if err := os.Chmod(partial, 0o600); err != nil {
		os.Remove(partial)
		return BackupInfo{}, fmt.Errorf("store: backup: %w", err)
	}
	if err := syncFile(partial); err != nil {
		os.Remove(partial)
		return BackupInfo{}, err
	}
	info, err := VerifyBackup(ctx, partial)
	if err != nil {
		os.Remove(partial)
		return BackupInfo{}, err
	}
	if err := os.Rename(partial, to); err != nil {
		os.Remove(partial)
		return BackupInfo{}, fmt.Errorf("store: backup: %w", err)
	}
	syncDir(filepath.Dir(to))
	info.Path = to
	return info, nil
}

// VerifyBackup checks a SQLite backup without changing it: PRAGMA
// integrity_check answers "ok" and the schema version is one this binary
// knows; it counts the tasks and statements.
func VerifyBackup(ctx context.Context, path string) (BackupInfo, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return BackupInfo{}, fmt.Errorf("%w: %v", ErrBadBackup, err)
	}
	if !fi.Mode().IsRegular() {
		return BackupInfo{}, fmt.Errorf("%w: %s is not a regular file", ErrBadBackup, path)
	}
	// immutable: no lock, no -shm, no journal: the file is only read.
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&immutable=1")
	if err != nil {
		return BackupInfo{}, fmt.Errorf("%w: %s: %v", ErrBadBackup, path, err)
	}
	defer db.Close()
	info := BackupInfo{Path: path, Bytes: fi.Size()}
	var check string
	if err := queryRowOn(ctx, db, SQLite, stmtIntegrityCheck).Scan(&check); err != nil {
		return info, fmt.Errorf("%w: %s: integrity_check: %v", ErrBadBackup, path, err)
	}
	if check != "ok" {
		return info, fmt.Errorf("%w: %s: integrity_check says %q", ErrBadBackup, path, check)
	}
	if err := queryRowOn(ctx, db, SQLite, stmtSchemaVersion).Scan(&info.SchemaVersion); err != nil {
		return info, fmt.Errorf("%w: %s: no schema version (not a paddle-monitor database?): %v", ErrBadBackup, path, err)
	}
	if info.SchemaVersion < 1 || info.SchemaVersion > SchemaVersion() {
		return info, fmt.Errorf("%w: %s: schema version %d, this paddle-monitor knows 1 to %d", ErrBadBackup, path, info.SchemaVersion, SchemaVersion())
	}
	if err := queryRowOn(ctx, db, SQLite, stmtCountTasks).Scan(&info.Tasks); err != nil {
		return info, fmt.Errorf("%w: %s: counting tasks: %v", ErrBadBackup, path, err)
	}
	// Statements exist from migration 0010 on.
	if info.SchemaVersion >= statementsVersion {
		if err := queryRowOn(ctx, db, SQLite, stmtCountStatements).Scan(&info.Statements); err != nil {
			return info, fmt.Errorf("%w: %s: counting statements: %v", ErrBadBackup, path, err)
		}
	}
	return info, nil
}

// Restore replaces the SQLite database db with the verified backup from.
// It refuses (ErrInUse) while a monitor serves db. The database it
// replaces is kept beside it, renamed to aside (empty when db did not
// exist); its WAL and shared-memory files are removed first, so that no
// stale WAL is replayed into the restored file.
func Restore(ctx context.Context, from, db string) (info BackupInfo, aside string, err error) {
	if IsPostgresDSN(db) {
		return info, "", errors.New("store: restore writes a SQLite file; restore a PostgreSQL store with pg_restore (docs/monitor.md)")
	}
	if info, err = VerifyBackup(ctx, from); err != nil {
		return info, "", err
	}
	release, err := lockFile(db, syscall.LOCK_EX)
	if err != nil {
		return info, "", err
	}
	defer release()
	tmp := db + ".restoring"
	if err := copyFile(from, tmp); err != nil {
		os.Remove(tmp)
		return info, "", err
	}
	if _, err := os.Stat(db); err == nil {
		aside = fmt.Sprintf("%s.before-restore-%s", db, time.Now().UTC().Format("20060102T150405Z"))
		if err := os.Rename(db, aside); err != nil {
			os.Remove(tmp)
			return info, "", fmt.Errorf("store: restore: keeping the old database: %w", err)
		}
	}
	for _, side := range []string{db + "-wal", db + "-shm", db + "-journal"} {
		if err := os.Remove(side); err != nil && !errors.Is(err, os.ErrNotExist) {
			return info, aside, fmt.Errorf("store: restore: %w", err)
		}
	}
	if err := os.Rename(tmp, db); err != nil {
		return info, aside, fmt.Errorf("store: restore: %w", err)
	}
	syncDir(filepath.Dir(db))
	info.Path = db
	return info, aside, nil
}

// HoldStore marks the SQLite database db as in use until release is
// called (a shared lock: several monitors may serve one file). It fails
// with ErrInUse while a restore holds the file. On PostgreSQL it does
// nothing.
func HoldStore(db string) (release func(), err error) {
	if IsPostgresDSN(db) {
		return func() {}, nil
	}
	return lockFile(db, syscall.LOCK_SH)
}

// lockFile takes flock(how) on path without waiting; a file that does not
// exist needs no lock (nothing serves it).
func lockFile(path string, how int) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, os.ErrNotExist) {
		return func() {}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			if how == syscall.LOCK_EX {
				return nil, fmt.Errorf("%w: %s: a paddle-monitor serve holds it (stop it first)", ErrInUse, path)
			}
			return nil, fmt.Errorf("%w: %s: a restore is replacing it", ErrInUse, path)
		}
		return nil, fmt.Errorf("store: locking %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return fmt.Errorf("store: restore: %w", err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("store: restore: %w", err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("store: restore: copying %s: %w", from, err)
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return fmt.Errorf("store: restore: %w", err)
	}
	return out.Close()
}

func syncFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("store: backup: %w", err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("store: backup: %w", err)
	}
	return nil
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// statementsVersion is the schema version that brings the statements
// (migration 0010_statements.sql): the number of migrations up to it.
var statementsVersion = func() int {
	names, _ := fs.Glob(migrationFiles, "migrations/sqlite/*.sql")
	sort.Strings(names)
	for i, n := range names {
		if path.Base(n) == "0010_statements.sql" {
			return i + 1
		}
	}
	return len(names) + 1
}()
