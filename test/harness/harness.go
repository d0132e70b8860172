// Package harness is what the black-box tests of the built programs share
// (test/entrypoint, e2e): finding the repository, building the executables
// as `make build` does, compiling the C helpers of testdata/, and reading an
// exit status the way a shell reports it.
//
// Guarantees: every build runs from the repository root, so package paths
// ("./cmd/paddle-gpu-probe") and helper sources ("testdata/sigwrap/sigwrap.c")
// are named the same from every test package; nothing here keeps state.
package harness

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// Root returns the repository root: the nearest directory above the
// working directory (a test's package directory) that holds go.mod.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", errors.New("harness: no go.mod above the working directory")
		}
		dir = up
	}
}

// ChdirRoot makes the repository root the working directory, for a
// TestMain whose tests name files relative to it (docs/openapi.yaml,
// scripts/gpu-check.sh).
func ChdirRoot() error {
	root, err := Root()
	if err != nil {
		return err
	}
	if wd, err := os.Getwd(); err == nil && packageDir == "" {
		packageDir = wd
	}
	return os.Chdir(root)
}

// packageDir is the test's package directory when ChdirRoot left it (for
// the skip summary, which names the package).
var packageDir string

// GoBuild returns the command that builds pkg (relative to the working
// directory, the repository root) into out, trimmed as `make build`
// builds it, with cgo on or off and any further flags (-ldflags ...).
func GoBuild(out, pkg string, cgo bool, flags ...string) *exec.Cmd {
	args := append([]string{"build", "-trimpath"}, flags...)
	c := exec.Command("go", append(args, "-o", out, pkg)...)
	enabled := "0"
	if cgo {
		enabled = "1"
	}
	c.Env = append(os.Environ(), "CGO_ENABLED="+enabled)
	return c
}

// CC returns the command that compiles the C helper src (a path under
// testdata/) into out with gcc -O2 and any further flags (-shared -fPIC,
// -DNAME=...).
func CC(out, src string, flags ...string) *exec.Cmd {
	args := append([]string{"-O2"}, flags...)
	return exec.Command("gcc", append(args, "-o", out, src)...)
}

// Run runs each command in order and stops at the first that fails, with
// its arguments and output in the error.
func Run(cmds ...*exec.Cmd) error {
	for _, c := range cmds {
		if out, err := c.CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %w\n%s", strings.Join(c.Args, " "), err, out)
		}
	}
	return nil
}

// ExitCode is the exit status of a finished command as a shell reports it:
// 128+N when signal N killed it, -1 when it did not run.
func ExitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}
