//go:build e2e

package e2e

// TestMain builds what the image ships the way Dockerfile.paddle's builder
// stage does (both executables compiled inside a root file system with the
// base image's glibc), builds the image from Dockerfile.paddle on the local
// stand-in base image, runs the tests, and removes the image.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/test/harness"
)

const (
	// stateDir holds what scripts/e2e-setup.sh prepared.
	stateDir = "/var/tmp/paddle-entrypoint-e2e"
	// baseImage is the local stand-in for a Paddle image, made by
	// scripts/e2e-setup.sh from the Debian 11 root (or, where that is
	// unavailable, from the host's shell and C library).
	baseImage = "localhost/paddle-e2e-base:bullseye"
	// testImage is built from Dockerfile.paddle for the tests.
	testImage = "localhost/paddle-entrypoint:e2e"
	// glibcFloor is the C library of the Paddle 2.6 images (Ubuntu 20.04).
	glibcFloor = "2.31"
	// shippedDir is where, relative to the repository, the executables built
	// against glibcFloor are written and taken by the image build.
	shippedDir = "bin/glibc-2.31"
	// hostShippedDir is used instead where no glibc-2.31 root exists.
	hostShippedDir = "bin/e2e-host"
)

// setup is what TestMain prepared; tests only read it.
var setup struct {
	repo     string // the repository root
	rootfs   string // the Debian 11 root; "" when debootstrap was unavailable
	noRootfs string // why rootfs is ""
	shipped  string // directory of the two executables the image ships
	fakeNVML string // host directory of a libnvidia-ml.so.1 that loads in the image
	version  string // the version the executables were built with
}

func TestMain(m *testing.M) {
	if err := prepare(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	code := m.Run()
	if os.Getenv("PADDLE_E2E_KEEP") == "" {
		exec.Command("podman", "rmi", "--force", testImage).Run()
	}
	os.Exit(code)
}

func prepare() error {
	if os.Geteuid() != 0 {
		return errors.New("the end-to-end tests run podman, chroot and mount as root: run `make e2e` as root")
	}
	repo, err := filepath.Abs("../..")
	if err != nil {
		return err
	}
	setup.repo = repo
	if err := podmanEnv(repo); err != nil {
		return err
	}
	if err := exec.Command("podman", "image", "exists", baseImage).Run(); err != nil {
		return fmt.Errorf("stand-in base image %s missing: run scripts/e2e-setup.sh first (make e2e does)", baseImage)
	}
	setup.version = os.Getenv("PADDLE_E2E_VERSION")
	if setup.version == "" {
		setup.version = "e2e"
	}

	rootfs := filepath.Join(stateDir, "bullseye")
	if _, err := os.Stat(filepath.Join(rootfs, ".paddle-e2e-complete")); err == nil {
		setup.rootfs = rootfs
	} else if why, err := os.ReadFile(filepath.Join(stateDir, "bullseye.unavailable")); err == nil {
		setup.noRootfs = strings.TrimSpace(string(why))
	} else {
		setup.noRootfs = "no Debian 11 root in " + rootfs + " (scripts/e2e-setup.sh makes it)"
	}

	start := time.Now()
	if setup.rootfs != "" {
		err = buildInRoot()
	} else {
		fmt.Fprintf(os.Stderr, "e2e: %s; building with the host's C library, glibc-2.31 tests skip\n", setup.noRootfs)
		err = buildOnHost()
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "e2e: executables built in %v\n", time.Since(start).Round(100*time.Millisecond))

	start = time.Now()
	if err := buildImage(); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "e2e: image %s built in %v\n", testImage, time.Since(start).Round(100*time.Millisecond))
	return nil
}

// podmanEnv points podman at the tests' own configuration and storage.
func podmanEnv(repo string) error {
	driver, err := os.ReadFile(filepath.Join(stateDir, "storage-driver"))
	if err != nil {
		return fmt.Errorf("podman storage not prepared (%v): run scripts/e2e-setup.sh first (make e2e does)", err)
	}
	conf := filepath.Join(repo, "testdata/podman")
	for k, v := range map[string]string{
		"CONTAINERS_CONF":            filepath.Join(conf, "containers.conf"),
		"CONTAINERS_REGISTRIES_CONF": filepath.Join(conf, "registries.conf"),
		"CONTAINERS_STORAGE_CONF":    filepath.Join(conf, "storage-"+strings.TrimSpace(string(driver))+".conf"),
	} {
		if _, err := os.Stat(v); err != nil {
			return err
		}
		os.Setenv(k, v)
	}
	return nil
}

