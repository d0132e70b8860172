package repository

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/paddle-entrypoint/paddle-entrypoint/test/harness"
)

// The files whose tool look-ups must go through harness.Tool: every test
// file, and the packages that exist for tests. The harness's own table is
// the one place allowed to look a tool up; test/e2e is separate (make e2e
// installs what it needs, scripts/e2e-setup.sh); the programs of test/demo
// and test/bench are programs, not tests (their _test.go files count).
func toolRuleApplies(path string) bool {
	path = filepath.ToSlash(path)
	switch {
	case !strings.HasSuffix(path, ".go"),
		path == "test/harness/tools.go",
		path == "test/repository/tools_test.go",
		strings.HasPrefix(path, "test/e2e/"):
		return false
	case strings.HasSuffix(path, "_test.go"),
		strings.HasPrefix(path, "test/harness/"),
		strings.HasPrefix(path, "monitor/store/storetest/"):
		return true
	}
	return false
}

// toolUses returns the look-ups in src that bypass the harness: a call of
// exec.LookPath, an optional tool run by its bare name or by a hard-coded
// path, or a search of PostgreSQL's directory of its own (pgserver's
// BinDir is the one).
func toolUses(src string, optional []string) []string {
	var alt []string
	for _, n := range optional {
		alt = append(alt, regexp.QuoteMeta(n))
	}
	names := strings.Join(alt, "|")
	rules := []*regexp.Regexp{
		regexp.MustCompile(`\bexec\.` + `LookPath\(`),
		regexp.MustCompile(`\bexec\.Command(Context)?\(\s*(ctx,\s*)?"(` + names + `)"`),
		regexp.MustCompile(`\bexec\.Command(Context)?\(\s*(ctx,\s*)?"/(usr/(local/)?)?s?bin/(` + names + `)"`),
		regexp.MustCompile(`"/usr/lib/` + `postgresql`),
	}
	var found []string
	for i, line := range strings.Split(src, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "//") {
			continue
		}
		for _, re := range rules {
			if re.MatchString(line) {
				found = append(found, strings.TrimSpace(line)+" (line "+strconv.Itoa(i+1)+")")
				break
			}
		}
	}
	return found
}

func TestToolUsesFindsEachWayAround(t *testing.T) {
	optional := []string{"promtool", "chromium", "prometheus-node-exporter"}
	for _, tt := range []struct {
		name, src string
		found     int
	}{
		{"harness", `p := harness.Tool(t, "promtool")`, 0},
		{"lookpath", `p, err := exec.` + `LookPath("promtool")`, 1},
		{"lookpath of anything", `p, _ := exec.` + `LookPath(name)`, 1},
		{"bare name", `out, err := exec.Command("promtool", "check", "metrics").Output()`, 1},
		{"bare name with context", `c := exec.CommandContext(ctx, "chromium", "--headless")`, 1},
		{"bare name, dash", `exec.Command("prometheus-node-exporter")`, 1},
		{"hard-coded path", `exec.Command("/usr/bin/chromium", "--headless")`, 1},
		{"hard-coded sbin path", `exec.CommandContext(ctx, "/usr/local/sbin/promtool")`, 1},
		{"a path as data", `proc(13, 10, "/usr/bin/python3", "nvidia-cuda-mps-server")`, 0},
		{"postgres glob", `filepath.Glob("/usr/lib/` + `postgresql/*/bin")`, 1},
		{"comment", `// exec.` + `LookPath("promtool") is not used`, 0},
		{"a program of the build", `exec.Command("gcc", "-O2")`, 0},
		{"a longer name", `exec.Command("promtoolish")`, 0},
		{"two lines", "exec.Command(\"promtool\")\nexec." + "LookPath(\"x\")", 2},
	} {
		if got := toolUses(tt.src, optional); len(got) != tt.found {
			t.Errorf("%s: %q found %q, want %d", tt.name, tt.src, got, tt.found)
		}
	}
}

// TestToolsGoThroughTheHarness: every test that needs an external program
// finds it with harness.Tool, so that a missing one is a named skip (and a
// failure under PADDLE_TEST_REQUIRE_TOOLS=1), never a failure of its own.
func TestToolsGoThroughTheHarness(t *testing.T) {
	if err := harness.ChdirRoot(); err != nil {
		t.Fatal(err)
	}
	optional := harness.OptionalTools()
	for _, want := range []string{"promtool", "prometheus", "prometheus-alertmanager", "prometheus-node-exporter", "chromium", "etcd"} {
		if !contains(optional, want) {
			t.Fatalf("harness.OptionalTools() lacks %s: %q", want, optional)
		}
	}
	checked := 0
	for _, f := range repositoryFiles(t) {
		if !toolRuleApplies(f) {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		checked++
		for _, use := range toolUses(string(b), optional) {
			t.Errorf("%s looks a tool up itself, use harness.Tool: %s", f, use)
		}
	}
	if checked < 50 {
		t.Fatalf("checked only %d files", checked)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
