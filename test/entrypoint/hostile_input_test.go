package entrypoint

// Black-box tests of the trust boundaries: what a hostile neighbour on the
// node, a strange file or a bad answer of the monitor can do to the spool,
// the secrets and the start (docs/security.md, docs/spool.md).

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/spool"
	bolt "go.etcd.io/bbolt"
)

// Every separator the name rule allows hides nothing: identity and card
// numbers written with '_' or '.' are caught like those with '-'.
func TestTrustSensitiveSeparators(t *testing.T) {
	for _, v := range []string{
		"110101_19900307_4514", "110101.19900307.4514", "110101-19900307-4514",
		"4111_1111_1111_1111", "4111.1111.1111.1111", "4111-1111-1111-1111",
	} {
		t.Run(v, func(t *testing.T) {
			k := newTask(t, "labels")
			k.Setenv("PADDLE_LABELS_MODE", "enforce")
			k.Setenv("PADDLE_LABEL_NOTE", v)
			r := k.Run()
			if r.Code != 65 {
				t.Errorf("exit %d, want 65 (sensitive data refused)\nstdout %q\nstderr %q", r.Code, r.Stdout, r.Stderr)
			}
			if strings.Contains(r.Stdout+r.Stderr, v) {
				t.Errorf("the value was printed")
			}
		})
	}
}

// A terminating signal during registration is treated as SIGTERM is: the
// registration is spooled and the exit status is 128+N.
func TestTrustSignalsDuringRegistration(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			m := newRegMonitor(t, "hang")
			k := regTask(t, m.URL, 20*time.Second)
			k.Setenv("PADDLE_TASK_ID", "sig-task")
			got := make(chan struct{}, 1)
			m.onRequest = func(int) {
				select {
				case got <- struct{}{}:
				default:
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c := k.Command(ctx)
			var stderr bytes.Buffer
			c.Stderr = &stderr
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			select {
			case <-got:
			case <-ctx.Done():
				t.Fatal("no registration attempt")
			}
			c.Process.Signal(sig)
			code := exitCode(c.Wait())
			if code != 128+int(sig) {
				t.Errorf("exit %d, want %d\n%s", code, 128+int(sig), stderr.String())
			}
			if strings.Contains(stderr.String(), "goroutine ") {
				t.Errorf("goroutine dump on stderr")
			}
			if p, _ := spoolList(t, k, false); len(p) != 1 || p[0].TaskID != "sig-task" {
				t.Errorf("pending %v, want the registration spooled", taskIDs(p))
			}
		})
	}
}

// A Retry-After too large to parse as a number is capped, not ignored: the
// monitor asked for a wait past the budget, so the start does not retry.
func TestTrustRetryAfterHuge(t *testing.T) {
	m := newRegMonitor(t, "503 Retry-After=99999999999999999999999999", "200")
	k := regTask(t, m.URL, 3*time.Second)
	r := k.Run()
	if r.Code != 0 {
		t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
	}
	if n := len(m.Requests()); n != 1 {
		t.Errorf("%d requests, want 1: the monitor asked for a wait past the budget", n)
	}
	if !strings.Contains(r.Stderr, "outcome=spooled") {
		t.Errorf("registration not spooled:\n%s", r.Stderr)
	}
}

