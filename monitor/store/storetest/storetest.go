// Package storetest gives tests a database of each kind the monitor
// supports: a SQLite file in the test's temporary directory, and a fresh
// database on a real PostgreSQL server that this package starts itself
// (initdb into a temporary directory, one server per test binary, on a
// random 127.0.0.1 port, stopped by Main or when the test binary dies;
// see package pgserver).
//
// PostgreSQL is found under /usr/lib/postgresql/*/bin (Debian's postgresql
// package) or on PATH. When it is absent the PostgreSQL half of a test is
// skipped with a message saying so — unless PADDLE_TEST_REQUIRE_POSTGRES=1
// (set by CI), which turns the skip into a failure.
//
// Use:
//
//	func TestMain(m *testing.M) { storetest.Main(m) }
//
//	func TestX(t *testing.T) {
//		storetest.Each(t, func(t *testing.T, dsn string) {
//			s := storetest.Open(t, dsn)
//			…
//		})
//	}
package storetest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/pgserver"
	"github.com/paddle-entrypoint/paddle-entrypoint/test/harness"
)

// RequireEnv is the variable that turns a missing PostgreSQL into a failure.
const RequireEnv = harness.RequirePostgresEnv

// Main runs the package's tests, then stops the PostgreSQL server if a test
// started one. Call it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	Stop()
	os.Exit(code)
}

// Each runs fn twice, as subtests "sqlite" and "postgres", each with the DSN
// of a fresh, empty database.
func Each(t *testing.T, fn func(t *testing.T, dsn string)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) { fn(t, SQLiteDSN(t)) })
	t.Run("postgres", func(t *testing.T) { fn(t, PostgresDSN(t)) })
}

// SQLiteDSN is the path of a database file (not yet created) in the test's
// temporary directory.
func SQLiteDSN(t testing.TB) string {
	return filepath.Join(t.TempDir(), "monitor.db")
}

// PostgresDSN creates a fresh database on the package's PostgreSQL server
// (starting it on first use) and returns its URL. It skips the test when
// PostgreSQL is not installed, or fails it when RequireEnv is 1.
func PostgresDSN(t testing.TB) string {
	t.Helper()
	c, err := start()
	if errors.Is(err, pgserver.ErrNotInstalled) {
		harness.Postgres(t, err) // skips, or fails under RequireEnv=1
	}
	if err != nil {
		t.Fatalf("starting PostgreSQL for the tests: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dsn, err := c.NewDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return dsn
}

// Open opens dsn with store.Open and closes it when the test ends.
func Open(t testing.TB, dsn string) *store.Store {
	t.Helper()
	return OpenWith(t, dsn, store.Options{})
}

// OpenWith is Open with options (a fixed clock).
func OpenWith(t testing.TB, dsn string, opt store.Options) *store.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := store.Open(ctx, dsn, opt)
	if err != nil {
		t.Fatalf("store.Open(%s): %v", dsn, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

var (
	once     sync.Once
	theOne   *pgserver.Server
	startErr error
)

func start() (*pgserver.Server, error) {
	once.Do(func() { theOne, startErr = pgserver.Start() })
	return theOne, startErr
}

// Stop stops the PostgreSQL server if one was started (for a TestMain that
// cannot use Main).
func Stop() {
	if theOne != nil {
		theOne.Stop()
	}
}
