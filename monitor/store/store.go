// Package store keeps the monitor's tasks in SQLite (a file path: embedded,
// cgo-free) or PostgreSQL (a postgres:// or postgresql:// URL), with one
// schema applied by embedded migrations at open.
//
// Guarantees:
//   - A write that returned nil is durable: SQLite runs in WAL mode with
//     synchronous=FULL (every commit is fsynced, so a registration the
//     monitor answered 2xx survives kill -9 and power loss); PostgreSQL
//     commits with its own fsync.
//   - Every write is atomic, so a request never leaves half a task: one
//     transaction on PostgreSQL; on SQLite one savepoint of a group commit
//     (the writes waiting together share one transaction and one fsync,
//     and each is answered only after the commit).
//   - Every statement of the write path is served by an index (the table
//     in statements.go, whose plans the tests check on both engines).
//   - Several processes may share one PostgreSQL database: migrations take an
//     advisory lock, and the writes of one task_id take another (and are
//     idempotent by (task_id, project, owner), INSERT … ON CONFLICT), so
//     two replicas never store a task twice or both answer "new".
//   - A task is identified by its task_id within the sender's scope: one
//     task_id may name tasks of several projects and owners (a surrogate
//     key, tasks.id, links their GPUs), and a write never reads, changes or
//     answers about a task outside the sender's scope.
//   - Both stores give the same answers to the same calls (the tests run one
//     suite against both).
//   - "Not found" is a nil result with a nil error.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers "pgx"
	_ "modernc.org/sqlite"             // registers "sqlite"
)

// Dialect names the SQL engine behind a Store.
type Dialect string

const (
	SQLite   Dialect = "sqlite"
	Postgres Dialect = "postgres"
)

// Store is the monitor's database. Safe for concurrent use.
type Store struct {
	dialect Dialect
	// w takes every write. On SQLite it is one connection, so writers queue
	// in Go instead of spinning on SQLITE_BUSY; r serves reads in parallel
	// (WAL lets readers run beside the writer). On PostgreSQL both are the
	// same pool.
	w, r *sql.DB
	now  func() time.Time
	// batch groups concurrent writes into one commit (SQLite only; nil on
	// PostgreSQL, where writers run in parallel).
	batch *batcher
	// hb groups concurrent heartbeats into one statement (PostgreSQL
	// only; nil on SQLite, where batch does).
	hb *hbBatcher
	// prep holds the write statements prepared on SQLite's writer
	// connection (see prepared); read-only after Open.
	prep map[*stmt]*sql.Stmt
	// claimGrace, openTTL, maxOpen and log are Options' settings.
	claimGrace, openTTL time.Duration
	maxOpen             int
	log                 *slog.Logger
	// sqliteDSN is the SQLite connection string, for a close's snapshot
	// (closemonth.go); "" on PostgreSQL.
	sqliteDSN string
	// rollups counts the roll-up buckets written (rollup_facts.go).
	rollups *rollupCounts
}

// Options adjust Open.
type Options struct {
	// MustExist refuses a SQLite file that does not exist yet instead of
	// creating it (for `paddle-monitor report`, which must never make an
	// empty database and report nothing).
	MustExist bool
	// Now is the clock (time.Now when nil); tests fix it.
	Now func() time.Time
	// ClaimGrace is how long a task not seen (registration or heartbeat,
	// by the server's receipt time) keeps its claim on a GPU against a
	// registration from outside its scope (DefaultClaimGrace when 0).
	ClaimGrace time.Duration
	// OpenTTL is how long an open task not seen counts as open: for
	// MaxOpenPerToken (DefaultOpenTTL when 0).
	OpenTTL time.Duration
	// MaxOpenPerToken bounds, per token name, the open tasks (without a
	// completion, seen within OpenTTL) and pending completions a sender
	// may have; a registration past it is ErrTooManyOpen
	// (DefaultMaxOpenPerToken when 0; negative: no bound).
	MaxOpenPerToken int
	// Log receives what the store decides on its own (a pending
	// completion that does not fit its registration); discarded when nil.
	Log *slog.Logger
	// maxVersion stops the migrations at that version (0: the latest); the
	// upgrade tests make databases of an older schema with it.
	maxVersion int
}

// Defaults of Options.
const (
	DefaultClaimGrace      = 5 * time.Minute
	DefaultOpenTTL         = 168 * time.Hour
	DefaultMaxOpenPerToken = 100000
)

// ErrNoDatabase is returned by Open with MustExist for a missing SQLite file.
var ErrNoDatabase = errors.New("store: database file does not exist")

