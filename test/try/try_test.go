package main

// `make try` run as a newcomer would, without the Ctrl-C: TRY_OWN_TASK=1
// starts the own task with the very line the program printed, and the test
// reads the ledger it printed last.

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/paddle-entrypoint/paddle-entrypoint/test/harness"
)

func TestTryOwnTaskInTheLedger(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the monitor, the agent and three tasks (about 20 s)")
	}
	harness.Tool(t, "gcc")
	if os.Geteuid() != 0 {
		t.Skip("needs root: make try makes Slurm-shaped cgroups")
	}
	if _, err := cgroupRoot(); err != nil {
		t.Skip(err)
	}
	root := t.TempDir()
	repo, _ := filepath.Abs("../..")
	if err := os.Symlink(filepath.Join(repo, "testdata"), filepath.Join(root, "testdata")); err != nil {
		t.Fatal(err)
	}
	for _, b := range []struct{ out, pkg string }{
		{"bin/paddle-entrypoint", "."}, {"bin/paddle-monitor", "./cmd/paddle-monitor"}, {"bin/paddle-node", "./cmd/paddle-node"}, {"try", "./test/try"},
	} {
		c := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(root, b.out), b.pkg)
		c.Dir, c.Env = repo, append(os.Environ(), "CGO_ENABLED=0")
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", b.pkg, err, out)
		}
	}
	probe := harness.GoBuild(filepath.Join(root, "bin/paddle-gpu-probe"), "./cmd/paddle-gpu-probe", true)
	probe.Dir = repo
	if err := harness.Run(probe); err != nil {
		t.Fatal(err)
	}
	c := exec.Command("timeout", "120", filepath.Join(root, "try"))
	c.Dir = root
	c.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "TMPDIR=" + t.TempDir(), "TRY_OWN_TASK=1"}
	b, err := c.CombinedOutput()
	out := string(b)
	if err != nil {
		t.Fatalf("try: %v\n%s", err, out)
	}
	// The printed line for one's own task is the one it ran.
	printed := regexp.MustCompile(`(?m)^  (\. \S+/try\.env && SLURM_JOB_ID=103 .*)$`).FindStringSubmatch(out)
	if printed == nil || !strings.Contains(out, "(TRY_OWN_TASK=1: running it)\n$ "+printed[1]+"\n") {
		t.Fatalf("the own task's line is not printed, or not the one run:\n%s", out)
	}
	for _, want := range []string{"on the page:   http://127.0.0.1:", "in the ledger: ", "SLURM_JOB_ID=101 PADDLE_PROJECT=vision_detect", "SLURM_JOB_ID=102 PADDLE_PROJECT=search_ranking"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in the output:\n%s", want, out)
		}
	}
	_, last, ok := strings.Cut(out, "Your task is in the ledger:\n")
	if !ok {
		t.Fatalf("no ledger after the own task:\n%s", out)
	}
	for _, project := range []string{"my_project", "search_ranking", "vision_detect"} {
		m := regexp.MustCompile(`(?m)^` + project + `\s+-\s+([0-9.]+)\s`).FindStringSubmatch(last)
		if m == nil {
			t.Errorf("no ledger row of %s:\n%s", project, last)
			continue
		}
		if v, _ := strconv.ParseFloat(m[1], 64); v <= 0 {
			t.Errorf("%s attributed %s GPU-hours, want > 0:\n%s", project, m[1], last)
		}
	}
	// Nothing left behind: the jobs' cgroups are gone.
	cg, _ := cgroupRoot()
	if _, err := os.Stat(filepath.Join(cg, "slurm")); err == nil {
		t.Errorf("%s is left behind", filepath.Join(cg, "slurm"))
	}
}
