//go:build e2e

package e2e

// Dockerfile.paddle's default target, as `docker build -f
// Dockerfile.paddle .` takes it: the Go toolchain copied from the Go image
// into a builder stage on the base image, the probe built there with cgo
// against the base's glibc. Nothing can be pulled here, so the Go image is
// a local stand-in made from this machine's toolchain, the base a stand-in
// with gcc (as Paddle's images have), and the modules come from the local
// module cache served as a file:// GOPROXY.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const (
	goImage      = "localhost/paddle-e2e-golang:local"
	gccBaseImage = "localhost/paddle-e2e-base:bullseye-gcc"
	sourceImage  = "localhost/paddle-entrypoint:e2e-source"
)

func TestImageSourceBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the default target's cold Go build takes minutes")
	}
	if setup.rootfs == "" {
		t.Skip(setup.noRootfs + ": no glibc-2.31 base with gcc to build on")
	}
	goenv := map[string]string{}
	for _, k := range []string{"GOROOT", "GOMODCACHE"} {
		out, err := exec.Command("go", "env", k).Output()
		if err != nil {
			t.Fatal(err)
		}
		goenv[k] = strings.TrimSpace(string(out))
	}
	importDir(t, goImage, goenv["GOROOT"], "usr/local/go")
	importDir(t, gccBaseImage, setup.rootfs, "")

	start := time.Now()
	r := execute(t, 10*time.Minute, "", os.Environ(), "podman", "build", "--pull=never", "--isolation", "chroot", "--layers=false",
		"--file", filepath.Join(setup.repo, "Dockerfile.paddle"),
		"--build-arg", "BASE_IMAGE="+gccBaseImage,
		"--build-arg", "GO_IMAGE="+goImage,
		"--build-arg", "VERSION="+setup.version,
		"--build-arg", "GOPROXY=file:///goproxy",
		"--volume", filepath.Join(goenv["GOMODCACHE"], "cache/download")+":/goproxy:ro",
		"--tag", sourceImage, setup.repo)
	if r.Code != 0 {
		t.Fatalf("podman build (default target): exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	t.Cleanup(func() { podman(t, time.Minute, "rmi", "--force", sourceImage) })
	t.Logf("source build took %v", time.Since(start).Round(time.Second))

	// The image built from source counts the fake GPUs as uid 1000.
	m := newMonitor(t, 201)
	name := containerName(t)
	r = podman(t, 2*time.Minute, append([]string{"run", "--rm", "--pull=never", "--network", "host", "--name", name,
		"--read-only", "--tmpfs", "/tmp", "--user", "1000:1000",
		"--volume", setup.fakeNVML + ":/opt/fakenvml:ro",
		"--env", "LD_LIBRARY_PATH=/opt/fakenvml", "--env", "FAKE_NVML_GPUS=2",
		"--env", "PADDLE_TASK_NAME=from-source", "--env", "PADDLE_MONITOR_URL=" + m.URL(),
		"--env", "PADDLE_ENTRYPOINT_MODE=exec", // the command as PID 1: the image's default is supervise
		sourceImage}, reportCmd(0)...)...)
	rep := parseReport(r.Stdout)
	if r.Code != 0 || rep.facts["pid"] != "1" || rep.labels["gpu_count"] != "2" {
		t.Fatalf("image built from source: exit %d, pid %s, labels %v\nstderr:\n%s", r.Code, rep.facts["pid"], rep.labels, r.Stderr)
	}
	checkRegistration(t, m, rep.labels, 2)

	dir := t.TempDir()
	c := podman(t, time.Minute, "create", "--name", name, sourceImage)
	if c.Code != 0 {
		t.Fatal(c.Stderr)
	}
	defer podman(t, time.Minute, "rm", "--force", name)
	probe := filepath.Join(dir, "paddle-gpu-probe")
	if r := podman(t, time.Minute, "cp", name+":/usr/local/bin/paddle-gpu-probe", probe); r.Code != 0 {
		t.Fatal(r.Stderr)
	}
	needs, err := glibcNeeds(probe)
	if err != nil {
		t.Fatal(err)
	}
	if bad := tooNew(needs, glibcFloor); len(bad) > 0 {
		t.Errorf("probe built from source needs %v, above glibc %s", bad, glibcFloor)
	}
}

// importDir makes image from the directory dir, placed at prefix in the
// image's root, unless the image exists.
func importDir(t *testing.T, image, dir, prefix string) {
	t.Helper()
	if exec.Command("podman", "image", "exists", image).Run() == nil {
		return
	}
	tarArgs := []string{"-C", dir, "-c", "--exclude=./.paddle-e2e-complete", "--exclude=./opt/e2e"}
	if prefix != "" {
		tarArgs = append(tarArgs, "--transform", "s,^\\.,"+prefix+",")
	}
	tarArgs = append(tarArgs, ".")
	script := `tar "$@" | podman import --change 'CMD ["/bin/bash"]' - "$IMAGE"`
	r := execute(t, 5*time.Minute, "", append(os.Environ(), "IMAGE="+image),
		append([]string{"/bin/sh", "-c", script, "sh"}, tarArgs...)...)
	if r.Code != 0 {
		t.Fatalf("importing %s as %s: %s", dir, image, r.Stderr)
	}
}
