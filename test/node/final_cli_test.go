package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFinalAsDocumented: `paddle-node final --report-spool FILE`, exactly
// as docs/node.md gives it, with nothing else set (no monitor URL, no
// interval: a preStop hook's environment), leaves the mark "final\n" (mode
// 0600) beside the spool; a spool in a directory that does not exist is an
// error that names it; a bad flag stays a usage error.
func TestFinalAsDocumented(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		name   string
		args   []string
		code   int
		stderr string
		mark   string
	}{
		{"documented", []string{"final", "--report-spool", filepath.Join(dir, "reports.db")}, 0, "", filepath.Join(dir, "final")},
		{"from the environment", []string{"final"}, 0, "", filepath.Join(dir, "env", "final")},
		{"no such directory", []string{"final", "--report-spool", filepath.Join(dir, "missing", "reports.db")}, 1, filepath.Join(dir, "missing", "final"), ""},
		{"bad flag", []string{"final", "--no-such-flag"}, 64, "unknown flag: --no-such-flag", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			os.MkdirAll(filepath.Join(dir, "env"), 0o755)
			env := []string{"PATH=/usr/bin:/bin", "PADDLE_NODE_REPORT_SPOOL=" + filepath.Join(dir, "env", "reports.db")}
			code, _, errs := runNode(t, env, tt.args...)
			if code != tt.code || (tt.stderr == "") != (errs == "") || !strings.Contains(errs, tt.stderr) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, errs, tt.code, tt.stderr)
			}
			if tt.mark == "" {
				return
			}
			b, err := os.ReadFile(tt.mark)
			fi, _ := os.Stat(tt.mark)
			if err != nil || string(b) != "final\n" || fi.Mode().Perm() != 0o600 {
				t.Errorf("the mark %s: %q %v, want \"final\\n\" mode 0600", tt.mark, b, err)
			}
		})
	}
}
