//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// drainerImage is Dockerfile.paddle's drainer target.
const drainerImage = "localhost/paddle-entrypoint-drainer:e2e"

// TestDrainerImage builds --target drainer: the static entrypoint alone,
// small, and it drains a node's spool directory as root.
func TestDrainerImage(t *testing.T) {
	rel, err := filepath.Rel(setup.repo, setup.shipped)
	if err != nil {
		t.Fatal(err)
	}
	r := execute(t, 5*time.Minute, "", os.Environ(), "podman", "build", "--pull=never", "--isolation", "chroot", "--layers=false",
		"--file", filepath.Join(setup.repo, "Dockerfile.paddle"), "--target", "drainer",
		"--build-arg", "BASE_IMAGE="+baseImage, "--build-arg", "PREBUILT_DIR="+rel,
		"--tag", drainerImage, setup.repo)
	if r.Code != 0 {
		t.Fatalf("podman build --target drainer: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	r = podman(t, time.Minute, "image", "inspect", "--format", "{{.Size}}", drainerImage)
	size, err := strconv.ParseInt(strings.TrimSpace(r.Stdout), 10, 64)
	if err != nil || size > 20<<20 {
		t.Errorf("drainer image size %q (%v), want under 20 MB", r.Stdout, err)
	}
	t.Logf("drainer image: %.1f MB", float64(size)/(1<<20))

	// Two UIDs spool into the node's directory with the monitor down.
	node := t.TempDir()
	if err := os.Chmod(node, 0o1777); err != nil {
		t.Fatal(err)
	}
	dead := deadURL(t)
	for _, uid := range []string{"1000", "1001"} {
		c := &container{
			Opts: []string{"--user", uid + ":" + uid, "--volume", node + ":/var/lib/paddle-entrypoint"},
			Env:  []string{"PADDLE_TASK_NAME=drained-" + uid, "PADDLE_MONITOR_URL=" + dead, "PADDLE_REGISTER_BUDGET=1s"},
			Cmd:  []string{"/bin/true"},
		}
		if r := c.run(t); r.Code != 0 {
			t.Fatalf("uid %s: exit %d\n%s", uid, r.Code, r.Stderr)
		}
	}

	m := newMonitor(t, 201)
	r = podman(t, 2*time.Minute, "run", "--rm", "--pull=never", "--network", "host",
		"--volume", node+":/var/lib/paddle-entrypoint", "--env", "PADDLE_MONITOR_URL="+m.URL(),
		drainerImage, "spool", "flush", "--all")
	if r.Code != 0 {
		t.Fatalf("drainer spool flush --all: exit %d\nstdout:\n%s\nstderr:\n%s", r.Code, r.Stdout, r.Stderr)
	}
	got := m.taskNames()
	if !got["drained-1000"] || !got["drained-1001"] {
		t.Errorf("drainer delivered %v, want both UIDs' registrations", got)
	}
	r = podman(t, time.Minute, "run", "--rm", "--pull=never", drainerImage, "--version")
	if r.Code != 0 || strings.TrimSpace(r.Stdout) != "paddle-entrypoint version "+setup.version {
		t.Errorf("drainer --version: exit %d, %q", r.Code, r.Stdout)
	}
}