// chrootBuild builds the shipped executables inside the Debian 11 root, as
// Dockerfile.paddle's builder stage does inside the base image: the host's
// Go toolchain, module cache and build cache are bind-mounted in (in a
// private mount namespace, so nothing outlives the build), and the probe's
// cgo links against the root's glibc 2.31. The fake NVML library is built
// there too, so the image and the root can load it.
const chrootBuild = `set -eu
root=$1 repo=$2 goroot=$3 gocache=$4 gomodcache=$5 out=$6 ldflags=$7
for d in go src gocache gomodcache fakenvml; do mkdir -p "$root/opt/e2e/$d"; done
mount --bind "$goroot" "$root/opt/e2e/go"
mount --bind "$repo" "$root/opt/e2e/src"
mount --bind "$gocache" "$root/opt/e2e/gocache"
mount --bind "$gomodcache" "$root/opt/e2e/gomodcache"
mount -t proc proc "$root/proc"
exec chroot "$root" /usr/bin/env -i PATH=/opt/e2e/go/bin:/usr/bin:/bin HOME=/root \
	GOCACHE=/opt/e2e/gocache GOMODCACHE=/opt/e2e/gomodcache GOPROXY=off GOTOOLCHAIN=local \
	GOFLAGS="-trimpath -buildvcs=false -mod=readonly" OUT="$out" LDFLAGS="$ldflags" \
	/bin/sh -euc '
cd /opt/e2e/src
CGO_ENABLED=0 go build -ldflags "$LDFLAGS" -o "$OUT/paddle-entrypoint" .
CGO_ENABLED=1 go build -ldflags "$LDFLAGS" -o "$OUT/paddle-gpu-probe" ./cmd/paddle-gpu-probe
gcc -O2 -shared -fPIC -o /opt/e2e/fakenvml/libnvidia-ml.so.1 testdata/fakenvml/fakenvml.c
'`

func ldflags() string { return "-s -w -X main.version=" + setup.version }

func buildInRoot() error {
	// The build inside the root has no network (GOPROXY=off): the modules
	// come from the host's cache.
	download := exec.Command("go", "mod", "download")
	download.Dir = setup.repo
	if out, err := download.CombinedOutput(); err != nil {
		return fmt.Errorf("go mod download: %v\n%s", err, out)
	}
	goenv := map[string]string{}
	for _, k := range []string{"GOROOT", "GOCACHE", "GOMODCACHE"} {
		out, err := exec.Command("go", "env", k).Output()
		if err != nil {
			return fmt.Errorf("go env %s: %w", k, err)
		}
		goenv[k] = strings.TrimSpace(string(out))
	}
	if err := os.MkdirAll(goenv["GOCACHE"], 0o755); err != nil {
		return err
	}
	setup.shipped = filepath.Join(setup.repo, shippedDir)
	setup.fakeNVML = filepath.Join(setup.rootfs, "opt/e2e/fakenvml")
	c := exec.Command("unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", chrootBuild, "sh",
		setup.rootfs, setup.repo, goenv["GOROOT"], goenv["GOCACHE"], goenv["GOMODCACHE"],
		"/opt/e2e/src/"+shippedDir, ldflags())
	if out, err := c.CombinedOutput(); err != nil {
		return fmt.Errorf("building inside the Debian 11 root: %v\n%s", err, out)
	}
	return nil
}

// buildOnHost is the fallback where no glibc-2.31 root exists: the image
// then ships a probe built against the host's C library, and the base image
// is made from the host's, so the container tests still run.
func buildOnHost() error {
	setup.shipped = filepath.Join(setup.repo, hostShippedDir)
	setup.fakeNVML = filepath.Join(stateDir, "fakenvml-host")
	if err := os.MkdirAll(setup.fakeNVML, 0o755); err != nil {
		return err
	}
	steps := []*exec.Cmd{
		harness.GoBuild(filepath.Join(setup.shipped, "paddle-entrypoint"), ".", false, "-ldflags", ldflags()),
		harness.GoBuild(filepath.Join(setup.shipped, "paddle-gpu-probe"), "./cmd/paddle-gpu-probe", true, "-ldflags", ldflags()),
		harness.CC(filepath.Join(setup.fakeNVML, "libnvidia-ml.so.1"), "testdata/fakenvml/fakenvml.c", "-shared", "-fPIC"),
	}
	for _, c := range steps {
		c.Dir = setup.repo
	}
	return harness.Run(steps...)
}

// buildImage builds Dockerfile.paddle from the repository as its build
// context, through the path that needs no Go image (--target prebuilt).
func buildImage() error {
	rel, err := filepath.Rel(setup.repo, setup.shipped)
	if err != nil {
		return err
	}
	c := exec.Command("podman", "build", "--pull=never", "--isolation", "chroot", "--layers=false",
		"--file", "Dockerfile.paddle",
		"--target", "prebuilt",
		"--build-arg", "BASE_IMAGE="+baseImage,
		"--build-arg", "PREBUILT_DIR="+rel,
		"--tag", testImage, ".")
	c.Dir = setup.repo
	if out, err := c.CombinedOutput(); err != nil {
		return fmt.Errorf("podman build -f Dockerfile.paddle: %v\n%s", err, out)
	}
	return nil
}

// result is what one process showed.
type result struct {
	Stdout, Stderr string
	Code           int // exit status; 128+n when killed by signal n
	Elapsed        time.Duration
}

// execute runs argv to completion within timeout, failing the test if it
// does not finish.
func execute(t *testing.T, timeout time.Duration, stdin string, env []string, argv ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c := exec.CommandContext(ctx, argv[0], argv[1:]...)
	c.Env = env
	c.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	start := time.Now()
	err := c.Run()
	r := result{Stdout: stdout.String(), Stderr: stderr.String(), Elapsed: time.Since(start), Code: exitCode(err)}
	if ctx.Err() != nil {
		t.Fatalf("%s did not finish within %v\nstdout:\n%s\nstderr:\n%s", strings.Join(argv, " "), timeout, r.Stdout, r.Stderr)
	}
	return r
}

func exitCode(err error) int { return harness.ExitCode(err) }
