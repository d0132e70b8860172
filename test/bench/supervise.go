package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// progSupervise is the entrypoint in supervise mode: the command starts as
// its child, the registration runs alongside it (docs/supervise.md).
const progSupervise = "paddle-entrypoint, supervise mode"

// superviseBudget is the completion budget of the benchmark's supervised
// starts: it bounds each run's wall time when the monitor never answers,
// and does not touch the time to the command.
const superviseBudget = 300 * time.Millisecond

// superviseContender's labels file is the one the environment names
// (PADDLE_LABELS_FILE), shared with exec mode's rows: the runs take turns,
// and each run's file is removed before it starts.
func superviseContender(entrypoint, dir string) contender {
	return contender{
		name:   progSupervise,
		argv:   []string{entrypoint, "--supervise", "--complete-budget", superviseBudget.String()},
		labels: filepath.Join(dir, "entrypoint.labels"),
		spool:  true,
	}
}

// supervisorCost is what a supervisor costs while its command runs: its
// resident memory, and the CPU it uses between two readings while the
// command sleeps (no GPU, so no sampler: an idle supervisor).
type supervisorCost struct {
	window     time.Duration
	rssKB      int
	cpu        time.Duration
	threads    int
	monitorURL string
}

// measureSupervisor runs one supervised `sleep` with the monitor up and
// reads the supervisor's /proc entries from 1 s into the command's run to
// the end of the window.
func measureSupervisor(entrypoint, dir, monitorURL string) (*supervisorCost, error) {
	const window = 3 * time.Second
	cmd := exec.Command(entrypoint, "--supervise", "sleep", strconv.Itoa(int((window + 2*time.Second).Seconds())))
	cmd.Env = []string{"PATH=" + systemPath, "PADDLE_MONITOR_URL=" + monitorURL,
		"PADDLE_LABELS_FILE=" + filepath.Join(dir, "cost.labels"), "PADDLE_SPOOL_PATH=" + filepath.Join(dir, "cost.db")}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	time.Sleep(time.Second) // start-up and the registration are over
	pid := cmd.Process.Pid
	before, err := cpuTicks(pid)
	if err != nil {
		return nil, err
	}
	time.Sleep(window)
	after, err := cpuTicks(pid)
	if err != nil {
		return nil, err
	}
	c := &supervisorCost{window: window, monitorURL: monitorURL, cpu: time.Duration(after-before) * 10 * time.Millisecond}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		k, v, _ := strings.Cut(line, ":")
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		switch k {
		case "VmRSS":
			c.rssKB, _ = strconv.Atoi(f[0])
		case "Threads":
			c.threads, _ = strconv.Atoi(f[0])
		}
	}
	return c, nil
}

// cpuTicks is utime+stime of pid, in clock ticks (USER_HZ, 100 on Linux).
func cpuTicks(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return u + s, nil
}

func (c *supervisorCost) markdown() string {
	if c == nil {
		return ""
	}
	var b strings.Builder
	b.WriteString("### Supervise mode: the supervisor's cost while the command runs\n\n")
	fmt.Fprintf(&b, "`paddle-entrypoint --supervise sleep`, monitor up, no GPU (no sampler); read from /proc 1 s after the start, over %v.\n\n", c.window)
	b.WriteString("| RSS | CPU over the window | threads | goal |\n|--:|--:|--:|---|\n")
	met := "met"
	if c.rssKB >= 15*1024 || c.cpu > 0 {
		met = "**missed**"
	}
	fmt.Fprintf(&b, "| %.1f MB | %v | %d | < 15 MB, no CPU between samples: %s |\n\n", float64(c.rssKB)/1024, c.cpu, c.threads, met)
	return b.String()
}
