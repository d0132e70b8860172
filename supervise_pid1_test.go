package main

// Supervise mode as PID 1 of a PID namespace (`unshare --pid --fork
// --mount-proc`, root only): the exit and signal matrices again, a signal
// sent to PID 1 from inside, and orphans reaped by PID 1 itself.

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// asPID1 makes a task run the entrypoint as PID 1 of a new PID namespace.
func asPID1(t *testing.T) func(*task) *task {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a PID namespace needs root")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("no unshare(1)")
	}
	if out, err := exec.Command(unshare, "--pid", "--fork", "--mount-proc", "/bin/true").CombinedOutput(); err != nil {
		t.Skipf("unshare --pid does not work here: %v %s", err, out)
	}
	return func(k *task) *task {
		k.Setup = func(c *exec.Cmd) {
			c.Args = append([]string{unshare, "--pid", "--fork", "--mount-proc", c.Path}, c.Args[1:]...)
			c.Path = unshare
		}
		return k
	}
}

func TestSupervisePID1(t *testing.T) {
	pid1 := asPID1(t)
	t.Run("0-255", func(t *testing.T) { exitMatrix(t, pid1) })
	t.Run("128+signal", func(t *testing.T) { signalMatrix(t, pid1) })
	t.Run("is PID 1", func(t *testing.T) {
		// The command's pid is not 2: the supervisor's threads took the
		// first ids of the namespace.
		r := pid1(supTask(t, "/bin/sh", "-c", `echo "ppid=$PPID pid1=$(cat /proc/1/comm)"; [ $$ != 1 ]`)).Run()
		if r.Code != 0 || strings.TrimSpace(r.Stdout) != "ppid=1 pid1=paddle-entrypoi" {
			t.Errorf("exit %d, stdout %q; want the command a child of the supervisor as PID 1\n%s", r.Code, r.Stdout, r.Stderr)
		}
	})
	t.Run("SIGTERM to PID 1 from inside", func(t *testing.T) {
		// PID 1 ignores a signal it has no handler for; the supervisor
		// catches SIGTERM and forwards it, and the command's trap decides.
		r := pid1(supTask(t, "/bin/sh", "-c", `trap 'exit 42' TERM; kill -TERM 1; sleep 5 & wait`)).Run()
		if r.Code != 42 {
			t.Errorf("exit %d, want 42 from the command's trap\n%s", r.Code, r.Stderr)
		}
	})
	t.Run("orphans reaped", func(t *testing.T) {
		// Three orphans are re-parented to PID 1 and exit; none may be a
		// zombie half a second later.
		script := `for i in 1 2 3; do sh -c 'sleep 0.1 & exit 0'; done
sleep 0.8
grep -l '^State:.*Z' /proc/[0-9]*/status 2>/dev/null | wc -l`
		r := pid1(supTask(t, "/bin/sh", "-c", script)).Run()
		if r.Code != 0 || strings.TrimSpace(r.Stdout) != "0" {
			t.Errorf("exit %d, zombies %q\n%s", r.Code, r.Stdout, r.Stderr)
		}
	})
}
