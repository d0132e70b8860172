package repository

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/paddle-entrypoint/paddle-entrypoint/test/harness"
)

// namedPackages returns the packages docs/architecture.md names in
// backquotes (`monitor/store`), relative to the module.
func namedPackages(doc string) map[string]bool {
	named := map[string]bool{}
	for _, m := range regexp.MustCompile("`([a-z0-9_./-]+)`").FindAllStringSubmatch(doc, -1) {
		named[strings.TrimSuffix(m[1], "/")] = true
	}
	return named
}

func TestNamedPackages(t *testing.T) {
	got := namedPackages("| `monitor/store` | x | `internal/wire` and `labels/`, not node/hami |")
	for _, want := range []string{"monitor/store", "internal/wire", "labels"} {
		if !got[want] {
			t.Errorf("namedPackages misses %q: %v", want, got)
		}
	}
	if got["node/hami"] {
		t.Errorf("namedPackages takes an unquoted name: %v", got)
	}
}

// TestArchitectureNamesEveryPackage: docs/architecture.md names every
// package `go list ./...` finds (the root as "root"), so that a newcomer
// finds each one and its wing there.
func TestArchitectureNamesEveryPackage(t *testing.T) {
	if err := harness.ChdirRoot(); err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "list", "./...").Output()
	if err != nil {
		t.Fatalf("go list ./...: %v", err)
	}
	named := namedPackages(string(doc))
	for _, path := range strings.Fields(string(out)) {
		rel, ok := relative(path)
		if !ok || rel == "" {
			continue // the root is the table's "root `main`" row
		}
		if !named[rel] {
			t.Errorf("docs/architecture.md does not name package %s (add it to \"Every package and its wing\")", rel)
		}
	}
}
