package entrypoint

import (
	"strings"
	"testing"
)

// Each mode's --help is its own: run mode's settings, labels' and the
// spool's (or one spool subcommand's) flags, on stdout with exit 0, each
// flag with the type of value it takes.
func TestHelpPerMode(t *testing.T) {
	spoolOnly := []string{"--dead", "--all", "--watch", "--interval", "--completions"}
	runOnly := []string{"--mode", "--gate ", "--heartbeat", "--labels-file", "--supervise", "--signal-group"}
	for _, c := range []struct {
		args      []string
		head      string
		want, not []string
	}{
		{[]string{"--help"}, "usage: paddle-entrypoint [flags] [--] COMMAND [ARG...]",
			[]string{"--otel on|off", "--gpu-shared on|off", "--signal-group on|off[=on]", "--heartbeat duration",
				"--register-budget duration", "--spool-path string", "-v, --version"},
			append([]string{"--otel int", "--gpu-shared int", "--signal-group int"}, spoolOnly...)},
		{[]string{"spool", "--help"}, "usage: paddle-entrypoint spool list|stats|flush|requeue|purge [flags]",
			append([]string{"--spool-path string", "--monitor-url string", "--monitor-token-file string", "requeue  move the dead letters back"}, spoolOnly...),
			runOnly},
		{[]string{"spool", "flush", "--help"}, "usage: paddle-entrypoint spool flush [flags]",
			[]string{"--all[=true|false]", "--watch[=true|false]", "--interval duration", "(default 30s)", "--monitor-url string", "--spool-path string"},
			append([]string{"--dead", "--completions"}, runOnly...)},
		{[]string{"spool", "--help", "list"}, "usage: paddle-entrypoint spool list [flags]",
			[]string{"--dead[=true|false]", "--completions[=true|false]", "--spool-path string"},
			append([]string{"--all", "--watch", "--interval", "--otel"}, runOnly...)},
		{[]string{"labels", "--help"}, "usage: paddle-entrypoint labels [flags]",
			[]string{"--labels-mode string", "--policy string", "--gpu-timeout duration"},
			append([]string{"--monitor-url", "--spool-path"}, spoolOnly...)},
	} {
		r := newTask(t, c.args...).Run()
		if r.Code != 0 || r.Stderr != "" || !strings.HasPrefix(r.Stdout, c.head+"\n") {
			t.Errorf("%q: exit %d, stderr %q, stdout:\n%s\nwant 0 and a help beginning %q", c.args, r.Code, r.Stderr, r.Stdout, c.head)
			continue
		}
		for _, want := range c.want {
			if !strings.Contains(r.Stdout, want) {
				t.Errorf("%q lacks %q:\n%s", c.args, want, r.Stdout)
			}
		}
		for _, not := range c.not {
			if strings.Contains(r.Stdout, not) {
				t.Errorf("%q shows %q, which that mode does not read:\n%s", c.args, not, r.Stdout)
			}
		}
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}, {"-v"}, {"--version", "python", "x"}} {
		r := newTask(t, args...).Run()
		if r.Code != 0 || r.Stdout != "paddle-entrypoint version dev\n" || r.Stderr != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 0 and \"paddle-entrypoint version dev\\n\"", args, r.Code, r.Stdout, r.Stderr)
		}
	}
	r := newTask(t, "version", "extra").Run()
	if r.Code != 2 || r.Stdout != "" || !strings.Contains(r.Stderr, `version takes no argument, got "extra"`) {
		t.Errorf("version extra: exit %d, stdout %q, stderr %q; want a usage error (2)", r.Code, r.Stdout, r.Stderr)
	}
}

func TestHelpShowsFlagTypes(t *testing.T) {
	r := newTask(t, "--help").Run()
	for _, want := range []string{
		"--register-budget duration", "--gpu-timeout duration", "--outage-hold duration",
		"--spool-max int", "(env PADDLE_REGISTER_BUDGET) (default 5s)", "(env PADDLE_SPOOL_MAX) (default 10000)",
		"-v, --version",
	} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("--help lacks %q:\n%s", want, r.Stdout)
		}
	}
	if r.Code != 0 || strings.Contains(r.Stdout, "register-budget string") {
		t.Errorf("exit %d; a duration shown as a string?\n%s", r.Code, r.Stdout)
	}
}
