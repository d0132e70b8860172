package entrypoint

// Black-box tests of the built binaries. TestMain builds the entrypoint (as
// `make build` does: static, cgo-free), the GPU probe beside it, and the
// C helpers from testdata once; each test runs the real executable with an
// environment it controls completely.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/test/harness"
)

// bin holds the paths of the executables built for the tests.
var bin struct {
	dir        string // holds paddle-entrypoint and paddle-gpu-probe, side by side
	entrypoint string
	probe      string
	report     string // testdata/childreport
	sigwrap    string // testdata/sigwrap
	sigcatch   string // testdata/sigcatch
}

func TestMain(m *testing.M) {
	// The tests name files relative to the repository root
	// (docs/openapi.yaml, testdata/, scripts/).
	if err := harness.ChdirRoot(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	dir, err := os.MkdirTemp("", "paddle-entrypoint-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := 1
	if err := buildAll(dir); err != nil {
		fmt.Fprintln(os.Stderr, "building test binaries:", err)
	} else {
		code = m.Run()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

func buildAll(dir string) error {
	bin.dir = dir
	bin.entrypoint = filepath.Join(dir, "paddle-entrypoint")
	bin.probe = filepath.Join(dir, "paddle-gpu-probe")
	bin.report = filepath.Join(dir, "childreport")
	bin.sigwrap = filepath.Join(dir, "sigwrap")
	bin.sigcatch = filepath.Join(dir, "sigcatch")
	steps := []*exec.Cmd{
		goBuild(bin.entrypoint, ".", "0"),
		harness.CC(bin.report, "testdata/childreport/childreport.c"),
		harness.CC(bin.sigwrap, "testdata/sigwrap/sigwrap.c"),
		harness.CC(bin.sigcatch, "testdata/sigcatch/sigcatch.c"),
	}
	if _, err := os.Stat("cmd/paddle-gpu-probe/main.go"); err == nil {
		steps = append(steps, goBuild(bin.probe, "./cmd/paddle-gpu-probe", "1"))
	}
	return harness.Run(steps...)
}

func goBuild(out, pkg, cgo string) *exec.Cmd {
	return harness.GoBuild(out, pkg, cgo == "1")
}

// result is what one run of the entrypoint showed.
type result struct {
	Stdout, Stderr string
	Code           int // exit status; 128+n when killed by signal n
	Elapsed        time.Duration
}

// task is one start of the entrypoint: its environment (nothing else is
// inherited) and arguments.
type task struct {
	t       *testing.T
	Dir     string // the test's temporary directory
	Env     []string
	Args    []string
	Timeout time.Duration // kill after this; default 30s
	Cwd     string
	Setup   func(*exec.Cmd) // adjust the command before start
}

// newTask returns a task whose labels file and spool live in a fresh
// temporary directory, with no monitor and no GPU library on the path.
func newTask(t *testing.T, args ...string) *task {
	t.Helper()
	dir := t.TempDir()
	return &task{t: t, Dir: dir, Args: args, Env: []string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"PADDLE_LABELS_FILE=" + filepath.Join(dir, "paddle-task.labels"),
		"PADDLE_SPOOL_PATH=" + filepath.Join(dir, "spool.db"),
	}}
}

// LabelsFile is where the task's labels file is written.
func (k *task) LabelsFile() string { return filepath.Join(k.Dir, "paddle-task.labels") }

// SpoolPath is the task's spool file.
func (k *task) SpoolPath() string { return filepath.Join(k.Dir, "spool.db") }

// Setenv adds or replaces one variable.
func (k *task) Setenv(key, value string) *task {
	out := k.Env[:0]
	for _, kv := range k.Env {
		if !strings.HasPrefix(kv, key+"=") {
			out = append(out, kv)
		}
	}
	k.Env = append(out, key+"="+value)
	return k
}

// Command returns the exec.Cmd for the task without starting it.
func (k *task) Command(ctx context.Context) *exec.Cmd {
	c := exec.CommandContext(ctx, bin.entrypoint, k.Args...)
	c.Env = k.Env
	c.Dir = k.Cwd
	if k.Setup != nil {
		k.Setup(c)
	}
	return c
}

// Run runs the entrypoint to completion.
func (k *task) Run() result {
	k.t.Helper()
	timeout := k.Timeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c := k.Command(ctx)
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	start := time.Now()
	err := c.Run()
	r := result{Stdout: stdout.String(), Stderr: stderr.String(), Elapsed: time.Since(start), Code: exitCode(err)}
	if ctx.Err() != nil {
		k.t.Fatalf("entrypoint did not finish within %v\nstderr:\n%s", timeout, r.Stderr)
	}
	return r
}

func exitCode(err error) int { return harness.ExitCode(err) }

// report is what testdata/childreport printed from inside the exec'd command.
type report struct {
	PID, PPID      int
	Cwd            string
	Argv, Env      []string
	Umask          string
	SigBlk, SigIgn string
	FDs            map[string]string // fd number -> target
	Limits         []string
	raw            string
}

func parseReport(t *testing.T, out string) report {
	t.Helper()
	r := report{FDs: map[string]string{}, raw: out}
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), "=")
		switch k {
		case "pid":
			fmt.Sscan(v, &r.PID)
		case "ppid":
			fmt.Sscan(v, &r.PPID)
		case "cwd":
			r.Cwd = v
		case "argv", "env":
			b, err := hex.DecodeString(v)
			if err != nil {
				t.Fatalf("bad hex in report line %q", sc.Text())
			}
			if k == "argv" {
				r.Argv = append(r.Argv, string(b))
			} else {
				r.Env = append(r.Env, string(b))
			}
		case "Umask":
			r.Umask = v
		case "SigBlk":
			r.SigBlk = v
		case "SigIgn":
			r.SigIgn = v
		case "fd":
			n, target, _ := strings.Cut(v, " ")
			r.FDs[n] = target
		case "limit":
			r.Limits = append(r.Limits, v)
		}
	}
	if r.PID == 0 {
		t.Fatalf("no child report in stdout:\n%s", out)
	}
	return r
}

// Getenv returns the child's value of key.
func (r report) Getenv(key string) (string, bool) {
	for _, kv := range r.Env {
		if strings.HasPrefix(kv, key+"=") {
			return kv[len(key)+1:], true
		}
	}
	return "", false
}

// readLabels returns the labels file's lines.
func readLabels(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("labels file: %v", err)
	}
	if len(b) == 0 || b[len(b)-1] != '\n' {
		t.Fatalf("labels file does not end in LF: %q", b)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// labelMap returns the labels file as a map, failing on a repeated key.
func labelMap(t *testing.T, path string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, line := range readLabels(t, path) {
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("labels line without '=': %q", line)
		}
		if _, dup := m[k]; dup {
			t.Fatalf("labels file repeats key %q", k)
		}
		m[k] = v
	}
	return m
}
