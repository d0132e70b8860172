package entrypoint

// Black-box tests of run mode: labels, labels file, exec fidelity, exit
// codes, logs. Other parts (GPUs, registration, policy) have their own files.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestRunExecFidelity(t *testing.T) {
	argv := []string{bin.report, "plain", "with space", `"quoted"`, "it's", "", "tab\there", "nl\nhere", "\xff\xfe non-UTF-8", "--lr", "0.1", "*"}
	k := newTask(t, argv...)
	k.Setenv("PADDLE_TASK_NAME", "fidelity")
	k.Setenv("WEIRD", "a=b=c \x01\xff")
	k.Setenv("EMPTY", "")
	cwd := t.TempDir()
	k.Cwd = cwd
	var pid int
	k.Setup = func(c *exec.Cmd) {
		// The caller's own descriptor 3 must survive; ours must not.
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close(); w.Close() })
		c.ExtraFiles = []*os.File{r}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := k.Command(ctx)
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	pid = c.Process.Pid
	if err := c.Wait(); err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	r := parseReport(t, stdout.String())

	if r.PID != pid {
		t.Errorf("command ran as PID %d, entrypoint was PID %d: not exec'd in place", r.PID, pid)
	}
	if len(r.Argv) != len(argv) {
		t.Fatalf("argv has %d entries, want %d: %q", len(r.Argv), len(argv), r.Argv)
	}
	for i := range argv {
		if r.Argv[i] != argv[i] {
			t.Errorf("argv[%d] = %q, want %q", i, r.Argv[i], argv[i])
		}
	}
	taskID, ok := r.Getenv("PADDLE_TASK_ID")
	if !ok {
		t.Fatal("PADDLE_TASK_ID not in the command's environment")
	}
	// PADDLE_TASK_ID and the task's OpenTelemetry resource attributes
	// are the only additions (docs/pipelines.md).
	wantEnv := append(append([]string{}, k.Env...), "PADDLE_TASK_ID="+taskID,
		"OTEL_RESOURCE_ATTRIBUTES=paddle.task.id="+taskID+",paddle.task.name=fidelity,paddle.project=default,paddle.owner=anonymous")
	if strings.Join(r.Env, "\x00") != strings.Join(wantEnv, "\x00") {
		t.Errorf("environment changed:\n got %q\nwant %q", r.Env, wantEnv)
	}
	if labelMap(t, k.LabelsFile())["task_id"] != taskID {
		t.Errorf("PADDLE_TASK_ID %q is not the labels file's task_id", taskID)
	}
	if r.Cwd != cwd {
		t.Errorf("cwd = %q, want %q", r.Cwd, cwd)
	}
	// The same command started directly by the same caller is the
	// baseline: the caller's descriptors (fd 3 here, and any the test
	// process inherited itself) and nothing else.
	direct := exec.CommandContext(ctx, argv[0], argv[1:]...)
	direct.Env = k.Env
	k.Setup(direct)
	out, err := direct.Output()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fdNumbers(r), fdNumbers(parseReport(t, string(out))); got != want || !strings.Contains(got, " 3 ") {
		t.Errorf("descriptors through the entrypoint %q, started directly %q", got, want)
	}
	if r.SigBlk != "0000000000000000" {
		t.Errorf("SigBlk = %s, want no blocked signal", r.SigBlk)
	}
	checkIgnored(t, r.SigIgn, callerIgnored(t))
}

func TestRunKeepsUmaskAndLimits(t *testing.T) {
	// sh only sets the umask and limits for the entrypoint; no shell runs
	// between the entrypoint and the command.
	k := newTask(t, "/bin/sh", "-c", `umask 027; ulimit -Sn 300; ulimit -Hn 700; ulimit -Ss 4096; exec "$@"`, "sh", bin.entrypoint, bin.report)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := exec.CommandContext(ctx, k.Args[0], k.Args[1:]...)
	c.Env = k.Env
	out, err := c.Output()
	if err != nil {
		t.Fatalf("%v", err)
	}
	r := parseReport(t, string(out))
	if r.Umask != "0027" {
		t.Errorf("umask = %s, want 0027", r.Umask)
	}
	limits := strings.Join(r.Limits, "\n")
	for _, want := range []string{"Max open files            300                  700", "Max stack size            4194304"} {
		if !strings.Contains(limits, want) {
			t.Errorf("limits lack %q:\n%s", want, limits)
		}
	}
}

