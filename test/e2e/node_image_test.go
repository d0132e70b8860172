//go:build e2e

package e2e

// The node agent's image (deploy/node/Dockerfile), built on the local
// stand-in base image with the agent and the probe the image ships, run by
// podman as a DaemonSet runs it: the host's PID namespace, the fake NVML
// where the NVIDIA runtime would mount the driver's library.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
	"github.com/paddle-entrypoint/paddle-entrypoint/test/harness"
)

const nodeImage = "localhost/paddle-node:e2e"

func TestNodeImage(t *testing.T) {
	// The static agent beside the probe the image ships (built against
	// the base image's glibc).
	dir := filepath.Join(setup.repo, "bin/e2e-node")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	probe, err := os.ReadFile(filepath.Join(setup.shipped, "paddle-gpu-probe"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "paddle-gpu-probe"), probe, 0o755); err != nil {
		t.Fatal(err)
	}
	build := harness.GoBuild(filepath.Join(dir, "paddle-node"), "./cmd/paddle-node", false, "-ldflags", "-X main.version="+setup.version)
	build.Dir = setup.repo
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/paddle-node: %v\n%s", err, out)
	}
	c := exec.Command("podman", "build", "--pull=never", "--isolation", "chroot", "--layers=false",
		"--file", "deploy/node/Dockerfile",
		"--build-arg", "BASE_IMAGE="+baseImage,
		"--build-arg", "PREBUILT_DIR=bin/e2e-node",
		"--tag", nodeImage, ".")
	c.Dir = setup.repo
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("podman build -f deploy/node/Dockerfile: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command("podman", "rmi", "--force", nodeImage).Run() })

	// A process of the host that the fake NVML lists on GPU 0.
	sleeper := exec.Command("sleep", "300")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleeper.Process.Kill(); sleeper.Wait() })
	state := filepath.Join(t.TempDir(), "state")
	if err := os.WriteFile(state, []byte(fmt.Sprintf("proc 0 compute %d 1048576 33\nutil 0 66\n", sleeper.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	r := podman(t, 2*time.Minute, "run", "--rm", "--pull=never", "--pid", "host", "--cap-add", "SYS_PTRACE",
		"--volume", setup.fakeNVML+":/opt/fakenvml:ro", "--volume", state+":/state:ro",
		"-e", "LD_LIBRARY_PATH=/opt/fakenvml", "-e", "FAKE_NVML_GPUS=2", "-e", "FAKE_NVML_STATE=/state",
		"-e", "PADDLE_NODE_NAME=e2e-node",
		nodeImage, "once", "--interval", "0")
	if r.Code != 0 {
		t.Fatalf("paddle-node once in the image: exit %d\n%s", r.Code, r.Stderr)
	}
	var rep wire.NodeReport
	if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil {
		t.Fatalf("no report: %v\n%s\n%s", err, r.Stdout, r.Stderr)
	}
	if rep.Node != "e2e-node" || rep.Samples != 1 || len(rep.GPUs) != 2 || len(rep.Instances) != 2 {
		t.Fatalf("report %+v", rep)
	}
	g0 := rep.Instances[0]
	if g0.UtilMean == nil || *g0.UtilMean != 66 || len(g0.Users) != 1 || g0.Users[0].SMUtilMean == nil || *g0.Users[0].SMUtilMean != 33 {
		t.Errorf("GPU 0 and the host's process on it: %+v", g0)
	}
	if v := podman(t, time.Minute, "run", "--rm", "--pull=never", nodeImage, "version"); v.Code != 0 || !strings.HasPrefix(v.Stdout, "paddle-node version ") {
		t.Errorf("version in the image: %d %q", v.Code, v.Stdout)
	}
	// The DaemonSet's preStop hook (deploy/kubernetes/paddle-node.yaml),
	// run as the kubelet runs it: in the agent's container, with its
	// environment, on a read-only root with the spool's hostPath mounted.
	// It leaves the mark beside the spool.
	spool := t.TempDir()
	hook := podman(t, time.Minute, "run", "--rm", "--pull=never", "--read-only",
		"--volume", spool+":/var/lib/paddle-node", "-e", "PADDLE_MONITOR_URL=http://paddle-monitor.paddle.svc:8080",
		"--entrypoint", "/usr/local/bin/paddle-node", nodeImage, "final", "--report-spool", "/var/lib/paddle-node/reports.db")
	if hook.Code != 0 {
		t.Fatalf("the preStop hook in the image: exit %d\n%s", hook.Code, hook.Stderr)
	}
	if b, err := os.ReadFile(filepath.Join(spool, "final")); err != nil || string(b) != "final\n" {
		t.Errorf("the mark beside the spool: %q, %v", b, err)
	}
}
