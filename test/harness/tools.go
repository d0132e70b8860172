package harness

// The one place a test finds an external program. A test that needs a
// tool the machine may lack (promtool, chromium, etcd...) calls Tool: it
// returns the path, or skips the test with a line naming the tool and the
// Debian package that brings it. PADDLE_TEST_REQUIRE_TOOLS=1 (CI) turns
// that skip into a failure, so a machine that should have everything
// cannot pass by skipping. Each skip is also appended to the file
// PADDLE_TEST_SKIPS names (the Makefile sets it), from which `make test`
// prints one summary of what was skipped and why.
//
// test/repository checks that no test looks a tool up any other way.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// Environment variables this file reads.
const (
	// RequireToolsEnv=1 makes a missing tool a failure (CI).
	RequireToolsEnv = "PADDLE_TEST_REQUIRE_TOOLS"
	// RequirePostgresEnv=1 makes a missing PostgreSQL a failure (CI).
	RequirePostgresEnv = "PADDLE_TEST_REQUIRE_POSTGRES"
	// SkipsEnv names the file every skip for want of a tool is appended to.
	SkipsEnv = "PADDLE_TEST_SKIPS"
)

// tool is a program the tests may use: the names it goes by, first the
// one Debian installs, and the Debian package that brings it.
type tool struct {
	names []string
	pkg   string
	// optional: not part of what `make build` needs (Go, gcc, a shell),
	// so a test must never run it by name without Tool first.
	optional bool
}

var tools = map[string]tool{
	"promtool":                 {names: []string{"promtool"}, pkg: "prometheus", optional: true},
	"prometheus":               {names: []string{"prometheus"}, pkg: "prometheus", optional: true},
	"prometheus-alertmanager":  {names: []string{"prometheus-alertmanager", "alertmanager"}, pkg: "prometheus-alertmanager", optional: true},
	"amtool":                   {names: []string{"amtool"}, pkg: "prometheus-alertmanager", optional: true},
	"prometheus-node-exporter": {names: []string{"prometheus-node-exporter", "node_exporter"}, pkg: "prometheus-node-exporter", optional: true},
	"chromium":                 {names: []string{"chromium", "chromium-browser", "google-chrome"}, pkg: "chromium", optional: true},
	"etcd":                     {names: []string{"etcd"}, pkg: "etcd-server", optional: true},
	"pdftotext":                {names: []string{"pdftotext"}, pkg: "poppler-utils", optional: true},
	"psql":                     {names: []string{"psql"}, pkg: "postgresql-client", optional: true},
	"pg_restore":               {names: []string{"pg_restore"}, pkg: "postgresql-client", optional: true},
	"initdb":                   {names: []string{"initdb"}, pkg: "postgresql", optional: true},
	"systemd-analyze":          {names: []string{"systemd-analyze"}, pkg: "systemd", optional: true},
	"curl":                     {names: []string{"curl"}, pkg: "curl", optional: true},
	"python3":                  {names: []string{"python3"}, pkg: "python3", optional: true},
	"script":                   {names: []string{"script"}, pkg: "bsdutils", optional: true},
	"unshare":                  {names: []string{"unshare"}, pkg: "util-linux"},
	"setpriv":                  {names: []string{"setpriv"}, pkg: "util-linux"},
	"chroot":                   {names: []string{"chroot"}, pkg: "coreutils"},
	"gcc":                      {names: []string{"gcc"}, pkg: "gcc"},
	"bash":                     {names: []string{"bash"}, pkg: "bash"},
}

// OptionalTools are the names of the programs a test may run only through
// Tool (for test/repository).
func OptionalTools() []string {
	var out []string
	for _, tl := range tools {
		if tl.optional {
			out = append(out, tl.names...)
		}
	}
	sort.Strings(out)
	return out
}

// Package is the Debian package that brings the named tool ("" when the
// harness does not know it).
func Package(name string) string { return tools[name].pkg }

// LookPath finds the named tool (or one of the other names it goes by) on
// PATH, without skipping: for the code that has a place of its own to look
// first (pgserver's /usr/lib/postgresql/*/bin).
func LookPath(name string) (string, error) {
	tl, ok := tools[name]
	if !ok {
		return "", fmt.Errorf("harness: %q is not in the table of tools (test/harness/tools.go)", name)
	}
	var first error
	for _, n := range tl.names {
		p, err := exec.LookPath(n)
		if err == nil {
			return p, nil
		}
		if first == nil {
			first = err
		}
	}
	return "", first
}

