package docs

// monitor.md's PostgreSQL set-up, run as written against a PostgreSQL
// server the test starts (monitor/store/pgserver): the superuser's psql block,
// then the URL file, serve and report, with the server's address, a
// temporary directory for /etc/paddle-monitor and a free port.

import (
	"errors"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/pgserver"
	"github.com/paddle-entrypoint/paddle-entrypoint/test/harness"
)

func TestDocsPostgresSetup(t *testing.T) {
	psql := harness.Tool(t, "psql")
	harness.Tool(t, "curl")
	doc, err := os.ReadFile("monitor.md")
	if err != nil {
		t.Fatal(err)
	}
	sec := regexp.MustCompile("(?s)### PostgreSQL: the role, the database, the URL\n(.*?)\n### ").FindSubmatch(doc)
	if sec == nil {
		t.Fatal("monitor.md has no section \"PostgreSQL: the role, the database, the URL\"")
	}
	blocks := regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllSubmatch(sec[1], -1)
	if len(blocks) != 2 {
		t.Fatalf("%d sh blocks in the section, want 2 (psql, then the URL file)", len(blocks))
	}
	srv, err := pgserver.Start()
	if errors.Is(err, pgserver.ErrNotInstalled) {
		harness.Postgres(t, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	admin := srv.DSN("postgres")
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	repo, _ := filepath.Abs("..")
	c := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(bin, "paddle-monitor"), "./cmd/paddle-monitor")
	c.Dir, c.Env = repo, append(os.Environ(), "CGO_ENABLED=0")
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	script := string(blocks[0][1]) + string(blocks[1][1]) + "kill %1\nwait\n"
	for old, repl := range map[string]string{
		"runuser -u postgres -- psql": "psql '" + admin + "'",
		"/etc/paddle-monitor":         filepath.Join(dir, "etc"),
		"db.example.com:5432":         u.Host,
		"sslmode=require":             "sslmode=disable",
		"127.0.0.1:8080":              "127.0.0.1:" + port,
	} {
		if !strings.Contains(script, old) {
			t.Fatalf("the blocks no longer hold %q:\n%s", old, script)
		}
		script = strings.ReplaceAll(script, old, repl)
	}
	c = exec.Command("timeout", "60", "bash", "-e", "-c", script)
	c.Dir = dir
	c.Env = []string{"PATH=" + bin + ":/usr/local/bin:/usr/bin:/bin", "HOME=" + dir}
	out, err := c.CombinedOutput()
	text := string(out)
	if err != nil {
		t.Fatalf("the set-up failed: %v\n%s", err, text)
	}
	for _, want := range []string{"CREATE ROLE", "CREATE DATABASE", "engine=postgres", "GPU report ", "\ntotal "} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, "etc", "db-url")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("db-url: %v %v, want mode 0600", fi, err)
	}
	// The tables belong to the role, in its own database.
	q := exec.Command(psql, strings.Replace(admin, "/postgres?", "/paddle?", 1), "-Atc",
		"SELECT DISTINCT tableowner FROM pg_tables WHERE schemaname = 'public'")
	if owner, err := q.Output(); err != nil || strings.TrimSpace(string(owner)) != "paddle" {
		t.Errorf("owner of the monitor's tables: %q %v, want paddle", owner, err)
	}
}
