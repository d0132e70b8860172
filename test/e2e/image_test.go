//go:build e2e

package e2e

// The image built from Dockerfile.paddle, run by podman as users run it.

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// container is one `podman run` of the test image.
type container struct {
	Opts  []string // podman run options, before the image
	Env   []string // KEY=VALUE, passed with -e
	Cmd   []string // the container's command (the entrypoint's arguments)
	Stdin string
	Name  string // set by run
}

// podman runs podman with the tests' configuration.
func podman(t *testing.T, timeout time.Duration, args ...string) result {
	t.Helper()
	return execute(t, timeout, "", os.Environ(), append([]string{"podman"}, args...)...)
}

// containerName returns a fresh name that says which test made it.
func containerName(t *testing.T) string {
	b := make([]byte, 3)
	rand.Read(b)
	name := strings.ToLower(regexp.MustCompile(`[^A-Za-z0-9]+`).ReplaceAllString(t.Name(), "-"))
	if len(name) > 40 {
		name = name[:40]
	}
	return "pe-e2e-" + strings.Trim(name, "-") + "-" + hex.EncodeToString(b)
}

// args returns the podman run arguments. Never a pull; the host's network,
// so the container reaches the monitor on the host's 127.0.0.1.
func (c *container) args(t *testing.T, detach bool) []string {
	c.Name = containerName(t)
	a := []string{"run", "--pull=never", "--network", "host", "--name", c.Name}
	if detach {
		a = append(a, "--detach")
	} else {
		a = append(a, "--rm", "--interactive")
	}
	a = append(a, c.Opts...)
	for _, e := range c.Env {
		a = append(a, "--env", e)
	}
	a = append(a, testImage)
	return append(a, c.Cmd...)
}

// run runs the container to completion; the result's code is podman's,
// which is the container's exit status.
func (c *container) run(t *testing.T) result {
	t.Helper()
	args := c.args(t, false)
	t.Cleanup(func() { podman(t, time.Minute, "rm", "--force", "--ignore", c.Name) })
	return execute(t, 2*time.Minute, c.Stdin, os.Environ(), append([]string{"podman"}, args...)...)
}

// start starts the container in the background.
func (c *container) start(t *testing.T) {
	t.Helper()
	args := c.args(t, true)
	t.Cleanup(func() { podman(t, time.Minute, "rm", "--force", "--ignore", c.Name) })
	if r := podman(t, time.Minute, args...); r.Code != 0 {
		t.Fatalf("podman %s: exit %d\n%s", strings.Join(args, " "), r.Code, r.Stderr)
	}
}

// reportCmd is the container command that runs reportScript, exiting with exit.
func reportCmd(exit int) []string {
	return []string{"/bin/bash", "-c", reportScript, "report", strconv.Itoa(exit)}
}

// fakeGPUs are the options that give a container two fake GPUs: the fake
// NVML library where the loader finds it.
func fakeGPUs() []string {
	return []string{"--volume", setup.fakeNVML + ":/opt/fakenvml:ro"}
}

var fakeGPUEnv = []string{"LD_LIBRARY_PATH=/opt/fakenvml", "FAKE_NVML_GPUS=2"}

