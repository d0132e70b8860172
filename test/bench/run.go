package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// contender is one program being timed: it is given the stamp command and
// must exec it.
type contender struct {
	name   string
	argv   []string // the program and its own arguments; the stamp is appended
	labels string   // the labels file it writes, "" for the floors
	spool  bool     // it spools: give it a fresh PADDLE_SPOOL_PATH per run
	drop   string   // an environment variable taken out of its environment
}

// sample is what one run showed.
type sample struct {
	toExec     time.Duration // from just before fork to the stamp's first instruction
	wall       time.Duration // from just before fork to the reaping of the process
	cpu        time.Duration // user+sys of the process and every child it reaped
	maxRSS     int64         // bytes: the largest single process of the tree (ru_maxrss)
	started    bool          // the command was exec'd within the cap
	exit       int           // exit status; -1 when killed at the cap
	requests   int           // registration requests the monitor received
	registered bool          // the monitor answered one of them 2xx
	gpuCount   string        // gpu_count in the labels file; "" when not written
	spooled    int           // entries pending in the spool after the run; -1 unknown
}

// runner runs contenders one at a time with a controlled environment.
type runner struct {
	dir      string // scratch directory on tmpfs: stamp file, labels files, outputs
	spoolDir string // on disk, as a node volume would be
	stamp    string // the compiled stamp command
	spawn    string // the compiled launcher (testdata/spawn.c)
	mon      *monitor
	seq      int
	stdout   *os.File
	stderr   *os.File
	lastErr  string // tail of the last run's stderr, for diagnostics
	spoolCmd string // the entrypoint, to read `spool stats`; "" to skip
}

func newRunner(shm, spoolDir, spawn, stamp string, mon *monitor) (*runner, error) {
	r := &runner{dir: shm, spoolDir: spoolDir, spawn: spawn, stamp: stamp, mon: mon}
	var err error
	if r.stdout, err = os.Create(filepath.Join(shm, "stdout")); err != nil {
		return nil, err
	}
	if r.stderr, err = os.Create(filepath.Join(shm, "stderr")); err != nil {
		return nil, err
	}
	return r, nil
}

// run times one start of c under env, talking to the monitor in mode, and
// kills the process group at cap.
func (r *runner) run(c contender, env []string, mode string, cap time.Duration) (sample, error) {
	r.seq++
	stampFile := filepath.Join(r.dir, "stamp")
	os.Remove(stampFile)
	if c.labels != "" {
		os.Remove(c.labels)
	}
	if c.drop != "" {
		kept := make([]string, 0, len(env))
		for _, kv := range env {
			if !strings.HasPrefix(kv, c.drop+"=") {
				kept = append(kept, kv)
			}
		}
		env = kept
	}
	spoolPath := ""
	if c.spool {
		spoolPath = filepath.Join(r.spoolDir, "run-"+strconv.Itoa(r.seq)+".db")
		env = append(env, "PADDLE_SPOOL_PATH="+spoolPath)
	}
	r.stdout.Truncate(0)
	r.stderr.Truncate(0)
	r.stdout.Seek(0, 0)
	r.stderr.Seek(0, 0)

	resultFile := filepath.Join(r.dir, "result")
	os.Remove(resultFile)
	argv := append([]string{r.spawn, resultFile, strconv.FormatInt(cap.Milliseconds(), 10)}, c.argv...)
	argv = append(argv, r.stamp, stampFile)
	cmd := &exec.Cmd{Path: r.spawn, Args: argv, Env: env, Dir: r.dir, Stdout: r.stdout, Stderr: r.stderr}
	r.mon.begin(mode)
	err := cmd.Run()
	requests, answered := r.mon.end()
	if err != nil {
		b, _ := os.ReadFile(r.stderr.Name())
		return sample{}, fmt.Errorf("spawn: %v: %s", err, tail(string(b), 600))
	}
	var t0, t1, utime, stime, maxRSS int64
	var killed int
	s := sample{requests: requests, registered: answered > 0, spooled: -1}
	b, err := os.ReadFile(resultFile)
	if err == nil {
		_, err = fmt.Sscan(string(b), &t0, &t1, &utime, &stime, &maxRSS, &s.exit, &killed)
	}
	if err != nil {
		return sample{}, fmt.Errorf("spawn result %s: %v", resultFile, err)
	}
	s.wall = time.Duration(t1 - t0)
	s.cpu = time.Duration(utime+stime) * time.Microsecond
	s.maxRSS = maxRSS * 1024
	if killed != 0 {
		s.exit = -1
	}
	if b, err := os.ReadFile(stampFile); err == nil {
		if ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil {
			s.started = true
			s.toExec = time.Duration(ns - t0)
		}
	}
	if c.labels != "" {
		s.gpuCount = labelValue(c.labels, "gpu_count")
	}
	if spoolPath != "" {
		s.spooled = r.pending(spoolPath)
		os.Remove(spoolPath)
	}
	if !s.started || s.exit != 0 {
		b, _ := os.ReadFile(r.stderr.Name())
		r.lastErr = tail(string(b), 600)
	}
	return s, nil
}

// pending reads the number of pending entries with `paddle-entrypoint spool
// stats`; -1 when it cannot tell. A spool file that was never created holds
// nothing.
func (r *runner) pending(path string) int {
	if r.spoolCmd == "" {
		return -1
	}
	if _, err := os.Stat(path); os.IsNotExist(err) {
		return 0
	}
	out, err := exec.Command(r.spoolCmd, "spool", "stats", "--spool-path", path).Output()
	if err != nil {
		return -1
	}
	var st struct {
		Pending *int `json:"pending"`
	}
	if json.Unmarshal(bytes.TrimSpace(out), &st) != nil || st.Pending == nil {
		return -1
	}
	return *st.Pending
}

// labelValue returns key's value in a labels file, "" when absent.
func labelValue(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok && k == key {
			return v
		}
	}
	return ""
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
