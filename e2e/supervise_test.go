//go:build e2e

package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestImageSupervise runs the image in its default mode, supervise: the
// entrypoint is PID 1 and the command its child; `podman stop` sends
// SIGTERM to PID 1, which forwards it, and the command's own handler
// decides the exit status; the orphans the command leaves are reaped (no
// zombie); the completion reaches a monitor on the host.
func TestImageSupervise(t *testing.T) {
	m := newMonitor(t, 201)
	c := &container{
		Supervise: true,
		Opts:      []string{"--read-only", "--tmpfs", "/tmp", "--user", "1000:1000"},
		Env:       []string{"PADDLE_MONITOR_URL=" + m.URL(), "PADDLE_TASK_ID=e2e-supervise-1"},
		// Three orphans re-parented to PID 1 as their parents exit at once.
		Cmd: []string{"/bin/bash", "-c", `trap 'echo got-TERM; exit 42' TERM
for i in 1 2 3; do sh -c 'sleep 0.3 & exit 0'; done
echo "ready pid=$$ ppid=$PPID"; while :; do sleep 0.1; done`},
	}
	c.start(t)
	waitLog(t, c.Name, "ready")
	if r := podman(t, time.Minute, "logs", c.Name); !strings.Contains(r.Stdout, "ppid=1") || strings.Contains(r.Stdout, "pid=1 ") {
		t.Errorf("want the command as a child of PID 1 (the supervisor); logs:\n%s", r.Stdout)
	}
	// The orphans exit 300 ms in; none may stay a zombie.
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := podman(t, time.Minute, "exec", c.Name, "/bin/sh", "-c", `grep -l '^State:.*Z' /proc/[0-9]*/status 2>/dev/null | wc -l`)
		if strings.TrimSpace(r.Stdout) == "0" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("zombies left in the container: %q %s", r.Stdout, r.Stderr)
		}
		time.Sleep(200 * time.Millisecond)
	}
	stopAndCheck(t, c.Name, 42)
	if r := podman(t, time.Minute, "logs", c.Name); !strings.Contains(r.Stdout, "got-TERM") {
		t.Errorf("the command's TERM handler did not run; logs:\n%s%s", r.Stdout, r.Stderr)
	}
	var body struct {
		TaskID   string `json:"task_id"`
		ExitCode int    `json:"exit_code"`
	}
	found := false
	for _, req := range m.requests() {
		if req.Path == "/v1/task/complete" {
			found = json.Unmarshal(req.Body, &body) == nil
		}
	}
	if !found || body.TaskID != "e2e-supervise-1" || body.ExitCode != 42 {
		t.Errorf("completion %+v (found %v); requests %d", body, found, len(m.requests()))
	}
}