// `spool flush` on a file another process holds locked does not report
// "pending":0: the count is unknown, and the exit status says so.
func TestTrustFlushLockedFile(t *testing.T) {
	m := newRegMonitor(t, "503")
	k := newTask(t)
	spoolPending(t, k, m, "locked-1")
	f, err := os.OpenFile(k.SpoolPath(), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	m.SetScript("200")
	k.Setenv("PADDLE_MONITOR_URL", m.URL)
	r := spoolRun(k, "flush")
	if r.Code == 0 {
		t.Errorf("exit 0 on a locked spool")
	}
	var line map[string]any
	if err := json.Unmarshal([]byte(r.Stdout), &line); err != nil {
		t.Fatalf("stdout %q", r.Stdout)
	}
	if p, ok := line["pending"]; !ok || p != nil {
		t.Errorf("pending %v, want null (unknown) while the file is locked: %s", p, r.Stdout)
	}
	if line["locked"] != true {
		t.Errorf("no locked:true in %s", r.Stdout)
	}
}

// The monitor URL's userinfo is never printed or stored: not in a warning
// about a malformed setting (a trailing newline from a Secret), not in a
// usage error, not in a spool entry's last_error, not in flush's output.
func TestTrustURLUserinfoRedacted(t *testing.T) {
	const pw = "s3cretPassw0rd"
	down := strings.Replace(regDownURL(t), "http://", "http://alice:"+pw+"@", 1)
	check := func(t *testing.T, what, text string) {
		t.Helper()
		if strings.Contains(text, pw) || strings.Contains(text, "alice") {
			t.Errorf("%s holds the URL's userinfo:\n%s", what, text)
		}
	}
	t.Run("trailing newline", func(t *testing.T) {
		k := regTask(t, down+"\n", time.Second)
		r := k.Run()
		check(t, "stderr", r.Stderr)
		if !strings.Contains(r.Stderr, "PADDLE_MONITOR_URL") {
			t.Errorf("the warning does not name the variable:\n%s", r.Stderr)
		}
	})
	t.Run("htp scheme", func(t *testing.T) {
		k := regTask(t, strings.Replace(down, "http://", "htp://", 1), time.Second)
		r := k.Run()
		check(t, "stderr", r.Stderr)
	})
	t.Run("usage error", func(t *testing.T) {
		k := newTask(t, "--monitor-url", strings.Replace(down, "http://", "htp://", 1), "/bin/true")
		r := k.Run()
		if r.Code != 2 {
			t.Errorf("exit %d, want 2", r.Code)
		}
		check(t, "stderr", r.Stderr)
	})
	t.Run("spool and flush", func(t *testing.T) {
		k := regTask(t, down, 500*time.Millisecond)
		k.Setenv("PADDLE_ENTRYPOINT_LOG", "debug")
		r := k.Run()
		check(t, "start's stderr", r.Stderr)
		l := spoolRun(k, "list")
		if !strings.Contains(l.Stdout, "last_error") {
			t.Fatalf("no pending entry with a last_error: %q", l.Stdout)
		}
		check(t, "spool list", l.Stdout)
		f := spoolRun(k, "flush")
		check(t, "flush stdout", f.Stdout)
		check(t, "flush stderr", f.Stderr)
		check(t, "spool list after flush", spoolRun(k, "list").Stdout)
	})
}

// A monitor answer that echoes the token is redacted before it is cut, and
// any long fragment of the token counts as the token.
func TestTrustTokenEchoCut(t *testing.T) {
	tok := strings.Repeat("Zq7vK2mXp9", 60) // 600 characters
	m := newRegMonitor(t, "echo-auth 400")
	k := regTask(t, m.URL, 2*time.Second)
	tf := filepath.Join(k.Dir, "token")
	os.WriteFile(tf, []byte(tok+"\n"), 0o600)
	k.Setenv("PADDLE_MONITOR_TOKEN_FILE", tf)
	k.Setenv("PADDLE_ENTRYPOINT_LOG", "debug")
	r := k.Run()
	if r.Code != 0 {
		t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
	}
	dead := spoolRun(k, "list", "--dead")
	if !strings.Contains(dead.Stdout, "REDACTED") {
		t.Errorf("dead letter does not show the redaction: %q", dead.Stdout)
	}
	for what, text := range map[string]string{"stderr": r.Stderr, "dead letter": dead.Stdout} {
		if strings.Contains(text, tok[:12]) || strings.Contains(text, tok[len(tok)-12:]) {
			t.Errorf("%s holds part of the token:\n%s", what, text)
		}
	}
}

// net/http's own log lines ("Unsolicited response received on idle HTTP
// channel") go through the structured logger: every stderr line is JSON.
func TestTrustNetHTTPLogRouted(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				br := bufio.NewReader(conn)
				for {
					if _, err := readRequest(br); err != nil {
						return
					}
					io.WriteString(conn, "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\nHTTP/1.1 200 OK\r\n\r\n")
				}
			}()
		}
	}()
	k := regTask(t, "http://"+l.Addr().String(), time.Second)
	k.Setenv("PADDLE_ENTRYPOINT_LOG_FORMAT", "json")
	r := k.Run()
	if r.Code != 0 {
		t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
	}
	unsolicited := false
	for _, line := range strings.Split(strings.TrimSpace(r.Stderr), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("stderr line is not JSON: %q", line)
			continue
		}
		if rec["logger"] != "paddle-entrypoint" {
			t.Errorf("record without our logger field: %q", line)
		}
		unsolicited = unsolicited || strings.Contains(line, "Unsolicited")
	}
	if !unsolicited {
		t.Logf("net/http did not complain this time:\n%s", r.Stderr)
	}
}

// readRequest reads one HTTP request (headers and a Content-Length body).
func readRequest(br *bufio.Reader) (string, error) {
	var head strings.Builder
	n := 0
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return "", err
		}
		head.WriteString(line)
		if k, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(k, "Content-Length") {
			fmt.Sscan(strings.TrimSpace(v), &n)
		}
		if line == "\r\n" {
			break
		}
	}
	_, err := io.CopyN(io.Discard, br, int64(n))
	return head.String(), err
}

