package repository

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/paddle-entrypoint/paddle-entrypoint/test/harness"
)

// TestSkipSummary: what `make test` prints at the end from the skips the
// harness recorded: one line per missing tool, its count (a test skipped
// twice, as by a rerun, counts once) and its packages; and a plain line
// when nothing was skipped.
func TestSkipSummary(t *testing.T) {
	if err := harness.ChdirRoot(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "skips")
	os.WriteFile(file, []byte("needs promtool (Debian package prometheus)\ttest/node\tTestA\n"+
		"needs promtool (Debian package prometheus)\tdeploy\tTestB\n"+
		"needs promtool (Debian package prometheus)\tdeploy\tTestB\n"+
		"needs PostgreSQL (Debian package postgresql)\tmonitor/store\tTestC/postgres\n"), 0o644)
	for _, tt := range []struct{ file, want string }{
		{file, "make test: 3 skipped for want of a tool (a test, or a check within one); PADDLE_TEST_REQUIRE_TOOLS=1 and PADDLE_TEST_REQUIRE_POSTGRES=1 make them failures:\n" +
			"  needs PostgreSQL (Debian package postgresql): 1 in monitor/store\n" +
			"  needs promtool (Debian package prometheus): 2 in deploy, test/node\n"},
		{filepath.Join(dir, "none"), "make test: nothing skipped for want of a tool.\n"},
	} {
		out, err := exec.Command("sh", "scripts/test-skips.sh", tt.file).CombinedOutput()
		if err != nil || string(out) != tt.want {
			t.Errorf("test-skips.sh %s: %v\n%s\nwant\n%s", tt.file, err, out, tt.want)
		}
	}
}
