//go:build e2e

package e2e

// The shipped executables inside the Debian 11 root (glibc 2.31, as in the
// Paddle 2.6 images), started as PID 1 of a fresh PID namespace with the
// fake NVML library on the loader's path: no container runtime in between.

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// inRoot runs argv as PID 1 of a new PID and mount namespace, chrooted into
// root, with its own /proc and an empty tmpfs on /run (so nothing is left
// in the root).
func inRoot(t *testing.T, root string, env []string, argv ...string) result {
	t.Helper()
	chroot, err := exec.LookPath("chroot")
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"unshare", "--mount", "--propagation", "private", "--pid", "--fork",
		"--mount-proc=" + filepath.Join(root, "proc"),
		"/bin/sh", "-c", `mount -t tmpfs -o mode=0755 tmpfs "$1/run" && exec "$0" "$@"`, chroot, root}
	return execute(t, time.Minute, "", env, append(args, argv...)...)
}

// install copies the files into a fresh directory of the root and returns
// its path inside the root.
func install(t *testing.T, files ...string) string {
	t.Helper()
	dir, err := os.MkdirTemp(filepath.Join(setup.rootfs, "opt/e2e"), "bin-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	for _, f := range files {
		copyFile(t, f, filepath.Join(dir, filepath.Base(f)))
	}
	return strings.TrimPrefix(dir, setup.rootfs)
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestGlibc231Root(t *testing.T) {
	if setup.rootfs == "" {
		t.Skip(setup.noRootfs + ": the glibc-2.31 run is skipped (TestGlibcFloor still checks the symbol versions)")
	}
	ep := filepath.Join(setup.shipped, "paddle-entrypoint")
	hostProbe := filepath.Join(t.TempDir(), "paddle-gpu-probe")
	tests := []struct {
		name  string
		probe string // the probe beside the entrypoint
		gpus  int
	}{
		// What the image ships: the probe loads on glibc 2.31 and counts
		// the fake library's GPUs.
		{"shipped probe", filepath.Join(setup.shipped, "paddle-gpu-probe"), 2},
		// A probe built on this (newer) host cannot load there: that costs
		// the GPU count, never the start.
		{"host-built probe", hostProbe, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.probe == hostProbe {
				buildHostProbe(t, hostProbe)
			}
			dir := install(t, ep, tc.probe)
			m := newMonitor(t, 200)
			env := []string{
				"PATH=/usr/local/bin:/usr/bin:/bin",
				"LD_LIBRARY_PATH=/opt/e2e/fakenvml",
				"FAKE_NVML_GPUS=2",
				"PADDLE_TASK_NAME=glibc-2-31",
				"PADDLE_MONITOR_URL=" + m.URL(),
				"PADDLE_SPOOL_PATH=off",
				"PADDLE_ENTRYPOINT_LOG_FORMAT=json",
			}
			r := inRoot(t, setup.rootfs, env, dir+"/paddle-entrypoint", "/bin/bash", "-c",
				`echo "glibc=$(ldd --version | head -n1)"; `+reportScript, "report", "7")
			rep := parseReport(r.Stdout)
			if r.Code != 7 || rep.facts["pid"] != "1" {
				t.Fatalf("exit %d, command pid %q; want the command's 7 as PID 1\nstdout:\n%s\nstderr:\n%s", r.Code, rep.facts["pid"], r.Stdout, r.Stderr)
			}
			if !strings.HasSuffix(rep.facts["glibc"], " 2.31") {
				t.Errorf("root's C library: %q, want 2.31", rep.facts["glibc"])
			}
			if rep.labels["task_name"] != "glibc-2-31" || rep.labels["gpu_count"] != map[int]string{0: "0", 2: "2"}[tc.gpus] {
				t.Errorf("labels file %v, want task_name=glibc-2-31 gpu_count=%d\nstderr:\n%s", rep.labels, tc.gpus, r.Stderr)
			}
			checkRegistration(t, m, rep.labels, tc.gpus)
		})
	}
}

// buildHostProbe builds the probe with the host's toolchain and C library,
// as `make build` does.
func buildHostProbe(t *testing.T, out string) {
	t.Helper()
	r := execute(t, 5*time.Minute, "", append(os.Environ(), "CGO_ENABLED=1"),
		"go", "-C", setup.repo, "build", "-trimpath", "-o", out, "./cmd/paddle-gpu-probe")
	if r.Code != 0 {
		t.Fatalf("host build of the probe: %s", r.Stderr)
	}
}