// Token and CA files are read like the policy file: a FIFO or an endless
// file costs the registration (spooled), never the start.
// A token or CA file that cannot be read safely costs the registration
// (spooled), never the start, and nothing is sent without the credentials
// it asked for: the plain monitor here would accept an unauthenticated
// request, and must see none.
func TestTrustTokenAndCAFiles(t *testing.T) {
	tlsMonitor := newRegMonitorTLS(t, "200")
	plain := newRegMonitor(t, "200")
	for _, c := range []struct{ name, env, kind string }{
		{"token fifo", "PADDLE_MONITOR_TOKEN_FILE", "fifo"},
		{"ca fifo", "PADDLE_MONITOR_CA_FILE", "fifo"},
		{"token endless", "PADDLE_MONITOR_TOKEN_FILE", "zero"},
		{"ca endless", "PADDLE_MONITOR_CA_FILE", "zero"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := tlsMonitor
			if c.env == "PADDLE_MONITOR_TOKEN_FILE" {
				m = plain
			}
			before := len(m.Requests())
			k := regTask(t, m.URL, 2*time.Second)
			k.Timeout = 20 * time.Second
			path := "/dev/zero"
			if c.kind == "fifo" {
				path = filepath.Join(k.Dir, "fifo")
				if err := syscall.Mkfifo(path, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			k.Setenv(c.env, path)
			r := k.Run()
			if r.Code != 0 {
				t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
			}
			if r.Elapsed > 2*time.Second+regMargin {
				t.Errorf("start took %v", r.Elapsed)
			}
			if !strings.Contains(r.Stderr, c.env) {
				t.Errorf("no log names %s:\n%s", c.env, r.Stderr)
			}
			if p, _ := spoolList(t, k, false); len(p) != 1 {
				t.Errorf("pending %v, want the registration spooled", taskIDs(p))
			}
			if n := len(m.Requests()) - before; n != 0 {
				t.Errorf("the monitor got %d request(s) sent without the credentials asked for", n)
			}
		})
	}
}

// Labels cannot forge the record's own keys: in JSON they sit in a
// "labels" group, in text behind a "labels." prefix.
func TestTrustLabelsCannotForgeLogKeys(t *testing.T) {
	for _, format := range []string{"json", "text"} {
		t.Run(format, func(t *testing.T) {
			k := newTask(t, "/bin/true")
			k.Setenv("PADDLE_ENTRYPOINT_LOG_FORMAT", format)
			k.Setenv("PADDLE_LABEL_LEVEL", "error")
			k.Setenv("PADDLE_LABEL_LOGGER", "training")
			k.Setenv("PADDLE_LABEL_MSG", "forged")
			k.Setenv("PADDLE_LABEL_TIME", "yesterday")
			r := k.Run()
			if r.Code != 0 {
				t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
			}
			found := false
			for _, line := range strings.Split(strings.TrimSpace(r.Stderr), "\n") {
				if format == "text" {
					if strings.Contains(line, "task labels") {
						found = true
						for _, forged := range []string{" level=error", " logger=training", " msg=forged", " time=yesterday"} {
							if strings.Contains(line, forged) {
								t.Errorf("label forged %q: %s", forged, line)
							}
						}
						if !strings.Contains(line, "labels.level=error") {
							t.Errorf("label not logged under labels.: %s", line)
						}
					}
					continue
				}
				var rec map[string]any
				if err := json.Unmarshal([]byte(line), &rec); err != nil {
					t.Fatalf("not JSON: %q", line)
				}
				if rec["msg"] != "task labels" {
					continue
				}
				found = true
				if rec["level"] != "INFO" || rec["logger"] != "paddle-entrypoint" {
					t.Errorf("record keys forged: %s", line)
				}
				if lb, _ := rec["labels"].(map[string]any); lb["level"] != "error" || lb["msg"] != "forged" {
					t.Errorf("labels group %v", rec["labels"])
				}
			}
			if !found {
				t.Errorf("no task labels line:\n%s", r.Stderr)
			}
		})
	}
}

// runAs runs the entrypoint copy at path as uid/gid with env and args.
func runAs(t *testing.T, path string, uid, gid uint32, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := exec.CommandContext(ctx, path, args...)
	c.Env = env
	c.Dir = "/"
	c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	start := time.Now()
	err := c.Run()
	if ctx.Err() != nil {
		t.Fatalf("%v did not finish within 30s\n%s", args, stderr.String())
	}
	return result{Stdout: stdout.String(), Stderr: stderr.String(), Code: exitCode(err), Elapsed: time.Since(start)}
}

// sharedSpoolDir is a 1777 directory, like the image's
// /var/lib/paddle-entrypoint, with a copy of the entrypoint every user can
// run.
func sharedSpoolDir(t *testing.T) (dir, entrypoint string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to play several users")
	}
	top, entrypoint := privDir(t)
	dir = filepath.Join(top, "spool")
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	return dir, entrypoint
}

// userEnv is the environment of a start as a user with spool path.
func userEnv(monitor, spoolPath string, extra ...string) []string {
	return append([]string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"PADDLE_LABELS_FILE=/nonexistent/labels",
		"PADDLE_SPOOL_PATH=" + spoolPath,
		"PADDLE_MONITOR_URL=" + monitor,
		"PADDLE_REGISTER_BUDGET=1s",
	}, extra...)
}

