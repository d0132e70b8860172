package main

// The files the monitor reads (--tokens, --prices, --budgets,
// --namespace-projects): regular
// files only, opened without blocking, 16 MiB at most; a reload on SIGHUP
// never holds up the signal loop and a failed one keeps the tokens in
// force; token --add-to keeps the file's owner, group and mode and never
// follows a link at its lock (docs/monitor.md).

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/monitorproc"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// hostileFiles makes, in dir, the files a monitor must refuse and returns
// each path with what the refusal says about it.
func hostileFiles(t *testing.T, dir string) []struct{ path, says string } {
	t.Helper()
	fifo := filepath.Join(dir, "fifo.json")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	zero := filepath.Join(dir, "zero.json")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	// 17 MiB of a valid JSON prefix: only the size is wrong.
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, []byte(`{"tokens":[]}`+strings.Repeat(" ", 17<<20)), 0o644); err != nil {
		t.Fatal(err)
	}
	return []struct{ path, says string }{
		{fifo, fifo + ": not a regular file: a named pipe"},
		{zero, zero + ": not a regular file: a device"},
		{dir, dir + ": not a regular file: a directory"},
		{big, big + ": file too large: over 16777216 bytes"},
	}
}

// Each file flag of serve, report, ledger and discrepancies, given a FIFO, a link to /dev/zero, a
// directory or a 17 MiB file: exit 1 at once, naming the flag's file and
// what is wrong, nothing served.
func TestMonitorFilesRefused(t *testing.T) {
	dir := t.TempDir()
	db := storetest.SQLiteDSN(t)
	for _, f := range hostileFiles(t, dir) {
		for _, c := range []struct {
			args []string
			what string
		}{
			{[]string{"serve", "--listen", "127.0.0.1:0", "--db", db, "--tokens"}, "tokens file "},
			{[]string{"serve", "--listen", "127.0.0.1:0", "--db", db, "--prices"}, "prices file "},
			{[]string{"serve", "--listen", "127.0.0.1:0", "--db", db, "--budgets"}, "budgets file "},
			{[]string{"report", "--db", db, "--prices"}, "prices file "},
			{[]string{"report", "--db", db, "--budgets"}, "budgets file "},
			{[]string{"serve", "--listen", "127.0.0.1:0", "--db", db, "--namespace-projects"}, "--namespace-projects "},
			{[]string{"ledger", "--db", db, "--namespace-projects"}, "--namespace-projects "},
			{[]string{"discrepancies", "--db", db, "--namespace-projects"}, "--namespace-projects "},
		} {
			r := runMonitor(t, append(c.args, f.path)...)
			// serve's log may come first (no tokens file, a warning).
			want := "paddle-monitor: " + c.what + f.says + "\n"
			if r.code != 1 || !strings.HasSuffix(r.stderr, "\n"+want) && r.stderr != want || r.stdout != "" {
				t.Errorf("%s %s %s: exit %d, stdout %q, stderr %q; want 1 and %q", c.args[0], c.args[len(c.args)-1], f.path, r.code, r.stdout, r.stderr, want)
			}
		}
	}
}

// A SIGHUP while the tokens file is a FIFO (no writer), a link to
// /dev/zero or 17 MiB: each reload fails, is logged naming the file, and
// the tokens in force stay; the signal loop is never held (a later SIGHUP
// reloads a good file, SIGTERM ends the server with 0).
func TestTokensReloadRefusesHostileFiles(t *testing.T) {
	dir := t.TempDir()
	path := tokensFile(t, dir)
	s := startServer(t, storetest.SQLiteDSN(t), "--tokens", path)
	expect(t, s.do(t, get("/v1/tasks", "a-secret")), 200, "")

	for i, f := range hostileFiles(t, t.TempDir()) {
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(f.path, path); err != nil {
			t.Fatal(err)
		}
		s.Signal(syscall.SIGHUP)
		// Through the link, the file named is the tokens file's own path.
		says := strings.Replace(f.says, f.path, path, 1)
		s.waitLogCount(t, `"err":"tokens file `+says+`"`, 1)
		s.waitLogCount(t, "the previous tokens stay in force", i+1)
		expect(t, s.do(t, get("/v1/tasks", "a-secret")), 200, "")
		expect(t, s.do(t, get("/v1/tasks", "s-secret")), 200, "")
	}

	// A good file again: the next SIGHUP applies it (finance revoked).
	os.Remove(path)
	writeFile(t, path, `{"tokens":[{"name":"search","sha256":"`+hashHex("s-secret")+`","projects":["search_*"]}]}`)
	s.Signal(syscall.SIGHUP)
	s.waitLog(t, `"msg":"tokens reloaded","logger":"paddle-monitor","file":"`+path+`","tokens":1`)
	expect(t, s.do(t, get("/v1/tasks", "a-secret")), 401, "")
	expect(t, s.do(t, get("/v1/tasks", "s-secret")), 200, "")

	s.Signal(syscall.SIGTERM)
	if code := s.wait(t); code != 0 {
		t.Fatalf("exit %d after SIGTERM, want 0:\n%s", code, s.Log())
	}
}

