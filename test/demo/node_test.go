package main

// The demo's last step as `make demo` runs it, as root on a machine with v1
// pids cgroups: its ledger in GPU-seconds has all four observed states
// (the container attributed, the pod undeclared, the stray process
// unattributed, GPU 1 without a user unallocated) and adds up to capacity,
// by node and by state.

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func TestDemoLedgerAddsUp(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole demo")
	}
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc not found: the demo's fake GPUs cannot be built")
	}
	if os.Geteuid() != 0 {
		t.Skip("not root: the demo's container has no root of its own, nothing is attributed")
	}
	if _, err := os.Stat("/sys/fs/cgroup/pids/cgroup.procs"); err != nil {
		t.Skip("no v1 pids cgroup hierarchy")
	}
	root := t.TempDir()
	repo, _ := filepath.Abs("../..")
	if err := os.Symlink(filepath.Join(repo, "testdata"), filepath.Join(root, "testdata")); err != nil {
		t.Fatal(err)
	}
	for _, b := range []struct{ out, pkg, cgo string }{
		{"bin/paddle-entrypoint", ".", "0"}, {"bin/paddle-gpu-probe", "./cmd/paddle-gpu-probe", "1"},
		{"bin/paddle-monitor", "./cmd/paddle-monitor", "0"}, {"bin/paddle-node", "./cmd/paddle-node", "0"}, {"demo", "./test/demo", "0"},
	} {
		c := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(root, b.out), b.pkg)
		c.Dir, c.Env = repo, append(os.Environ(), "CGO_ENABLED="+b.cgo)
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", b.pkg, err, out)
		}
	}
	c := exec.Command(filepath.Join(root, "demo"))
	c.Dir = root
	c.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "TMPDIR=" + t.TempDir()}
	b, err := c.CombinedOutput()
	out := string(b)
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out)
	}
	for _, want := range []string{
		"as the kubelet places a container)", `"namespace": "team-a"`, `"pod": "embed-job-0"`,
		"capacity = attributed + undeclared + unattributed + unallocated + unobserved",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in the demo's output", want)
		}
	}
	num := `\s+(\d+\.\d)`
	node := regexp.MustCompile(`(?m)^\s+demo-node` + strings.Repeat(num, 7) + `$`).FindStringSubmatch(out)
	total := regexp.MustCompile(`(?m)^\s+TOTAL` + strings.Repeat(num, 7) + `$`).FindStringSubmatch(out)
	if node == nil || total == nil {
		t.Fatalf("no ledger by node in GPU-seconds:\n%s", out)
	}
	f := func(s string) float64 { v, _ := strconv.ParseFloat(s, 64); return v }
	capacity, check := f(node[1]), f(node[7])
	sum := 0.0
	for i, state := range []string{"attributed", "undeclared", "unattributed", "unallocated"} {
		if f(node[2+i]) <= 0 {
			t.Errorf("%s: %s GPU-seconds, want > 0\n%s", state, node[2+i], node[0])
		}
	}
	for _, s := range node[2:7] {
		sum += f(s)
	}
	// Each figure is rounded to a tenth of a second: the five may be
	// 0.25 away from capacity.
	if capacity <= 0 || sum < capacity-0.25 || sum > capacity+0.25 || check != 0 {
		t.Errorf("capacity %v, the five states add up to %v, check %v\n%s", capacity, sum, check, node[0])
	}
	if total[1] != node[1] {
		t.Errorf("total capacity %s, the one node's %s", total[1], node[1])
	}
	// By state: the same five figures and the same total.
	for i, state := range []string{"attributed", "undeclared", "unattributed", "unallocated", "unobserved"} {
		if !regexp.MustCompile(`(?m)^\s+` + state + `\s+` + regexp.QuoteMeta(node[2+i]) + `$`).MatchString(out) {
			t.Errorf("by state: no %s %s GPU-seconds\n%s", state, node[2+i], out)
		}
	}
	if !regexp.MustCompile(`(?m)^\s+TOTAL\s+` + regexp.QuoteMeta(node[1]) + `$`).MatchString(out) {
		t.Errorf("by state: total is not capacity %s\n%s", node[1], out)
	}
}