// A spool file that another user pre-created in the shared directory (or
// made writable by others) is not used: uid 1000's start does not read it,
// write it, rename it or send what was planted in it, and neither does
// root's drainer; the start still runs its command.
func TestTrustSpoolForeignFile(t *testing.T) {
	dir, ep := sharedSpoolDir(t)
	m := newRegMonitor(t, "503")
	victim := filepath.Join(dir, "spool-1000.db")
	// uid 2000 plants an entry in uid 1000's spool path, then opens it to all.
	r := runAs(t, ep, 2000, 2000, userEnv(m.URL, victim, "PADDLE_TASK_ID=planted-by-2000", "PADDLE_LABEL_NOTE=mine"), "/bin/true")
	if r.Code != 0 {
		t.Fatalf("planting start: exit %d\n%s", r.Code, r.Stderr)
	}
	if err := os.Chmod(victim, 0o666); err != nil {
		t.Fatal(err)
	}
	planted, err := os.ReadFile(victim)
	if err != nil || len(planted) == 0 {
		t.Fatalf("no planted file: %v", err)
	}
	m.SetScript("200")
	before := len(m.Requests())

	r = runAs(t, ep, 1000, 1000, userEnv(m.URL, victim, "PADDLE_TASK_ID=victim-1000"), "/bin/true")
	if r.Code != 0 {
		t.Fatalf("victim start: exit %d\n%s", r.Code, r.Stderr)
	}
	if !strings.Contains(r.Stderr, "not trusted") {
		t.Errorf("no log says the spool file is not trusted:\n%s", r.Stderr)
	}
	// The spool file is refused on the spool's first use: a start whose
	// registration fails.
	m.SetScript("503")
	r = runAs(t, ep, 1000, 1000, userEnv(m.URL, victim, "PADDLE_TASK_ID=victim-1000-b"), "/bin/true")
	if r.Code != 0 || !strings.Contains(r.Stderr, "not trusted") {
		t.Errorf("second victim start: exit %d\n%s", r.Code, r.Stderr)
	}
	m.SetScript("200")
	for _, args := range [][]string{{"spool", "list"}, {"spool", "stats"}, {"spool", "flush"}} {
		r := runAs(t, ep, 1000, 1000, userEnv(m.URL, victim), args...)
		if r.Code == 0 || strings.Contains(r.Stdout, "planted-by-2000") || strings.Contains(r.Stdout, "mine") {
			t.Errorf("uid 1000 %v: exit %d, stdout %q", args, r.Code, r.Stdout)
		}
	}
	// Root's drainer: spool-1000.db belongs to uid 1000, and this one does not.
	r = runAs(t, ep, 0, 0, userEnv(m.URL, filepath.Join(dir, "spool-0.db")), "spool", "flush", "--all")
	if r.Code == 0 {
		t.Errorf("drainer exit 0 although a spool file was refused\n%s", r.Stderr)
	}
	for _, req := range m.Requests()[before:] {
		if strings.Contains(string(req.Body), "planted-by-2000") || req.Key() == "planted-by-2000" {
			t.Errorf("the planted entry was sent: key %q", req.Key())
		}
	}
	if got, _ := os.ReadFile(victim); !bytes.Equal(got, planted) {
		t.Errorf("the other user's file was changed")
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("directory holds %v; nothing may be renamed or created beside the refused file", names)
	}
	// Made private again, it is still uid 2000's file, not uid 1000's.
	os.Chmod(victim, 0o644)
	if r := runAs(t, ep, 1000, 1000, userEnv(m.URL, victim), "spool", "list"); r.Code == 0 || strings.Contains(r.Stdout, "mine") {
		t.Errorf("uid 1000 read uid 2000's file: exit %d, %q", r.Code, r.Stdout)
	}
}

