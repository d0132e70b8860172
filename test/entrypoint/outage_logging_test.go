package entrypoint

// Black-box tests of what the built entrypoint logs during a monitor
// outage (docs/registration.md, "Outages in the log"): a registration's
// first spooling at warning when it happens, failed heartbeats at warning
// at most once a minute, and a completion whose registration is a dead
// letter logged as such.

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// linesWith returns the lines of log that contain every one of parts.
func linesWith(log string, parts ...string) []string {
	var out []string
	for _, line := range strings.Split(log, "\n") {
		all := line != ""
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			out = append(out, line)
		}
	}
	return out
}

// waitStderr polls l's stderr until a line holds every one of parts, failing
// after 15 s.
func waitStderr(t *testing.T, l *live, parts ...string) string {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if ls := linesWith(l.stderr.String(), parts...); len(ls) > 0 {
			return ls[0]
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no log line with %q within 15s; stderr:\n%s", parts, l.stderr.String())
	return ""
}

// gatedCommand is a command that runs until the file it names exists.
func gatedCommand(dir string) (args []string, open func() error) {
	gate := filepath.Join(dir, "go")
	return []string{"/bin/sh", "-c", "while [ ! -e " + gate + " ]; do sleep 0.05; done"},
		func() error { return os.WriteFile(gate, nil, 0o600) }
}

const spooledWarning = "registration not delivered: kept in the spool"

// In supervise mode the registration runs alongside the command: its
// first failed attempt is logged at warning while the command still runs,
// once, however many attempts follow.
func TestOutageSpoolingWarnedWhileCommandRuns(t *testing.T) {
	m := newSupMonitor(t).answer("/v1/task/register", "503")
	dir := t.TempDir()
	args, open := gatedCommand(dir)
	k := supTask(t, args...)
	k.Setenv("PADDLE_MONITOR_URL", m.URL)
	k.Setenv("PADDLE_TASK_ID", "outage-1")
	k.Setenv("PADDLE_COMPLETE_BUDGET", "300ms")
	l := startLive(t, k.Command(context.Background()))
	line := waitStderr(t, l, "level=WARN", spooledWarning)
	for _, want := range []string{"task_id=outage-1", "attempts=1", "503", "retried while the command runs"} {
		if !strings.Contains(line, want) {
			t.Errorf("warning %q lacks %q", line, want)
		}
	}
	// Still running: the warning came before the command's end.
	if ls := linesWith(l.stderr.String(), "msg=registration", "outcome="); len(ls) != 0 {
		t.Errorf("the registration ended before the command did: %q", ls)
	}
	m.waitFor(t, "/v1/task/register", 2) // a second failed attempt: no second warning
	if err := open(); err != nil {
		t.Fatal(err)
	}
	if code := l.wait(); code != 0 {
		t.Fatalf("exit %d\n%s", code, l.stderr.String())
	}
	if n := len(linesWith(l.stderr.String(), spooledWarning)); n != 1 {
		t.Errorf("%d spooling warnings after %d attempts, want 1:\n%s", n, len(m.requests("/v1/task/register")), l.stderr.String())
	}
	if ls := linesWith(l.stderr.String(), "msg=registration", "outcome=spooled"); len(ls) != 1 {
		t.Errorf("want the registration's outcome line at the end:\n%s", l.stderr.String())
	}
}

// In exec mode the warning comes at the spooling, before the line that
// ends the registration, once.
func TestOutageSpoolingWarnedExecMode(t *testing.T) {
	for _, c := range []struct {
		name, script string
		downURL      bool
	}{
		{"503", "503", false},
		{"connection refused", "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			url := regDownURL(t)
			if !c.downURL {
				url = newRegMonitor(t, c.script).URL
			}
			k := regTask(t, url, 1500*time.Millisecond)
			k.Setenv("PADDLE_TASK_ID", "outage-exec-1")
			r := k.Run()
			if r.Code != 0 {
				t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
			}
			lines := strings.Split(r.Stderr, "\n")
			warn, end := -1, -1
			n := 0
			for i, line := range lines {
				if strings.Contains(line, spooledWarning) {
					n++
					if warn < 0 {
						warn = i
					}
					if !strings.Contains(line, "level=WARN") || !strings.Contains(line, "a later start or spool flush sends it") {
						t.Errorf("spooling line %q: want a warning saying who sends it", line)
					}
				}
				if strings.Contains(line, "msg=registration") && strings.Contains(line, "outcome=spooled") {
					end = i
				}
			}
			if n != 1 || warn < 0 || end < 0 || warn > end {
				t.Errorf("want one spooling warning before the outcome line (warning at %d, outcome at %d, %d warnings):\n%s", warn, end, n, r.Stderr)
			}
			wantStats(t, k, 1, 0)
		})
	}
	// Delivered at once: no warning.
	k := regTask(t, newRegMonitor(t, "201").URL, time.Second)
	if r := k.Run(); r.Code != 0 || strings.Contains(r.Stderr, "level=WARN") {
		t.Errorf("exit %d, a warning without an outage:\n%s", r.Code, r.Stderr)
	}
}