// Tool returns the path of the named program, or skips t with
// "skipped: needs NAME (Debian package PKG)"; under
// PADDLE_TEST_REQUIRE_TOOLS=1 it fails t instead.
func Tool(t testing.TB, name string) string {
	t.Helper()
	tl, ok := tools[name]
	if !ok {
		t.Fatalf("harness.Tool: %q is not in the table of tools (test/harness/tools.go): add it with its Debian package", name)
		return ""
	}
	p, err := LookPath(name)
	if err != nil {
		missing(t, name, "Debian package "+tl.pkg, "", RequireToolsEnv)
	}
	return p
}

// ToolIfAny is Tool for a check that is one step of a longer test: without
// the tool it logs "not checked: needs NAME (Debian package PKG)", counts
// that in the summary, and returns false, so the rest of the test runs.
// PADDLE_TEST_REQUIRE_TOOLS=1 fails t instead.
func ToolIfAny(t testing.TB, name string) (string, bool) {
	t.Helper()
	tl, ok := tools[name]
	if !ok {
		t.Fatalf("harness.ToolIfAny: %q is not in the table of tools (test/harness/tools.go): add it with its Debian package", name)
		return "", false
	}
	p, err := LookPath(name)
	if err == nil {
		return p, true
	}
	line := fmt.Sprintf("needs %s (Debian package %s)", name, tl.pkg)
	if os.Getenv(RequireToolsEnv) == "1" {
		t.Fatalf("%s, and %s=1 makes that a failure", line, RequireToolsEnv)
		return "", false
	}
	recordSkip(t, line)
	t.Log("not checked: " + line)
	return "", false
}

// ToolAt returns path when an executable is there, or skips t with
// "skipped: needs NAME (HOW)", for a tool that is not on PATH but built
// into a place of its own (kube-apiserver by scripts/kube-apiserver.sh).
// PADDLE_TEST_REQUIRE_TOOLS=1 fails t instead.
func ToolAt(t testing.TB, name, path, how string) string {
	t.Helper()
	if st, err := os.Stat(path); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		missing(t, name, how, "", RequireToolsEnv)
	}
	return path
}

// Postgres skips t because PostgreSQL could not be found (err says where
// it was looked for), or fails it under PADDLE_TEST_REQUIRE_POSTGRES=1.
func Postgres(t testing.TB, err error) {
	t.Helper()
	missing(t, "PostgreSQL", "Debian package postgresql", err.Error(), RequirePostgresEnv)
}

// missing skips t for want of what (how says where it comes from; detail,
// if any, only goes to the test's own output), after appending the skip to
// the summary file, or fails t when the variable require is 1.
func missing(t testing.TB, what, how, detail, require string) {
	t.Helper()
	line := fmt.Sprintf("needs %s (%s)", what, how)
	if detail != "" {
		detail = ": " + detail
	}
	if os.Getenv(require) == "1" {
		t.Fatalf("%s%s, and %s=1 makes that a failure", line, detail, require)
		return
	}
	recordSkip(t, line)
	t.Skip("skipped: " + line + detail)
}

// recordSkip appends "LINE<tab>DIR<tab>TEST" to the summary file, DIR
// being the test's package directory relative to the repository root. One
// short write with O_APPEND: the packages' test processes run at once.
func recordSkip(t testing.TB, line string) {
	file := os.Getenv(SkipsEnv)
	if file == "" {
		return
	}
	dir := "."
	if root, err := Root(); err == nil {
		wd, err := os.Getwd()
		if packageDir != "" {
			wd, err = packageDir, nil
		}
		if err == nil {
			if rel, err := filepath.Rel(root, wd); err == nil {
				dir = filepath.ToSlash(rel)
			}
		}
	}
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Logf("harness: cannot record the skip in %s: %v", file, err)
		return
	}
	defer f.Close()
	name := strings.NewReplacer("\n", " ", "\t", " ").Replace(t.Name())
	if _, err := f.WriteString(line + "\t" + dir + "\t" + name + "\n"); err != nil {
		t.Logf("harness: cannot record the skip in %s: %v", file, err)
	}
}
