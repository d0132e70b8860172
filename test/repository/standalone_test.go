// Package repository holds the tests of the repository as a whole (what
// every file may point to), run from its root.
package repository

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/paddle-entrypoint/paddle-entrypoint/test/harness"
)

// outsidePath matches a reference to the material the project was written
// from, which a user who clones the repository does not have: a path to a
// sibling "shared" directory, or to its spec, reference or style folders.
// Built from pieces so that this file does not match itself.
var outsidePath = regexp.MustCompile(`(\.\./|/work/)` + `shared\b|\bshared/(spec|reference|style)/`)

// TestRepositoryStandsAlone: no file of the repository (docs, README,
// Makefile, Dockerfile, scripts, code, tests) points outside it.
func TestRepositoryStandsAlone(t *testing.T) {
	if err := harness.ChdirRoot(); err != nil {
		t.Fatal(err)
	}
	files := repositoryFiles(t)
	if len(files) < 20 {
		t.Fatalf("found only %d files; is this the repository root?", len(files))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if bytes.IndexByte(b, 0) >= 0 {
			continue // binary
		}
		for i, line := range strings.Split(string(b), "\n") {
			if m := outsidePath.FindString(line); m != "" {
				t.Errorf("%s:%d points outside the repository (%q): %s", f, i+1, m, strings.TrimSpace(line))
			}
		}
	}
}

// repositoryFiles lists the tracked files, or every file but .git's when
// the tree is not a git checkout (a source archive).
func repositoryFiles(t *testing.T) []string {
	t.Helper()
	if out, err := exec.Command("git", "ls-files", "-z").Output(); err == nil && len(out) > 0 {
		var files []string
		for _, f := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
			if fi, err := os.Lstat(f); err == nil && fi.Mode().IsRegular() {
				files = append(files, f)
			}
		}
		return files
	}
	var files []string
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || p == "bin") {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}