// IsPostgresDSN reports whether dsn names a PostgreSQL server rather than a
// SQLite file.
func IsPostgresDSN(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// Now is the store's clock (Options.Now): the instant every read of node
// facts clips at, so that the report and the ledger read to one instant.
func (s *Store) Now() time.Time { return s.now() }

// Open connects to dsn, checks that the database answers, and applies the
// migrations it lacks.
func Open(ctx context.Context, dsn string, opt Options) (*Store, error) {
	s := &Store{now: opt.Now, claimGrace: opt.ClaimGrace, openTTL: opt.OpenTTL, maxOpen: opt.MaxOpenPerToken, log: opt.Log, rollups: new(rollupCounts)}
	if s.now == nil {
		s.now = time.Now
	}
	if s.claimGrace == 0 {
		s.claimGrace = DefaultClaimGrace
	}
	if s.openTTL == 0 {
		s.openTTL = DefaultOpenTTL
	}
	if s.maxOpen == 0 {
		s.maxOpen = DefaultMaxOpenPerToken
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	var err error
	if IsPostgresDSN(dsn) {
		s.dialect = Postgres
		s.w, err = sql.Open("pgx", dsn)
		if err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
		s.w.SetMaxOpenConns(16)
		s.w.SetMaxIdleConns(16)
		s.r = s.w
	} else {
		s.dialect = SQLite
		if dsn == "" {
			return nil, errors.New("store: empty database path")
		}
		if opt.MustExist {
			if _, err := os.Stat(dsn); err != nil {
				return nil, fmt.Errorf("%w: %s", ErrNoDatabase, dsn)
			}
		}
		// synchronous=FULL: WAL's default NORMAL may lose the last commits on
		// power loss; an answered registration must not be lost.
		// _txlock=immediate: a write transaction takes the write lock at BEGIN,
		// so two processes on one file wait (busy_timeout) instead of failing
		// with a lock upgrade deadlock.
		// cache_size(-65536): each connection may cache 64 MiB of pages
		// (SQLite's default is 2 MiB); a month's report over a year of
		// tasks reads a few hundred MiB of b-tree pages, which otherwise
		// come back from the kernel one read(2) at a time. It is a bound,
		// not an allocation: an idle monitor holds little.
		// temp_store(MEMORY): the report's GROUP BY sorts in memory.
		q := "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_pragma=synchronous(FULL)&_pragma=foreign_keys(1)&_pragma=cache_size(-65536)&_pragma=temp_store(MEMORY)&_txlock=immediate"
		s.sqliteDSN = "file:" + dsn + q
		s.w, err = sql.Open("sqlite", "file:"+dsn+q)
		if err != nil {
			return nil, fmt.Errorf("store: %s: %w", dsn, err)
		}
		s.w.SetMaxOpenConns(1)
		s.r, err = sql.Open("sqlite", "file:"+dsn+q)
		if err != nil {
			s.w.Close()
			return nil, fmt.Errorf("store: %s: %w", dsn, err)
		}
		s.r.SetMaxOpenConns(8)
	}
	if err := s.Ping(ctx); err != nil {
		s.Close()
		return nil, err
	}
	if err := s.migrate(ctx, opt.maxVersion); err != nil {
		s.Close()
		return nil, err
	}
	if s.dialect == Postgres && opt.maxVersion == 0 {
		if err := s.openPartitions(ctx); err != nil {
			s.Close()
			return nil, err
		}
	}
	if s.dialect == SQLite {
		// A database held at an older schema (upgrade tests) lacks
		// columns the statements name: they then run unprepared.
		if opt.maxVersion == 0 {
			if err := s.prepareWrites(ctx); err != nil {
				s.Close()
				return nil, err
			}
		}
		s.batch = newBatcher(s)
	} else {
		s.hb = newHBBatcher(s)
	}
	return s, nil
}

// Dialect tells which engine the store runs on.
func (s *Store) Dialect() Dialect { return s.dialect }

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.w.PingContext(ctx); err != nil {
		return fmt.Errorf("store: database unreachable: %w", err)
	}
	return nil
}

// Close releases the connections.
func (s *Store) Close() error {
	if s.batch != nil {
		s.batch.close()
	}
	if s.hb != nil {
		s.hb.close()
	}
	var err error
	for _, ps := range s.prep {
		err = errors.Join(err, ps.Close())
	}
	err = errors.Join(err, s.w.Close())
	if s.r != s.w {
		err = errors.Join(err, s.r.Close())
	}
	return err
}

// bind rewrites q's placeholders for the store's dialect (Dialect.bind).
func (s *Store) bind(q string) string { return s.dialect.bind(q) }

// openPartitions creates the partitions ahead of now, and warns about the
// tables not partitioned (a store older than migration 18 with rows):
// they keep working, retention deleting their rows, until migrate
// --partition.
func (s *Store) openPartitions(ctx context.Context) error {
	left, err := s.Unpartitioned(ctx)
	if err != nil {
		return err
	}
	if len(left) > 0 {
		s.log.Warn("store: tables not partitioned: retention deletes their rows instead of dropping partitions; "+
			"run `paddle-monitor migrate --partition` with the monitors stopped (docs/monitor.md, \"Partitions on PostgreSQL\")",
			"tables", strings.Join(left, ","))
	}
	s.ensurePartitions(ctx)
	return nil
}

// ensurePartitions is EnsurePartitions at now, whose failure (a lock
// not had within its timeout) is logged, not returned: until the next
// round the rows of a missing partition go to the default one.
func (s *Store) ensurePartitions(ctx context.Context) {
	if err := s.EnsurePartitions(ctx, s.now()); err != nil {
		s.log.Warn("store: making partitions ahead failed; tried again at the next round", "err", err)
	}
}

// each calls f on every item in order and returns its results, stopping at
// the first error (with the results before it).
func each[T, R any](items []T, f func(T) (R, error)) ([]R, error) {
	var out []R
	for _, it := range items {
		r, err := f(it)
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}