// Heartbeats the monitor refuses: one warning for many failures (the next
// would come a minute later), then, once they are delivered again, one
// line at info.
func TestOutageHeartbeatWarnings(t *testing.T) {
	m := newSupMonitor(t).answer("/v1/task/heartbeat", "503")
	dir := t.TempDir()
	args, open := gatedCommand(dir)
	k := supTask(t, args...)
	k.Setenv("PADDLE_MONITOR_URL", m.URL)
	k.Setenv("PADDLE_HEARTBEAT", "50ms")
	k.Setenv("PADDLE_GPU_SAMPLE", "0")
	k.Setenv("PADDLE_TASK_ID", "beat-1")
	l := startLive(t, k.Command(context.Background()))
	line := waitStderr(t, l, "level=WARN", "heartbeat not delivered")
	for _, want := range []string{"task_id=beat-1", "failed=1", "failed_in_a_row=1", "503"} {
		if !strings.Contains(line, want) {
			t.Errorf("warning %q lacks %q", line, want)
		}
	}
	failed := len(m.waitFor(t, "/v1/task/heartbeat", 6))
	m.answer("/v1/task/heartbeat", "200")
	back := waitStderr(t, l, "level=INFO", "heartbeats delivered again")
	if err := open(); err != nil {
		t.Fatal(err)
	}
	if code := l.wait(); code != 0 {
		t.Fatalf("exit %d\n%s", code, l.stderr.String())
	}
	if n := len(linesWith(l.stderr.String(), "heartbeat not delivered")); n != 1 {
		t.Errorf("%d heartbeat warnings for at least %d failed heartbeats within a minute, want 1:\n%s", n, failed, l.stderr.String())
	}
	if !strings.Contains(back, "task_id=beat-1") || strings.Contains(back, "failed_before=1 ") || !strings.Contains(back, "failed_before=") {
		t.Errorf("recovery line %q: want the task and how many failed (at least %d)", back, failed)
	}
}

// A completion sent while its registration is a dead letter (or was lost,
// the spool off) is not "delivered": the monitor keeps it pending and
// reports nothing of the task.
func TestOutageCompletionOfDeadRegistration(t *testing.T) {
	for _, c := range []struct {
		name, register, spool, fate string
	}{
		{"dead letter", "400", "", "registration=dead"},
		{"lost", "503", "off", "registration=lost"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := newSupMonitor(t).answer("/v1/task/register", c.register)
			k := supTask(t, "/bin/true")
			k.Setenv("PADDLE_MONITOR_URL", m.URL)
			k.Setenv("PADDLE_TASK_ID", "orphan-1")
			k.Setenv("PADDLE_COMPLETE_BUDGET", "500ms")
			if c.spool != "" {
				k.Setenv("PADDLE_SPOOL_PATH", c.spool)
			}
			r := k.Run()
			if r.Code != 0 {
				t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
			}
			if n := len(m.requests("/v1/task/complete")); n != 1 {
				t.Fatalf("%d completions sent, want 1 (the monitor keeps it pending)", n)
			}
			if ls := linesWith(r.Stderr, "outcome=delivered", "completion"); len(ls) != 0 {
				t.Errorf("completion logged as delivered: %q", ls)
			}
			ls := linesWith(r.Stderr, "level=WARN", "completion sent, but the task's registration", "outcome=pending_at_monitor", c.fate, "task_id=orphan-1")
			if len(ls) != 1 {
				t.Errorf("want one warning naming the registration's fate (%s):\n%s", c.fate, r.Stderr)
			}
			if c.fate == "registration=dead" && !strings.Contains(ls[0], "spool requeue") {
				t.Errorf("warning %q does not say how to send the registration again", ls[0])
			}
		})
	}
}
