// Package pgserver runs a throwaway PostgreSQL server for tests and
// benchmarks: initdb into a fresh temporary directory, the server on a
// random 127.0.0.1 port with trust authentication, databases created on
// demand, everything removed by Stop. The server dies with the process that
// started it (parent-death signal), so a killed test run leaves nothing
// behind.
//
// PostgreSQL is found under /usr/lib/postgresql/*/bin (Debian's postgresql
// package, newest version first) or on PATH; ErrNotInstalled otherwise.
// Run as root, the server runs as the postgres user (initdb refuses root).
package pgserver

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
	"sync/atomic"
	"syscall"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // "pgx"

	"github.com/paddle-entrypoint/paddle-entrypoint/test/harness"
)

// ErrNotInstalled: no PostgreSQL binaries were found.
var ErrNotInstalled = errors.New("PostgreSQL is not installed (no initdb under /usr/lib/postgresql/*/bin or on PATH)")

// Server is one running PostgreSQL server.
type Server struct {
	dir   string
	port  int
	proc  *os.Process
	done  chan struct{} // closed when the server process has exited
	admin *sql.DB       // connected to the "postgres" database
	next  atomic.Int64  // databases created so far
}

// DSN is the URL of database db on the server.
func (c *Server) DSN(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.port, db)
}

// NewDatabase creates a fresh database and returns its URL.
func (c *Server) NewDatabase(ctx context.Context) (string, error) {
	name := fmt.Sprintf("db_%d", c.next.Add(1))
	if _, err := c.admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		return "", fmt.Errorf("creating database %s: %w", name, err)
	}
	return c.DSN(name), nil
}

// Stop shuts the server down (fast shutdown, then SIGKILL after 20 s) and
// removes its directory.
func (c *Server) Stop() {
	c.admin.Close()
	c.proc.Signal(syscall.SIGINT)
	select {
	case <-c.done:
	case <-time.After(20 * time.Second):
		c.proc.Kill()
		<-c.done
	}
	os.RemoveAll(c.dir)
}

// BinDir is the directory of PostgreSQL's programs (initdb, postgres,
// pg_dump, pg_restore), found as Start finds it: for the tests that run
// the others, so that no test has a lookup of its own.
func BinDir() (string, error) { return binDir() }

// binDir finds the directory of initdb and postgres, the newest version first.
func binDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	if p, err := harness.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", ErrNotInstalled
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

// Start initialises and starts a server, and waits until it answers.
func Start() (*Server, error) {
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
	c := &Server{dir: dir, port: port, proc: srv.Process, done: make(chan struct{})}
	go func() { srv.Wait(); close(c.done) }()
	c.admin, err = sql.Open("pgx", c.DSN("postgres"))
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