// TestImageRun runs the image as root and as uid 1000, on a read-only root
// with and without a writable labels directory, with no spool volume
// mounted, and checks what the command and the monitor saw.
func TestImageRun(t *testing.T) {
	readOnly := []string{"--read-only", "--tmpfs", "/tmp"}
	// podman mounts a tmpfs on /run of a read-only container unless told
	// not to; Docker does not, so this is what `docker run --read-only` gives.
	readOnlyRun := []string{"--read-only", "--read-only-tmpfs=false", "--tmpfs", "/tmp"}
	user := []string{"--user", "1000:1000"}
	cat := func(parts ...[]string) []string {
		var out []string
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	tests := []struct {
		name       string
		opts       []string
		env        []string
		uid        string
		gpus       bool
		exit       int
		wantLabels bool // the labels file is written at the default path
		mayWarn    bool // a warning is allowed (the spool's directory is read-only)
	}{
		{"uid 1000, read-only root", cat(readOnly, user, fakeGPUs()), fakeGPUEnv, "1000", true, 7, true, false},
		{"root, read-only root", cat(readOnly, fakeGPUs()), fakeGPUEnv, "0", true, 0, true, false},
		{"uid 1000, read-only root, no spool volume", cat(readOnly, user), nil, "1000", false, 0, true, true},
		{"uid 1000, read-only root and /var/run", cat(readOnlyRun, user), nil, "1000", false, 3, true, false},
		{"root, read-only root and /var/run", cat(readOnlyRun), nil, "0", false, 4, true, false},
		{"uid 1000, read-only root, --tmpfs /var/run", cat(readOnlyRun, user, []string{"--tmpfs", "/var/run"}), nil, "1000", false, 0, true, false},
		// No /dev/shm mounted, where the labels path links: one warning.
		{"uid 1000, read-only root, no /dev/shm", cat(readOnlyRun, user, []string{"--ipc", "none"}), nil, "1000", false, 5, false, false},
		{"uid 1000, writable root", cat(user), nil, "1000", false, 0, true, false},
		{"uid 1000, LD_BIND_NOW=1", cat(readOnly, user, fakeGPUs()), append([]string{"LD_BIND_NOW=1"}, fakeGPUEnv...), "1000", true, 0, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := newMonitor(t, 201)
			task := "e2e-" + strings.Trim(regexp.MustCompile(`[^a-z0-9]+`).ReplaceAllString(strings.ToLower(tc.name), "-"), "-")
			c := &container{
				Opts: tc.opts,
				Env: append([]string{
					"PADDLE_TASK_NAME=" + task,
					"PADDLE_PROJECT=e2e",
					"PADDLE_OWNER=ci@example.com",
					"PADDLE_MONITOR_URL=" + m.URL(),
					"PADDLE_ENTRYPOINT_LOG_FORMAT=json",
					"PADDLE_ENTRYPOINT_MODE=exec", // the image's default is supervise (supervise_test.go)
				}, tc.env...),
				Cmd: reportCmd(tc.exit),
			}
			r := c.run(t)
			rep := parseReport(r.Stdout)
			if r.Code != tc.exit {
				t.Fatalf("container exit %d, want the command's %d\nstdout:\n%s\nstderr:\n%s", r.Code, tc.exit, r.Stdout, r.Stderr)
			}
			// The command runs as PID 1, in the process the entrypoint was:
			// exec, not a child.
			if rep.facts["pid"] != "1" || rep.facts["ppid"] != "0" || !strings.HasPrefix(rep.facts["pid1"], "/bin/bash -c ") {
				t.Errorf("command's pid=%s ppid=%s, PID 1 is %q; want the command itself as PID 1",
					rep.facts["pid"], rep.facts["ppid"], rep.facts["pid1"])
			}
			if rep.facts["uid"] != tc.uid {
				t.Errorf("command runs as uid %s, want %s", rep.facts["uid"], tc.uid)
			}
			logs := entrypointLogs(r.Stderr)
			warns := atLeastWarn(logs)
			if !tc.wantLabels {
				if rep.facts["labels"] != "absent" {
					t.Errorf("labels file written on a read-only /var/run: %v", rep.labels)
				}
				if len(warns) != 1 || !strings.Contains(fmt.Sprint(warns[0]), "/var/run/paddle-task.labels") {
					t.Errorf("want exactly one warning, naming /var/run/paddle-task.labels; got %d:\n%s", len(warns), r.Stderr)
				}
			} else {
				if rep.facts["labels"] == "absent" {
					t.Fatalf("no labels file at /var/run/paddle-task.labels\nstderr:\n%s", r.Stderr)
				}
				if rep.facts["labels_mode"] != "644" {
					t.Errorf("labels file mode %s, want 644", rep.facts["labels_mode"])
				}
				first := []string{"task_name", "project", "owner", "gpu_count", "start_time"}
				if len(rep.keys) < len(first) || strings.Join(rep.keys[:len(first)], ",") != strings.Join(first, ",") {
					t.Errorf("labels file keys %v, want the shell script's five first: %v", rep.keys, first)
				}
				if rep.labels["task_name"] != task || rep.labels["owner"] != "ci@example.com" {
					t.Errorf("labels file %v, want task_name=%s owner=ci@example.com", rep.labels, task)
				}
				if id := rep.labels["task_id"]; id == "" || id != rep.facts["task_id_env"] {
					t.Errorf("labels file task_id %q, command's PADDLE_TASK_ID %q: want the same, set", id, rep.facts["task_id_env"])
				}
				for _, w := range warns {
					if !tc.mayWarn || strings.Contains(fmt.Sprint(w), "paddle-task.labels") {
						t.Errorf("unexpected warning %v\nstderr:\n%s", w, r.Stderr)
					}
				}
			}
			wantGPUs := 0
			if tc.gpus {
				wantGPUs = 2
			}
			if tc.wantLabels {
				if rep.labels["gpu_count"] != strconv.Itoa(wantGPUs) {
					t.Errorf("labels file gpu_count=%s, want %d\nstderr:\n%s", rep.labels["gpu_count"], wantGPUs, r.Stderr)
				}
				if tc.gpus && rep.labels["gpu_uuids"] != strings.Join(fakeUUIDs, ",") {
					t.Errorf("labels file gpu_uuids=%s, want %s", rep.labels["gpu_uuids"], strings.Join(fakeUUIDs, ","))
				}
				checkRegistration(t, m, rep.labels, wantGPUs)
			} else if len(m.requests()) != 1 {
				t.Errorf("monitor received %d requests, want the registration", len(m.requests()))
			}
			t.Logf("podman run took %v", r.Elapsed.Round(time.Millisecond))
		})
	}
}