// A symbolic link or a FIFO at a spool path: `spool stats|list|flush`
// answer at once with an error, and a start runs its command.
func TestTrustSpoolNotRegular(t *testing.T) {
	m := newRegMonitor(t, "503")
	for _, kind := range []string{"fifo", "symlink"} {
		t.Run(kind, func(t *testing.T) {
			k := newTask(t)
			k.Setenv("PADDLE_MONITOR_URL", m.URL)
			k.Setenv("PADDLE_REGISTER_BUDGET", "500ms")
			k.Timeout = 10 * time.Second
			target := filepath.Join(k.Dir, "target.db")
			os.WriteFile(target, nil, 0o600)
			var err error
			if kind == "fifo" {
				err = syscall.Mkfifo(k.SpoolPath(), 0o600)
			} else {
				err = os.Symlink(target, k.SpoolPath())
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, args := range [][]string{{"stats"}, {"list"}, {"list", "--dead"}, {"flush"}, {"requeue"}, {"purge", "--dead"}} {
				r := spoolRun(k, args...)
				if r.Code != 1 || !strings.Contains(r.Stderr, "not trusted") {
					t.Errorf("spool %v: exit %d\n%s", args, r.Code, r.Stderr)
				}
			}
			k.Args = []string{"/bin/true"}
			if r := k.Run(); r.Code != 0 {
				t.Errorf("start: exit %d\n%s", r.Code, r.Stderr)
			}
			if fi, err := os.Lstat(k.SpoolPath()); err != nil || fi.Mode().IsRegular() {
				t.Errorf("the %s at the spool path was replaced", kind)
			}
			if b, _ := os.ReadFile(target); len(b) != 0 {
				t.Errorf("the symbolic link's target was written")
			}
		})
	}
}

// A user who keeps swapping their spool file for a FIFO cannot freeze the
// node's drainer: it keeps delivering the other files and stops on SIGTERM.
func TestTrustDrainerFIFOSwap(t *testing.T) {
	m := newRegMonitor(t, "503")
	dir := t.TempDir()
	good := newTask(t)
	good.Setenv("PADDLE_SPOOL_PATH", filepath.Join(dir, "spool-0.db"))
	spoolPending(t, good, m, "drain-a")
	m.SetScript("200")

	fifo := filepath.Join(dir, "spool-1000.db")
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	swapDone := make(chan struct{})
	go func() { // swap a FIFO and a regular file in, as fast as it goes
		defer close(swapDone)
		tmpF, tmpR := filepath.Join(dir, "fifo.tmp"), filepath.Join(dir, "reg.tmp")
		for i := 0; ctx.Err() == nil; i++ {
			if i%2 == 0 {
				syscall.Mkfifo(tmpF, 0o600)
				os.Rename(tmpF, fifo)
			} else {
				os.WriteFile(tmpR, nil, 0o600)
				os.Rename(tmpR, fifo)
			}
			time.Sleep(time.Millisecond)
		}
	}()
	d := newTask(t, "spool", "flush", "--all", "--watch", "--interval", "20ms")
	d.Setenv("PADDLE_SPOOL_PATH", filepath.Join(dir, "spool-0.db"))
	d.Setenv("PADDLE_MONITOR_URL", m.URL)
	c := d.Command(ctx)
	var stderr bytes.Buffer
	c.Stderr = &stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Process.Kill()
	for ctx.Err() == nil && len(m.Delivered()) == 0 {
		time.Sleep(20 * time.Millisecond)
	}
	// Later entries are delivered too: the drainer is not stuck.
	time.Sleep(2 * time.Second) // many passes over the swapping file
	m.SetScript("503")
	spoolPending(t, good, m, "drain-b")
	m.SetScript("200")
	for ctx.Err() == nil && len(m.Delivered()) < 2 {
		time.Sleep(20 * time.Millisecond)
	}
	if got := m.Delivered(); len(got) < 2 {
		t.Errorf("drainer delivered %v, want drain-a and drain-b", got)
	}
	c.Process.Signal(syscall.SIGTERM)
	start := time.Now()
	done := make(chan int, 1)
	go func() { done <- exitCode(c.Wait()) }()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("drainer exit %d on SIGTERM\n%s", code, stderr.String())
		}
		t.Logf("drainer stopped %v after SIGTERM", time.Since(start))
	case <-time.After(5 * time.Second):
		t.Errorf("drainer ignored SIGTERM for 5s\n%s", stderr.String())
	}
	cancel()
	<-swapDone
}