func TestRunSignalMask(t *testing.T) {
	// A parent that blocks SIGTERM and SIGUSR1 and ignores SIGHUP: the
	// command starts with nothing blocked; SIGHUP stays ignored (one of the
	// two a Go program can keep ignored across exec, see README).
	k := newTask(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := exec.CommandContext(ctx, bin.sigwrap, "-b", "15", "-b", "10", "-i", "1", "--", bin.entrypoint, bin.report)
	c.Env = k.Env
	out, err := c.Output()
	if err != nil {
		t.Fatal(err)
	}
	r := parseReport(t, string(out))
	if r.SigBlk != "0000000000000000" {
		t.Errorf("SigBlk = %s, want no blocked signal", r.SigBlk)
	}
	checkIgnored(t, r.SigIgn, callerIgnored(t)|1<<(syscall.SIGHUP-1))
}

// callerIgnored returns the signals ignored in a program this test process
// starts directly (make, for one, starts its recipes with signals 32 and 33
// ignored).
func callerIgnored(t *testing.T) uint64 {
	t.Helper()
	out, err := exec.Command(bin.report).Output()
	if err != nil {
		t.Fatal(err)
	}
	return parseMask(t, parseReport(t, string(out)).SigIgn)
}

// checkIgnored asserts that the command ignores no signal its caller did not
// ignore, and keeps SIGHUP and SIGINT ignored when the caller did: the two a
// Go program can pass on (the others are reset by Go's own handlers).
func checkIgnored(t *testing.T, got string, caller uint64) {
	t.Helper()
	ign := parseMask(t, got)
	if extra := ign &^ caller; extra != 0 {
		t.Errorf("SigIgn = %s: ignores signals the caller did not (mask %x)", got, extra)
	}
	kept := uint64(1<<(syscall.SIGHUP-1) | 1<<(syscall.SIGINT-1))
	if ign&kept != caller&kept {
		t.Errorf("SigIgn = %s: SIGHUP/SIGINT not passed on as the caller had them (caller %x)", got, caller)
	}
}

func parseMask(t *testing.T, hex string) uint64 {
	t.Helper()
	var m uint64
	if _, err := fmt.Sscanf(hex, "%x", &m); err != nil {
		t.Fatalf("bad signal mask %q", hex)
	}
	return m
}

func TestRunLabelsFile(t *testing.T) {
	k := newTask(t, "/bin/true")
	for _, kv := range []string{
		"PADDLE_TASK_NAME=resnet50", "PADDLE_PROJECT=search_ranking", "PADDLE_OWNER=alice@example.com",
		"PADDLE_PRIORITY=HIGH", "PADDLE_ENV=prod", "PADDLE_DURATION_EST=2h", "PADDLE_TASK_ID=job-7",
		"PADDLE_TRAINER_ID=1", "PADDLE_TRAINERS_NUM=4", "PADDLE_LABEL_COST_CENTER=cc-1024", "PADDLE_LABEL_TEAM=vision",
	} {
		name, value, _ := strings.Cut(kv, "=")
		k.Setenv(name, value)
	}
	before := time.Now().Unix()
	r := k.Run()
	if r.Code != 0 || r.Stdout != "" {
		t.Fatalf("exit %d, stdout %q, stderr:\n%s", r.Code, r.Stdout, r.Stderr)
	}
	lines := readLabels(t, k.LabelsFile())
	host, _ := os.Hostname()
	m := labelMap(t, k.LabelsFile())
	if st := m["start_time"]; st < itoa(before) || st > itoa(time.Now().Unix()) {
		t.Errorf("start_time %s outside the run", st)
	}
	want := []string{
		"task_name=resnet50", "project=search_ranking", "owner=alice@example.com", "gpu_count=0",
		"start_time=" + m["start_time"], "task_id=job-7", "priority=high", "env=prod", "duration_est=7200",
		"hostname=" + host, "trainer_id=1", "trainers_num=4", "cost_center=cc-1024", "team=vision",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("labels file:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	fi, err := os.Stat(k.LabelsFile())
	if err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("labels file mode %v, %v", fi.Mode().Perm(), err)
	}
	entries, _ := os.ReadDir(k.Dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp") {
			t.Errorf("temporary file left behind: %s", e.Name())
		}
	}
}

func TestRunWarnModeDropsBadValues(t *testing.T) {
	k := newTask(t, "/bin/true")
	k.Setenv("PADDLE_PROJECT", "x\nproject=admin")
	k.Setenv("PADDLE_PRIORITY", "urgent")
	k.Setenv("PADDLE_LABEL_GPU_COUNT", "64")
	r := k.Run()
	if r.Code != 0 {
		t.Fatalf("exit %d: %s", r.Code, r.Stderr)
	}
	m := labelMap(t, k.LabelsFile())
	if m["project"] != "default" || m["gpu_count"] != "0" || m["invalid_labels"] != "project,priority,gpu_count" {
		t.Errorf("labels %v", m)
	}
	if _, ok := m["priority"]; ok {
		t.Error("invalid priority written")
	}
	for _, v := range []string{"PADDLE_PROJECT", "PADDLE_PRIORITY", "PADDLE_LABEL_GPU_COUNT"} {
		if n := strings.Count(r.Stderr, "var="+v+" "); n != 1 {
			t.Errorf("%d warnings name %s, want 1:\n%s", n, v, r.Stderr)
		}
	}
}

func TestRunUnwritableLabelsDirectory(t *testing.T) {
	for name, path := range map[string]string{
		"missing directory": "/nonexistent-dir/paddle-task.labels",
		"parent is a file":  "/etc/hostname/paddle-task.labels",
	} {
		t.Run(name, func(t *testing.T) {
			k := newTask(t, bin.report)
			k.Setenv("PADDLE_LABELS_FILE", path)
			k.Setenv("REPORT_EXIT", "3")
			r := k.Run()
			if r.Code != 3 {
				t.Fatalf("exit %d, want the command's 3; stderr:\n%s", r.Code, r.Stderr)
			}
			parseReport(t, r.Stdout)
			if n := strings.Count(r.Stderr, "labels file not written"); n != 1 {
				t.Errorf("%d warnings about the labels file, want 1:\n%s", n, r.Stderr)
			}
		})
	}
}

func TestRunExitCodes(t *testing.T) {
	dir := t.TempDir()
	notExec := filepath.Join(dir, "not-executable")
	os.WriteFile(notExec, []byte("#!/bin/sh\necho hi\n"), 0o644)
	badInterp := filepath.Join(dir, "bad-interpreter")
	os.WriteFile(badInterp, []byte("#!/nonexistent/sh\n"), 0o755)
	spoolProg := filepath.Join(dir, "spool")
	os.WriteFile(spoolProg, []byte("#!/bin/sh\nexit 9\n"), 0o755)
	tests := []struct {
		name string
		args []string
		path string
		env  []string
		want int
	}{
		{"no command", nil, "", nil, 2},
		{"only flags", []string{"--gpu-timeout", "1s"}, "", nil, 2},
		{"unknown flag", []string{"--no-such-flag", "/bin/true"}, "", nil, 2},
		{"malformed flag", []string{"--register-budget", "soon", "/bin/true"}, "", nil, 2},
		{"not found", []string{"no-such-command-xyz"}, "", nil, 127},
		{"not found by path", []string{"/nonexistent/cmd"}, "", nil, 127},
		{"not executable", []string{notExec}, "", nil, 126},
		{"directory", []string{dir}, "", nil, 126},
		{"bad interpreter", []string{badInterp}, "", nil, 127},
		{"exit status passes through", []string{bin.report}, "", []string{"REPORT_EXIT=42"}, 42},
		{"found in PATH", []string{"spool"}, dir, nil, 2},
		{"-- forces run mode", []string{"--", "spool"}, dir, nil, 9},
		{"flags then --", []string{"--gpu-timeout=1s", "--", "spool"}, dir, nil, 9},
		{"malformed env setting is a warning", []string{"/bin/true"}, "", []string{"PADDLE_REGISTER_BUDGET=soon"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := newTask(t, tt.args...)
			if tt.path != "" {
				k.Setenv("PATH", tt.path)
			}
			k.Env = append(k.Env, tt.env...)
			r := k.Run()
			if r.Code != tt.want {
				t.Errorf("exit %d, want %d; stderr:\n%s", r.Code, tt.want, r.Stderr)
			}
			if (tt.want == 126 || tt.want == 127) && !strings.Contains(tt.name, "interpreter") {
				if _, err := os.Stat(k.LabelsFile()); err == nil {
					t.Error("labels file written for a command that cannot start")
				}
			}
			if strings.Contains(tt.name, "malformed env") && !strings.Contains(r.Stderr, "PADDLE_REGISTER_BUDGET") {
				t.Errorf("no warning naming the variable:\n%s", r.Stderr)
			}
		})
	}
}

func TestRunNothingOnStdout(t *testing.T) {
	k := newTask(t, "/bin/true")
	k.Setenv("PADDLE_ENTRYPOINT_LOG", "debug")
	k.Setenv("PADDLE_PRIORITY", "bogus")
	if r := k.Run(); r.Stdout != "" || r.Code != 0 {
		t.Errorf("exit %d, stdout %q", r.Code, r.Stdout)
	}
}

func TestRunLogs(t *testing.T) {
	t.Run("text", func(t *testing.T) {
		k := newTask(t, "/bin/true")
		k.Setenv("PADDLE_TASK_NAME", "logged")
		r := k.Run()
		var start []string
		for _, line := range strings.Split(strings.TrimSpace(r.Stderr), "\n") {
			if !strings.HasPrefix(line, "paddle-entrypoint: ") {
				t.Errorf("log line without the prefix: %q", line)
			}
			if strings.Contains(line, `msg="task labels"`) {
				start = append(start, line)
			}
		}
		if len(start) != 1 || !strings.Contains(start[0], "level=INFO") || !strings.Contains(start[0], "task_name=logged") {
			t.Errorf("start lines %q", start)
		}
	})
	t.Run("json", func(t *testing.T) {
		k := newTask(t, "/bin/true")
		k.Setenv("PADDLE_ENTRYPOINT_LOG_FORMAT", "json")
		k.Setenv("PADDLE_TASK_NAME", "logged")
		r := k.Run()
		found := false
		for _, line := range strings.Split(strings.TrimSpace(r.Stderr), "\n") {
			var rec map[string]any
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatalf("not JSON: %q", line)
			}
			if rec["logger"] != "paddle-entrypoint" {
				t.Errorf("record without logger field: %q", line)
			}
			if lb, _ := rec["labels"].(map[string]any); rec["msg"] == "task labels" && lb["task_name"] == "logged" {
				found = true
			}
		}
		if !found {
			t.Errorf("no start record:\n%s", r.Stderr)
		}
	})
	t.Run("level", func(t *testing.T) {
		k := newTask(t, "/bin/true")
		k.Setenv("PADDLE_ENTRYPOINT_LOG", "error")
		k.Setenv("PADDLE_PRIORITY", "bogus")
		if r := k.Run(); r.Stderr != "" {
			t.Errorf("log at level error printed:\n%s", r.Stderr)
		}
	})
}

