package main

// Black-box tests of the trust boundaries: what a hostile neighbour on the
// node, a strange file or a bad answer of the monitor can do to the spool,
// the secrets and the start (docs/security.md, docs/spool.md).

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
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
			m.onRequest = func(int) { got <- struct{}{} }
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
func TestTrustTokenAndCAFiles(t *testing.T) {
	m := newRegMonitorTLS(t, "200")
	for _, c := range []struct{ name, env, kind string }{
		{"token fifo", "PADDLE_MONITOR_TOKEN_FILE", "fifo"},
		{"ca fifo", "PADDLE_MONITOR_CA_FILE", "fifo"},
		{"token endless", "PADDLE_MONITOR_TOKEN_FILE", "zero"},
		{"ca endless", "PADDLE_MONITOR_CA_FILE", "zero"},
	} {
		t.Run(c.name, func(t *testing.T) {
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