// plant writes entries into a spool file as any program could: through
// the spool package, with whatever task id and payload it likes, as
// written for no token (as the tests' starts write theirs).
func plant(t *testing.T, path string, entries ...spool.Entry) {
	t.Helper()
	s := spool.New(spool.Options{Path: path})
	for _, e := range entries {
		if e.Fingerprint == "" {
			e.Fingerprint = spool.FingerprintNone
		}
		if _, err := s.Enqueue(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}
}

// Every stored payload is checked again before it is sent (name rule,
// sensitive data, the node's policy), and is sent with its own task_id as
// the Idempotency-Key, whatever key the entry around it claims. A payload
// that fails goes to the dead letters with the reason.
func TestTrustStoredPayloadRechecked(t *testing.T) {
	for _, how := range []string{"flush", "start backlog"} {
		t.Run(how, func(t *testing.T) {
			m := newRegMonitor(t, "200")
			k := regTask(t, m.URL, 5*time.Second)
			pol := filepath.Join(k.Dir, "policy.json")
			os.WriteFile(pol, []byte(`{"mode":"warn","labels":{"project":{"allow":["vision","default"]}}}`), 0o644)
			k.Setenv("PADDLE_POLICY_FILE", pol)
			raw := func(s string) json.RawMessage { return json.RawMessage(s) }
			plant(t, k.SpoolPath(),
				spool.Entry{TaskID: "claimed-key", Payload: raw(`{"task_id":"real-id","project":"vision"}`)},
				spool.Entry{TaskID: "card", Payload: raw(`{"task_id":"card","project":"vision","labels":{"note":"4111_1111_1111_1111"}}`)},
				spool.Entry{TaskID: "denied", Payload: raw(`{"task_id":"denied","project":"admin"}`)},
				spool.Entry{TaskID: "forged", Payload: raw(`{"task_id":"forged","task_name":"a\nb"}`)},
				spool.Entry{TaskID: "no-id", Payload: raw(`{"project":"vision"}`)},
			)
			var r result
			if how == "flush" {
				r = spoolRun(k, "flush")
			} else {
				k.Setenv("PADDLE_TASK_ID", "the-start")
				r = k.Run()
			}
			if r.Code != 0 {
				t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
			}
			var keys []string
			for _, req := range m.Requests() {
				keys = append(keys, req.Key())
				if strings.Contains(string(req.Body), "4111") || strings.Contains(string(req.Body), "admin") {
					t.Errorf("refused payload sent: %s", req.Body)
				}
			}
			want := []string{"real-id"}
			if how != "flush" {
				want = []string{"the-start", "real-id"}
			}
			if !slicesEqual(keys, want) {
				t.Errorf("monitor saw keys %v, want %v", keys, want)
			}
			dead, _ := spoolList(t, k, true)
			reasons := map[string]string{}
			for _, e := range dead {
				reasons[e.TaskID] = e.Answer
			}
			for id, why := range map[string]string{"card": "sensitive", "denied": "project", "forged": "name rule", "no-id": "task_id"} {
				if !strings.Contains(reasons[id], why) || !strings.Contains(reasons[id], "not sent") {
					t.Errorf("dead letter %s: answer %q, want the reason (%s)", id, reasons[id], why)
				}
			}
			if strings.Contains(r.Stderr, "4111") {
				t.Errorf("the card number was logged")
			}
			wantStats(t, k, 0, 4)
		})
	}
}

func slicesEqual(a, b []string) bool {
	return strings.Join(a, "\x00") == strings.Join(b, "\x00")
}

// A task's PADDLE_SPOOL_MAX and PADDLE_SPOOL_MAX_AGE bound only what it
// adds; the node's bounds come from the drainer's flags.
func TestTrustTaskBoundsOwnEntriesOnly(t *testing.T) {
	m := newRegMonitor(t, "503")
	k := newTask(t)
	spoolPending(t, k, m, "other-1", "other-2")

	small := *k
	small.Env = append([]string(nil), k.Env...)
	small.Setenv("PADDLE_SPOOL_MAX", "1")
	small.Setenv("PADDLE_SPOOL_MAX_AGE", "1ns")
	spoolPendingAllowLost(t, &small, m, "greedy")
	quick := *k
	quick.Env = append([]string(nil), k.Env...)
	quick.Setenv("PADDLE_SPOOL_MAX_AGE", "1ns")
	spoolPending(t, &quick, m, "short-lived")
	spoolPending(t, k, m, "later")
	// An entry past its own bound moves to the dead letters when the queue
	// is next read (a flush, a start's backlog).
	k.Setenv("PADDLE_MONITOR_URL", m.URL)
	if r := spoolRun(k, "flush"); r.Code != 1 {
		t.Errorf("flush exit %d\n%s", r.Code, r.Stderr)
	}

	pending, _ := spoolList(t, k, false)
	if ids := taskIDs(pending); !slicesEqual(ids, []string{"other-1", "other-2", "later"}) {
		t.Errorf("pending %v: other tasks' entries must survive a task's own bounds", ids)
	}
	dead, _ := spoolList(t, k, true)
	if ids := taskIDs(dead); !slicesEqual(ids, []string{"short-lived"}) || dead[0].Answer != "expired" {
		t.Errorf("dead %+v, want short-lived expired by its own bound", dead)
	}
	if st := spoolStats(t, k); st["dropped"] != 1 {
		t.Errorf("stats %v, want the greedy task's own entry counted as dropped", st)
	}
	// The node's drainer with --spool-max 2 applies it to every entry.
	if r := spoolRun(k, "flush", "--spool-max", "2"); r.Code != 1 {
		t.Errorf("flush exit %d\n%s", r.Code, r.Stderr)
	}
	pending, _ = spoolList(t, k, false)
	if ids := taskIDs(pending); !slicesEqual(ids, []string{"other-2", "later"}) {
		t.Errorf("after the drainer's --spool-max 2: pending %v", ids)
	}
}

// spoolPendingAllowLost is spoolPending for a start whose own bound may
// keep its entry out.
func spoolPendingAllowLost(t *testing.T, k *task, m *regMonitor, id string) {
	t.Helper()
	s := *k
	s.Args = []string{"/bin/true"}
	s.Env = append([]string(nil), k.Env...)
	s.Setenv("PADDLE_MONITOR_URL", m.URL)
	s.Setenv("PADDLE_REGISTER_BUDGET", "200ms")
	s.Setenv("PADDLE_TASK_ID", id)
	if r := s.Run(); r.Code != 0 {
		t.Fatalf("start of %s: exit %d\n%s", id, r.Code, r.Stderr)
	}
}

// oldSpool writes n pending entries queued long ago straight into a bbolt
// file, in one transaction, as a node's spool looks after months.
func oldSpool(t *testing.T, path string, n int, queued time.Time) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		p, _ := tx.CreateBucketIfNotExists([]byte("pending"))
		tx.CreateBucketIfNotExists([]byte("dead"))
		tx.CreateBucketIfNotExists([]byte("meta"))
		for i := 1; i <= n; i++ {
			id := fmt.Sprintf("old-%06d", i)
			v := fmt.Sprintf(`{"id":%d,"record_version":1,"task_id":%q,"payload":{"task_id":%q,"task_name":"x"},"queued_at":%q,"attempts":1}`,
				i, id, id, queued.UTC().Format(time.RFC3339Nano))
			if err := p.Put(binary.BigEndian.AppendUint64(nil, uint64(i)), []byte(v)); err != nil {
				return err
			}
		}
		return p.SetSequence(uint64(n))
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The expiry of a large spool fits the budget: 10^5 entries past the age
// bound, a 1s budget, a monitor that is down: the command starts within
// the budget and its margin; the rest expires in later operations.
func TestTrustExpiryFitsBudget(t *testing.T) {
	k := regTask(t, regDownURL(t), time.Second)
	oldSpool(t, k.SpoolPath(), 100000, time.Now().Add(-60*24*time.Hour))
	r := k.Run()
	if r.Code != 0 {
		t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
	}
	t.Logf("start with 10^5 expired entries: exec after %v", r.Elapsed)
	if r.Elapsed > time.Second+regMargin {
		t.Errorf("start took %v with a 1s budget", r.Elapsed)
	}
	if !strings.Contains(r.Stderr, "outcome=spooled") {
		t.Errorf("registration not spooled:\n%s", r.Stderr)
	}
	st := spoolStats(t, k)
	if st["dead"] == 0 || st["pending"]+st["dead"]+st["dropped"] != 100001 {
		t.Errorf("stats %v: want some expired now, every entry accounted for", st)
	}
}

// poisonMonitor answers 500 to any body naming a "poison" task, 200 to
// the rest, and records the task ids it delivered.
func poisonMonitor(t *testing.T) (url string, delivered func() []string) {
	t.Helper()
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), "poison") {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		mu.Lock()
		got = append(got, r.Header.Get("Idempotency-Key"))
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), got...)
	}
}

