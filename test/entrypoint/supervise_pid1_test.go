package entrypoint

// Supervise mode as PID 1 of a PID namespace (unshare, as root): the exit
// and signal matrices of tini and dumb-init, signal forwarding from outside
// the namespace, and orphans that must leave no zombie.

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/test/harness"
)

// asPID1 makes a task run its entrypoint as PID 1 of a new PID namespace.
func asPID1(t *testing.T) func(*task) *task {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a PID namespace needs root")
	}
	unshare := harness.Tool(t, "unshare")
	if out, err := exec.Command(unshare, "--pid", "--fork", "--mount-proc", "/bin/true").CombinedOutput(); err != nil {
		t.Skipf("unshare --pid refused here: %v %s", err, out)
	}
	return func(k *task) *task {
		k.Setup = func(c *exec.Cmd) {
			c.Args = append([]string{unshare, "--pid", "--fork", "--mount-proc", bin.entrypoint}, c.Args[1:]...)
			c.Path = unshare
		}
		return k
	}
}

func TestSupervisePID1Matrices(t *testing.T) {
	wrap := asPID1(t)
	t.Run("0-255", func(t *testing.T) { exitMatrix(t, wrap) })
	t.Run("128+signal", func(t *testing.T) { signalMatrix(t, wrap) })
}

func TestSupervisePID1Child(t *testing.T) {
	k := asPID1(t)(supTask(t, bin.report))
	r := k.Run()
	rep := parseReport(t, r.Stdout)
	if rep.PID == 1 || rep.PPID != 1 {
		t.Errorf("command PID %d, parent %d; want the supervisor, PID 1, as its parent", rep.PID, rep.PPID)
	}
}

func TestSupervisePID1ReapsOrphans(t *testing.T) {
	// tini's reaping test: the command leaves orphans behind, which are
	// re-parented to PID 1; none may stay a zombie.
	script := `for i in 1 2 3 4 5; do (sleep 0.1 &) ; done; sleep 1.5
for f in /proc/[0-9]*/status; do grep -q '^State:.*Z' "$f" 2>/dev/null && echo "zombie $f"; done; echo checked`
	k := asPID1(t)(supTask(t, "/bin/sh", "-c", script))
	r := k.Run()
	if r.Code != 0 || strings.TrimSpace(r.Stdout) != "checked" {
		t.Errorf("exit %d, stdout %q (zombies left)\n%s", r.Code, r.Stdout, r.Stderr)
	}
}

func TestSupervisePID1ForwardsSignals(t *testing.T) {
	k := asPID1(t)(supTask(t, bin.sigcatch))
	k.Setenv("SIGCATCH_TERM_EXIT", "3")
	l := startLive(t, k.Command(context.Background()))
	child := readyPID(l) // its PID inside the namespace
	// The supervisor is unshare's child; signals go to it from outside.
	var sup int
	deadline := time.Now().Add(10 * time.Second)
	for sup == 0 && time.Now().Before(deadline) {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(l.cmd.Process.Pid) + "/task/" + strconv.Itoa(l.cmd.Process.Pid) + "/children")
		sup, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	if sup == 0 {
		t.Fatal("supervisor not found under unshare")
	}
	checkForwarding(t, l, sup, child)
}