func TestSubcommands(t *testing.T) {
	t.Run("version", func(t *testing.T) {
		r := newTask(t, "version").Run()
		if r.Code != 0 || !strings.HasPrefix(r.Stdout, "paddle-entrypoint ") {
			t.Errorf("exit %d, stdout %q", r.Code, r.Stdout)
		}
	})
	t.Run("help", func(t *testing.T) {
		// Each mode's help names its own settings (help_blackbox_test.go).
		for _, c := range []struct {
			args    []string
			setting string
		}{{[]string{"--help"}, "PADDLE_REGISTER_BUDGET"}, {[]string{"-h"}, "PADDLE_REGISTER_BUDGET"},
			{[]string{"labels", "--help"}, "PADDLE_LABELS_MODE"}, {[]string{"spool", "--help"}, "PADDLE_SPOOL_PATH"}} {
			r := newTask(t, c.args...).Run()
			if r.Code != 0 || !strings.HasPrefix(r.Stdout, "usage: paddle-entrypoint") || !strings.Contains(r.Stdout, c.setting) {
				t.Errorf("%q: exit %d, stdout %q", c.args, r.Code, r.Stdout)
			}
		}
	})
	t.Run("labels", func(t *testing.T) {
		k := newTask(t, "labels")
		k.Setenv("PADDLE_TASK_NAME", "vetted")
		k.Setenv("PADDLE_TASK_ID", "t-1")
		r := k.Run()
		if r.Code != 0 || !strings.HasPrefix(r.Stdout, "task_name=vetted\nproject=default\nowner=anonymous\ngpu_count=0\nstart_time=") ||
			!strings.Contains(r.Stdout, "\ntask_id=t-1\n") {
			t.Errorf("exit %d, stdout:\n%s\nstderr:\n%s", r.Code, r.Stdout, r.Stderr)
		}
		if _, err := os.Stat(k.LabelsFile()); err == nil {
			t.Error("labels subcommand wrote the labels file")
		}
	})
	t.Run("labels enforce", func(t *testing.T) {
		k := newTask(t, "labels", "--labels-mode", "enforce")
		k.Setenv("PADDLE_PRIORITY", "urgent")
		k.Setenv("PADDLE_ENV", "qa")
		r := k.Run()
		if r.Code != 65 || r.Stdout != "" || !strings.Contains(r.Stderr, "PADDLE_PRIORITY") || !strings.Contains(r.Stderr, "PADDLE_ENV") {
			t.Errorf("exit %d, stdout %q, stderr:\n%s", r.Code, r.Stdout, r.Stderr)
		}
	})
}

