//go:build e2e

package e2e

// The image's default, supervise mode (docs/supervise.md): the entrypoint
// is PID 1, `podman stop` reaches the command's SIGTERM handler, whose exit
// status is the container's, the completion reaches a monitor on the host,
// and orphans leave no zombie.

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestImageSuperviseStop(t *testing.T) {
	m := newMonitor(t, 201)
	c := &container{
		Opts: []string{"--read-only", "--tmpfs", "/tmp", "--user", "1000:1000"},
		Env:  []string{"PADDLE_MONITOR_URL=" + m.URL(), "PADDLE_TASK_ID=e2e-supervised"},
		Cmd: []string{"/bin/bash", "-c", `trap 'echo got-TERM; exit 42' TERM
echo "ready pid=$$ pid1=$(tr '\0' ' ' </proc/1/cmdline)"; while :; do sleep 0.1; done`},
	}
	c.start(t)
	waitLog(t, c.Name, "ready")
	logs := podman(t, time.Minute, "logs", c.Name).Stdout
	if strings.Contains(logs, "ready pid=1 ") || !strings.Contains(logs, "pid1=/usr/local/bin/paddle-entrypoint") {
		t.Errorf("want the entrypoint as PID 1 and the command its child; logs:\n%s", logs)
	}
	stopAndCheck(t, c.Name, 42)
	if r := podman(t, time.Minute, "logs", c.Name); !strings.Contains(r.Stdout, "got-TERM") {
		t.Errorf("the command's TERM handler did not run; logs:\n%s%s", r.Stdout, r.Stderr)
	}
	var completion struct {
		TaskID   string `json:"task_id"`
		ExitCode int    `json:"exit_code"`
		Signal   string `json:"signal"`
	}
	var paths []string
	for _, req := range m.requests() {
		paths = append(paths, req.Path)
		if req.Path == "/v1/task/complete" {
			json.Unmarshal(req.Body, &completion)
			if k := req.Header.Get("Idempotency-Key"); k != "e2e-supervised/complete" {
				t.Errorf("Idempotency-Key %q", k)
			}
		}
	}
	if len(paths) != 2 || paths[0] != "/v1/task/register" || paths[1] != "/v1/task/complete" {
		t.Fatalf("the monitor received %q, want the registration and the completion", paths)
	}
	if completion.TaskID != "e2e-supervised" || completion.ExitCode != 42 || completion.Signal != "" {
		t.Errorf("completion %+v, want exit_code 42 from the handler", completion)
	}
}

func TestImageSuperviseReapsOrphans(t *testing.T) {
	// tini's reaping test, in the image: orphans re-parented to PID 1 are
	// reaped; the command lists any zombie it can see.
	c := &container{
		Env: []string{"PADDLE_ENTRYPOINT_LOG=error"},
		Cmd: []string{"/bin/bash", "-c", `for i in 1 2 3 4 5; do (sleep 0.1 &); done; sleep 1.5
for f in /proc/[0-9]*/status; do grep -q '^State:.*Z' "$f" 2>/dev/null && echo "zombie $f"; done; echo checked; exit 7`},
	}
	r := c.run(t)
	if r.Code != 7 || strings.TrimSpace(r.Stdout) != "checked" {
		t.Errorf("exit %d, stdout %q (zombies left?)\nstderr:\n%s", r.Code, r.Stdout, r.Stderr)
	}
}