// TestImageConfig checks what the image declares: the exec-form entrypoint,
// the base image's shell as the default command, the spool volume, no forced
// user; and that the default command and the uid-1000 user work.
func TestImageConfig(t *testing.T) {
	r := podman(t, time.Minute, "image", "inspect", testImage)
	var inspect []struct {
		Config struct {
			Entrypoint []string
			Cmd        []string
			User       string
			Volumes    map[string]any
			Env        []string
		}
	}
	if err := json.Unmarshal([]byte(r.Stdout), &inspect); err != nil || len(inspect) != 1 {
		t.Fatalf("podman image inspect: %v\n%s", err, r.Stdout)
	}
	cfg := inspect[0].Config
	if strings.Join(cfg.Entrypoint, " ") != "/usr/local/bin/paddle-entrypoint" {
		t.Errorf("Entrypoint = %q, want [/usr/local/bin/paddle-entrypoint]", cfg.Entrypoint)
	}
	if strings.Join(cfg.Cmd, " ") != "/bin/bash" {
		t.Errorf("Cmd = %q, want [/bin/bash]", cfg.Cmd)
	}
	if cfg.User != "" {
		t.Errorf("User = %q, want none forced", cfg.User)
	}
	// Supervise mode with a heartbeat a minute: running tasks are counted,
	// idle GPUs seen while idle (the binary's own defaults are exec and off).
	for _, want := range []string{"PADDLE_ENTRYPOINT_MODE=supervise", "PADDLE_HEARTBEAT=60s"} {
		if !slices.Contains(cfg.Env, want) {
			t.Errorf("Env = %q, want %s", cfg.Env, want)
		}
	}
	// No VOLUME: Docker would make an anonymous volume per container that
	// nothing drains (docs/image.md says how to mount the spool).
	if len(cfg.Volumes) != 0 {
		t.Errorf("Volumes = %v, want none", cfg.Volumes)
	}

	// No command: the entrypoint runs the base image's shell, which reads
	// the script from stdin.
	c := &container{Stdin: "echo shell-pid=$$ user=$(id -un 1000); exit 5\n", Env: []string{"PADDLE_ENTRYPOINT_LOG=error", "PADDLE_ENTRYPOINT_MODE=exec"}}
	r = c.run(t)
	if r.Code != 5 || !strings.Contains(r.Stdout, "shell-pid=1 user=") || strings.Contains(r.Stdout, "user=\n") {
		t.Errorf("default command: exit %d, stdout %q; want 5 and the shell as PID 1 naming uid 1000\nstderr:\n%s", r.Code, r.Stdout, r.Stderr)
	}

	c = &container{Cmd: []string{"version"}}
	r = c.run(t)
	if r.Code != 0 || strings.TrimSpace(r.Stdout) != "paddle-entrypoint version "+setup.version {
		t.Errorf("version: exit %d, stdout %q; want paddle-entrypoint version %s", r.Code, r.Stdout, setup.version)
	}

	// The image's own directories: /run stays root's; the labels file's
	// default path links (relatively) into /dev/shm; the spool's directory
	// is sticky and writable by all.
	c = &container{Opts: []string{"--user", "1000:1000"}, Cmd: []string{"/bin/bash", "-c",
		"stat -L -c '%n %a %U' /var/run /var/lib/paddle-entrypoint; readlink /var/run/paddle-task.labels"}}
	r = c.run(t)
	want := "/var/run 755 root\n/var/lib/paddle-entrypoint 1777 root\n../dev/shm/paddle-task.labels\n"
	if r.Stdout != want {
		t.Errorf("directories:\n%s\nwant:\n%s\nstderr:\n%s", r.Stdout, want, r.Stderr)
	}
}