func TestRunEnforceRefusesStart(t *testing.T) {
	k := newTask(t, bin.report)
	k.Setenv("PADDLE_LABELS_MODE", "enforce")
	k.Setenv("PADDLE_PROJECT", "a b")
	k.Setenv("PADDLE_LABEL_TEAM", "x;y")
	r := k.Run()
	if r.Code != 65 || r.Stdout != "" {
		t.Fatalf("exit %d, stdout %q", r.Code, r.Stdout)
	}
	if strings.Count(r.Stderr, "level=ERROR") != 2 {
		t.Errorf("want one error line per problem:\n%s", r.Stderr)
	}
	if _, err := os.Stat(k.LabelsFile()); err == nil {
		t.Error("labels file written in enforce mode")
	}
}

func fdNumbers(r report) string {
	var ns []int
	for n := range r.FDs {
		var i int
		json.Unmarshal([]byte(n), &i)
		ns = append(ns, i)
	}
	sort.Ints(ns)
	return " " + strings.Trim(fmt.Sprint(ns), "[]") + " "
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// A script without "#!" runs through /bin/sh, as execvp and the shell
// entrypoint ran it; a binary the kernel cannot run stays 126.
func TestScriptWithoutShebang(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "train")
	if err := os.WriteFile(script, []byte("echo \"ran $0 with $1 $2, task $PADDLE_TASK_ID\"\nexit 7\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	k := newTask(t, "train", "--lr", "0.1")
	k.Setenv("PATH", dir+":/usr/bin:/bin")
	k.Setenv("PADDLE_TASK_ID", "t-sh")
	r := k.Run()
	if want := "ran " + script + " with --lr 0.1, task t-sh\n"; r.Code != 7 || r.Stdout != want {
		t.Errorf("exit %d, stdout %q; want 7 and %q\nstderr:\n%s", r.Code, r.Stdout, want, r.Stderr)
	}

	binary := filepath.Join(dir, "foreign")
	if err := os.WriteFile(binary, []byte("\x7fELF\x02\x01\x01\x00\x00garbage for another machine"), 0o755); err != nil {
		t.Fatal(err)
	}
	r = newTask(t, binary).Run()
	if r.Code != 126 || !strings.Contains(r.Stderr, "exec format error") {
		t.Errorf("binary: exit %d, stderr:\n%s\nwant 126 and exec format error", r.Code, r.Stderr)
	}
}