// A poison entry (one the monitor answers 5xx forever) does not stall the
// entries behind it, in a flush or in a start's backlog; one retried long
// enough becomes a dead letter.
func TestTrustPoisonEntry(t *testing.T) {
	url, delivered := poisonMonitor(t)
	k := regTask(t, url, 3*time.Second)
	raw := func(id string) spool.Entry {
		return spool.Entry{TaskID: id, Payload: json.RawMessage(`{"task_id":"` + id + `"}`)}
	}
	plant(t, k.SpoolPath(), raw("poison-1"), raw("ok-1"), raw("ok-2"))
	r := spoolRun(k, "flush")
	if r.Code != 1 {
		t.Errorf("flush exit %d, want 1 (poison-1 left pending)\n%s", r.Code, r.Stderr)
	}
	if got := delivered(); !slicesEqual(got, []string{"ok-1", "ok-2"}) {
		t.Errorf("flush delivered %v, want ok-1 and ok-2 past the poison entry", got)
	}
	plant(t, k.SpoolPath(), raw("ok-3"))
	k.Setenv("PADDLE_TASK_ID", "start-1")
	if r := k.Run(); r.Code != 0 {
		t.Fatalf("start exit %d\n%s", r.Code, r.Stderr)
	}
	if got := delivered(); !slicesEqual(got, []string{"ok-1", "ok-2", "start-1", "ok-3"}) {
		t.Errorf("after a start: delivered %v, want its backlog past the poison entry", got)
	}
	old := raw("poison-old")
	old.Attempts = 40
	old.QueuedAt = time.Now().Add(-48 * time.Hour)
	plant(t, k.SpoolPath(), old)
	spoolRun(k, "flush")
	dead, _ := spoolList(t, k, true)
	if len(dead) != 1 || dead[0].TaskID != "poison-old" || !strings.Contains(dead[0].Answer, "gave up") {
		t.Errorf("dead %+v, want poison-old given up", dead)
	}
	if p, _ := spoolList(t, k, false); !slicesEqual(taskIDs(p), []string{"poison-1"}) {
		t.Errorf("pending %v, want poison-1 only", taskIDs(p))
	}
}

