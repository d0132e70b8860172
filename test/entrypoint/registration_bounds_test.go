package entrypoint

// Black-box tests of a start's registration against a strange monitor or
// setting: signals while it runs, a huge Retry-After, token and CA files,
// an expiry inside the budget (docs/registration.md).

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A terminating signal during registration is treated as SIGTERM is: the
// registration is spooled and the exit status is 128+N.
func TestSignalsDuringRegistration(t *testing.T) {
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
func TestRetryAfterHuge(t *testing.T) {
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

// Token and CA files are read like the policy file: a FIFO or an endless
// file costs the registration (spooled), never the start.
// A token or CA file that cannot be read safely costs the registration
// (spooled), never the start, and nothing is sent without the credentials
// it asked for: the plain monitor here would accept an unauthenticated
// request, and must see none.
func TestTokenAndCAFiles(t *testing.T) {
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

// The expiry of a large spool fits the budget: 10^5 entries past the age
// bound, a 1s budget, a monitor that is down: the command starts within
// the budget and its margin; the rest expires in later operations.
func TestExpiryFitsBudget(t *testing.T) {
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
