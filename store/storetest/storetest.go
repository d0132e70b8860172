// Package storetest gives tests a database of each kind the monitor
// supports: a SQLite file in the test's temporary directory, and a fresh
// database on a real PostgreSQL server that this package starts itself
// (initdb into a temporary directory, one server per test binary, on a
// random 127.0.0.1 port, stopped by Main or when the test binary dies).
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
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // "pgx"

	"github.com/paddle-entrypoint/paddle-entrypoint/store"
)

// RequireEnv is the variable that turns a missing PostgreSQL into a failure.
const RequireEnv = "PADDLE_TEST_REQUIRE_POSTGRES"

// Main runs the package's tests, then stops the PostgreSQL server if a test
// started one. Call it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	stop()
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
	if errors.Is(err, errNotInstalled) {
		if os.Getenv(RequireEnv) == "1" {
			t.Fatalf("%v, and %s=1", err, RequireEnv)
		}
		t.Skipf("%v (install Debian's postgresql package to run this half; %s=1 makes this a failure)", err, RequireEnv)
	}
	if err != nil {
		t.Fatalf("starting PostgreSQL for the tests: %v", err)
	}
	name := fmt.Sprintf("test_%d", c.next.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("creating database %s: %v", name, err)
	}
	return c.dsn(name)
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

var errNotInstalled = errors.New("PostgreSQL is not installed (no initdb under /usr/lib/postgresql/*/bin or on PATH)")

// cluster is the one PostgreSQL server of this test binary.
type cluster struct {
	dir   string
	port  int
	proc  *os.Process
	done  chan struct{} // closed when the server process has exited
	admin *sql.DB       // connected to the "postgres" database
	next  atomic.Int64  // databases created so far
}

func (c *cluster) dsn(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.port, db)
}

var (
	once     sync.Once
	theOne   *cluster
	startErr error
)

func start() (*cluster, error) {
	once.Do(func() { theOne, startErr = startCluster() })
	return theOne, startErr
}

func stop() {
	if theOne == nil {
		return
	}
	theOne.admin.Close()
	// SIGINT: PostgreSQL's fast shutdown (abort transactions, exit).
	theOne.proc.Signal(syscall.SIGINT)
	select {
	case <-theOne.done:
	case <-time.After(20 * time.Second):
		theOne.proc.Kill()
		<-theOne.done
	}
	os.RemoveAll(theOne.dir)
}

// binDir finds the directory of initdb and postgres, the newest version first.
func binDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errNotInstalled
}

func version(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

// credential runs PostgreSQL as the postgres user when the tests run as root
// (initdb refuses root), as the current user otherwise.
func credential(dir string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, and no postgres user to run PostgreSQL as: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(dir, uid, gid); err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func startCluster() (*cluster, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "paddle-pg-")
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, err
	}
	cred, err := credential(dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	port, err := freePort()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	defer logf.Close()
	srv := exec.Command(filepath.Join(bin, "postgres"), "-D", data,
		"-p", strconv.Itoa(port),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories="+dir,
		"-c", "max_connections=300",
		"-c", "shared_buffers=32MB")
	srv.Stdout, srv.Stderr = logf, logf
	// Pdeathsig: a test binary killed by `go test -timeout` or ^C takes its
	// server down with it (SIGQUIT: immediate shutdown).
	srv.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGQUIT, Setpgid: true}
	if err := srv.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("starting postgres: %w", err)
	}
	c := &cluster{dir: dir, port: port, proc: srv.Process, done: make(chan struct{})}
	go func() { srv.Wait(); close(c.done) }()
	c.admin, err = sql.Open("pgx", c.dsn("postgres"))
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err = c.admin.PingContext(ctx)
		cancel()
		if err == nil {
			return c, nil
		}
		select {
		case <-c.done:
			log, _ := os.ReadFile(filepath.Join(dir, "server.log"))
			os.RemoveAll(dir)
			return nil, fmt.Errorf("postgres exited at start:\n%s", log)
		default:
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "server.log"))
			c.admin.Close()
			c.proc.Kill()
			<-c.done
			os.RemoveAll(dir)
			return nil, fmt.Errorf("postgres did not answer within 30s: %v\n%s", err, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