// TestImageSpool: with the monitor down, each UID's registration lands in
// its own spool file in the image's volume, or, mounted from the node, in a
// directory shared by the node's tasks; the node-level drainer delivers them.
func TestImageSpool(t *testing.T) {
	const budget = 2 * time.Second
	dead := deadURL(t)
	node := t.TempDir()
	if err := os.Chmod(node, 0o1777); err != nil {
		t.Fatal(err)
	}
	for _, uid := range []string{"1000", "1001"} {
		c := &container{
			Opts: []string{"--read-only", "--tmpfs", "/tmp", "--user", uid + ":" + uid, "--volume", node + ":/var/lib/paddle-entrypoint"},
			Env: []string{
				"PADDLE_TASK_NAME=spooled-" + uid,
				"PADDLE_MONITOR_URL=" + dead,
				"PADDLE_REGISTER_BUDGET=" + budget.String(),
				"PADDLE_ENTRYPOINT_MODE=exec",
			},
			Cmd: reportCmd(0),
		}
		r := c.run(t)
		if r.Code != 0 || parseReport(r.Stdout).facts["pid"] != "1" {
			t.Fatalf("uid %s with the monitor down: exit %d\nstdout:\n%s\nstderr:\n%s", uid, r.Code, r.Stdout, r.Stderr)
		}
		// Bounded start: the budget plus the GPU probe's default 2s plus
		// container start-up.
		if limit := budget + 2*time.Second + 10*time.Second; r.Elapsed > limit {
			t.Errorf("uid %s: container ran %v with a %v budget, want under %v", uid, r.Elapsed, budget, limit)
		}
		fi, err := os.Stat(filepath.Join(node, "spool-"+uid+".db"))
		if err != nil {
			t.Fatalf("uid %s: no spool file in the node's directory: %v\nstderr:\n%s", uid, err, r.Stderr)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if strconv.Itoa(int(st.Uid)) != uid || fi.Mode().Perm() != 0o600 {
			t.Errorf("spool-%s.db: owner %d, mode %v; want %s, 0600", uid, st.Uid, fi.Mode().Perm(), uid)
		}
	}

	// The node's drainer, run from the same image as root.
	m := newMonitor(t, 201)
	c := &container{
		Opts: []string{"--volume", node + ":/var/lib/paddle-entrypoint"},
		Env:  []string{"PADDLE_MONITOR_URL=" + m.URL()},
		Cmd:  []string{"spool", "flush", "--all"},
	}
	r := c.run(t)
	if r.Code != 0 {
		t.Fatalf("spool flush --all: exit %d\nstdout:\n%s\nstderr:\n%s", r.Code, r.Stdout, r.Stderr)
	}
	got := m.taskNames()
	if !got["spooled-1000"] || !got["spooled-1001"] {
		t.Errorf("drainer delivered %v, want both spooled registrations", got)
	}

	// No spool volume at all: a read-only spool directory costs the
	// spool, never the start.
	c = &container{
		Opts: []string{"--read-only", "--tmpfs", "/tmp", "--user", "1000:1000"},
		Env:  []string{"PADDLE_MONITOR_URL=" + dead, "PADDLE_REGISTER_BUDGET=" + budget.String(), "PADDLE_ENTRYPOINT_MODE=exec"},
		Cmd:  reportCmd(9),
	}
	r = c.run(t)
	if r.Code != 9 || parseReport(r.Stdout).facts["pid"] != "1" {
		t.Errorf("read-only spool directory: exit %d, want the command's 9\nstdout:\n%s\nstderr:\n%s", r.Code, r.Stdout, r.Stderr)
	}
}

// TestImageStop: `podman stop` sends SIGTERM to PID 1. After exec that is
// the command, whose own exit status (143 from its handler) reaches podman;
// before exec it is the entrypoint, which stops at once with 128+15.
func TestImageStop(t *testing.T) {
	t.Run("command", func(t *testing.T) {
		c := &container{
			Opts: []string{"--read-only", "--tmpfs", "/tmp", "--user", "1000:1000"},
			Env:  []string{"PADDLE_ENTRYPOINT_MODE=exec"},
			Cmd:  []string{"/bin/bash", "-c", `trap 'echo got-TERM; exit 143' TERM; echo ready; while :; do sleep 0.1; done`},
		}
		c.start(t)
		waitLog(t, c.Name, "ready")
		stopAndCheck(t, c.Name, 143)
		if r := podman(t, time.Minute, "logs", c.Name); !strings.Contains(r.Stdout, "got-TERM") {
			t.Errorf("the command's TERM handler did not run; logs:\n%s%s", r.Stdout, r.Stderr)
		}
	})
	t.Run("before exec", func(t *testing.T) {
		m := newMonitor(t, 0) // holds the registration
		c := &container{
			Opts: []string{"--read-only", "--tmpfs", "/tmp", "--user", "1000:1000"},
			Env:  []string{"PADDLE_MONITOR_URL=" + m.URL(), "PADDLE_REGISTER_BUDGET=60s", "PADDLE_ENTRYPOINT_MODE=exec"},
			Cmd:  []string{"/bin/bash", "-c", "echo command-ran"},
		}
		c.start(t)
		m.waitRequest(t, 30*time.Second)
		stopAndCheck(t, c.Name, 143)
		if r := podman(t, time.Minute, "logs", c.Name); strings.Contains(r.Stdout, "command-ran") {
			t.Errorf("the command ran after SIGTERM; logs:\n%s%s", r.Stdout, r.Stderr)
		}
	})
}

// waitLog waits until the container's output holds s.
func waitLog(t *testing.T, name, s string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if r := podman(t, time.Minute, "logs", name); strings.Contains(r.Stdout, s) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("container %s did not print %q within 30s", name, s)
}

// stopAndCheck stops the container with a long grace period, so a stop
// that needed SIGKILL shows as slow, and checks its exit status.
func stopAndCheck(t *testing.T, name string, want int) {
	t.Helper()
	const grace = 30
	r := podman(t, 2*time.Minute, "stop", "--time", strconv.Itoa(grace), name)
	if r.Code != 0 {
		t.Fatalf("podman stop: exit %d\n%s", r.Code, r.Stderr)
	}
	if r.Elapsed > 10*time.Second {
		t.Errorf("podman stop took %v: SIGTERM did not end the container", r.Elapsed)
	}
	r = podman(t, time.Minute, "inspect", "--format", "{{.State.ExitCode}}", name)
	if got := strings.TrimSpace(r.Stdout); got != strconv.Itoa(want) {
		t.Errorf("exit status after podman stop: %q, want %d\n%s", got, want, r.Stderr)
	}
}