// waitLogCount polls the server's log until want occurs n times.
func (s *server) waitLogCount(t *testing.T, want string, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for strings.Count(s.Log(), want) < n {
		if time.Now().After(deadline) {
			t.Fatalf("the log never said %d times %q:\n%s", n, want, s.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A root-made tokens file owned by another user and group (0640), read by a
// monitor that runs as a third user of that group: token --add-to, run as
// root, keeps owner, group and mode, so the monitor still reads the file
// and a SIGHUP applies both the new token and a revocation made with it.
// A link at the lock's name is refused, its target untouched.
func TestTokenAddToKeepsOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (chown, setpriv)")
	}
	const owner, group, monitorUID = 4242, 4243, 4343
	dir := t.TempDir()
	for _, d := range []string{dir, filepath.Dir(dir), filepath.Dir(bin.monitor)} {
		os.Chmod(d, 0o755) // the monitor's user passes through
	}
	path := filepath.Join(dir, "tokens.json")
	writeFile(t, path, `{"tokens": [
  {"name":"search","sha256":"`+hashHex("s-secret")+`","projects":["search_*"]},
  {"name":"leaver","sha256":"`+hashHex("l-secret")+`","projects":["search_*"]}
]}
`)
	mustExec(t, "chown", fmt.Sprint(owner, ":", group), path)
	mustExec(t, "chmod", "0640", path)

	dbDir := filepath.Join(dir, "db")
	os.Mkdir(dbDir, 0o700)
	mustExec(t, "chown", fmt.Sprint(monitorUID, ":", group), dbDir)
	wrapper := filepath.Join(dir, "as-monitor-user")
	script := fmt.Sprintf("#!/bin/sh\nexec setpriv --reuid=%d --regid=%d --clear-groups %s \"$@\"\n", monitorUID, group, bin.monitor)
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	p, err := monitorproc.Start(wrapper, []string{"--listen", "127.0.0.1:0", "--db", filepath.Join(dbDir, "m.db"),
		"--log-format", "json", "--tokens", path}, monitorproc.Options{Env: []string{"PATH=/usr/bin:/bin"}, Dir: dbDir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	s := &server{p}
	expect(t, s.do(t, get("/v1/tasks", "l-secret")), 200, "")

	// The revocation: leaver's line taken out in place (the file keeps its
	// inode and owner); then a new token, added by root.
	b, _ := os.ReadFile(path)
	revoked := strings.Replace(string(b), `,
  {"name":"leaver","sha256":"`+hashHex("l-secret")+`","projects":["search_*"]}`, "", 1)
	if revoked == string(b) {
		t.Fatal("the revocation changed nothing")
	}
	if err := os.WriteFile(path, []byte(revoked), 0o640); err != nil {
		t.Fatal(err)
	}
	r := runMonitor(t, "token", "newcomer", "--project", "search_*", "--add-to", path)
	if r.code != 0 {
		t.Fatalf("token --add-to: exit %d\n%s", r.code, r.stderr)
	}
	newcomer := strings.SplitN(r.stdout, "\n", 2)[0]
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if st.Uid != owner || st.Gid != group || fi.Mode().Perm() != 0o640 {
		t.Errorf("after token --add-to: owner %d, group %d, mode %v; want %d, %d, 0640", st.Uid, st.Gid, fi.Mode().Perm(), owner, group)
	}

	s.Signal(syscall.SIGHUP)
	s.waitLog(t, `"msg":"tokens reloaded","logger":"paddle-monitor","file":"`+path+`","tokens":2`)
	expect(t, s.do(t, get("/v1/tasks", "l-secret")), 401, "")
	expect(t, s.do(t, get("/v1/tasks", newcomer)), 200, "")
	expect(t, s.do(t, get("/v1/tasks", "s-secret")), 200, "")

	// A link planted at the lock's name: refused, the target unchanged.
	target := filepath.Join(dir, "precious")
	os.WriteFile(target, []byte("keep me"), 0o600)
	os.Remove(path + ".lock")
	if err := os.Symlink(target, path+".lock"); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path)
	r = runMonitor(t, "token", "other", "--project", "search_*", "--add-to", path)
	want := "paddle-monitor: tokens file lock " + path + ".lock is a symbolic link: refused (remove it; the lock is a plain file)\n"
	after, _ := os.ReadFile(path)
	if got, _ := os.ReadFile(target); r.code != 1 || r.stderr != want || r.stdout != "" || string(got) != "keep me" || string(before) != string(after) {
		t.Errorf("token --add-to with a link at the lock: exit %d, stdout %q, stderr %q, target %q; want 1 and %q, target and file unchanged",
			r.code, r.stdout, r.stderr, got, want)
	}
}

func mustExec(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}