// A start on an almost full disk leaves no half-written spool file that
// the next start would call corrupt.
func TestTrustAlmostFullDisk(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small file system")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", dir).Run() })
	filler := filepath.Join(dir, "filler")
	// Leave 8 KiB: less than the 16 KiB a new bbolt file needs.
	if err := os.WriteFile(filler, make([]byte, 56<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	k := regTask(t, regDownURL(t), time.Second)
	k.Setenv("PADDLE_SPOOL_PATH", filepath.Join(dir, "spool.db"))
	k.Setenv("PADDLE_TASK_ID", "full-1")
	if r := k.Run(); r.Code != 0 {
		t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
	}
	os.Remove(filler)
	k.Setenv("PADDLE_TASK_ID", "full-2")
	r := k.Run()
	if r.Code != 0 {
		t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
	}
	if strings.Contains(r.Stderr, "corrupt") {
		t.Errorf("the next start found a corrupt file:\n%s", r.Stderr)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.Name() != "spool.db" {
			t.Errorf("left in the spool directory: %s", e.Name())
		}
	}
	k.Setenv("PADDLE_SPOOL_PATH", filepath.Join(dir, "spool.db"))
	r = spoolRun(k, "list")
	if !strings.Contains(r.Stdout, `"task_id":"full-2"`) {
		t.Errorf("full-2 not pending: %q\n%s", r.Stdout, r.Stderr)
	}
}

// leafPages returns the ids of the bbolt leaf pages of a file (4 KiB pages).
func leafPages(b []byte) []int {
	var ids []int
	for id := 2; (id+1)*4096 <= len(b); id++ {
		p := b[id*4096:]
		if binary.NativeEndian.Uint64(p) == uint64(id) && binary.NativeEndian.Uint16(p[8:]) == 0x02 {
			ids = append(ids, id)
		}
	}
	return ids
}

// Salvage of a corrupt spool keeps every readable leaf: a zeroed page in
// 501 entries loses only that page's entries; a truncated file keeps the
// entries of the pages that are still there.
func TestTrustSalvageEveryLeaf(t *testing.T) {
	for _, c := range []struct {
		name   string
		damage func(b []byte) []byte
		least  int
	}{
		{"one zeroed leaf page", func(b []byte) []byte {
			leaves := leafPages(b)
			id := leaves[len(leaves)/2]
			clear(b[id*4096 : (id+1)*4096])
			return b
		}, 501 - 40},
		{"truncated to half", func(b []byte) []byte { return b[:len(b)/2/4096*4096] }, 150},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := newTask(t)
			oldSpool(t, k.SpoolPath(), 501, time.Now())
			b, err := os.ReadFile(k.SpoolPath())
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(k.SpoolPath(), c.damage(b), 0o600)
			st := spoolStats(t, k)
			t.Logf("%s: %d of 501 entries salvaged", c.name, st["pending"])
			if st["pending"] < c.least || st["pending"] > 501 {
				t.Errorf("salvaged %d of 501 pending entries, want at least %d", st["pending"], c.least)
			}
			p, _ := spoolList(t, k, false)
			for i := 1; i < len(p); i++ {
				if p[i].TaskID <= p[i-1].TaskID {
					t.Fatalf("salvaged entries out of order: %s after %s", p[i].TaskID, p[i-1].TaskID)
				}
			}
		})
	}
}

// The node's drainer delivers what can be salvaged from a corrupt file
// renamed aside, then marks it drained; `spool list` on such a file reads
// it and renames nothing.
func TestTrustDrainerDeliversAside(t *testing.T) {
	m := newRegMonitor(t, "200")
	dir := t.TempDir()
	src := filepath.Join(dir, "src.db")
	oldSpool(t, src, 30, time.Now())
	b, _ := os.ReadFile(src)
	os.Remove(src)
	b[pageHeaderSizeForTest+60] ^= 1 // meta page 0's checksum
	aside := filepath.Join(dir, "spool-0.db.corrupt-1700000000")
	os.WriteFile(aside, b, 0o600)

	k := newTask(t)
	k.Setenv("PADDLE_SPOOL_PATH", aside)
	for i := 0; i < 2; i++ {
		r := spoolRun(k, "list")
		if r.Code != 0 || strings.Count(r.Stdout, "\n") != 30 {
			t.Fatalf("spool list on the aside file: exit %d, %d lines\n%s", r.Code, strings.Count(r.Stdout, "\n"), r.Stderr)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 || ents[0].Name() != filepath.Base(aside) {
		t.Fatalf("spool list renamed or created files: %v", ents)
	}
	// The fixture is of the previous format (no fingerprint): --legacy.
	d := newTask(t, "spool", "flush", "--all", "--legacy")
	d.Setenv("PADDLE_SPOOL_PATH", filepath.Join(dir, "spool-0.db"))
	d.Setenv("PADDLE_MONITOR_URL", m.URL)
	r := d.Run()
	if r.Code != 0 {
		t.Errorf("drainer exit %d\n%s", r.Code, r.Stderr)
	}
	if got := m.Delivered(); len(got) != 30 || got[0] != "old-000001" || got[29] != "old-000030" {
		t.Errorf("delivered %d entries: %v", len(got), got)
	}
	if _, err := os.Stat(aside + ".drained"); err != nil {
		t.Errorf("the aside file was not marked drained: %v", err)
	}
	if r := d.Run(); r.Code != 0 || len(m.Delivered()) != 30 {
		t.Errorf("second pass: exit %d, %d delivered in all", r.Code, len(m.Delivered()))
	}
}

const pageHeaderSizeForTest = 16
