//go:build e2e

package e2e

// The glibc floor: what the image ships must load on the C library of the
// Paddle 2.6 images (Ubuntu 20.04, glibc 2.31). A program built on a newer
// system fails there before main with "GLIBC_2.34 not found", and for the
// probe that would silently cost every container its GPU count.

import (
	"debug/elf"
	"errors"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// glibcNeeds returns the GLIBC_ symbol versions the ELF file imports, each
// with one symbol that needs it.
func glibcNeeds(path string) (map[string]string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	syms, err := f.ImportedSymbols()
	if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
		return nil, err
	}
	needs := map[string]string{}
	for _, s := range syms {
		if strings.HasPrefix(s.Version, "GLIBC_") {
			if _, ok := needs[s.Version]; !ok {
				needs[s.Version] = s.Name
			}
		}
	}
	return needs, nil
}

// newerThan reports whether the symbol version v (GLIBC_2.34) needs a
// glibc newer than floor (2.31). A version that is not a number, such as
// GLIBC_PRIVATE, ties the program to one build of glibc and counts as newer.
func newerThan(v, floor string) bool {
	a, ok1 := parseVersion(strings.TrimPrefix(v, "GLIBC_"))
	b, ok2 := parseVersion(floor)
	if !ok1 || !ok2 {
		return true
	}
	for i := 0; i < len(a) || i < len(b); i++ {
		var x, y int
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y {
			return x > y
		}
	}
	return false
}

func parseVersion(s string) ([]int, bool) {
	var out []int
	for _, p := range strings.Split(s, ".") {
		n, err := strconv.Atoi(p)
		if err != nil {
			return nil, false
		}
		out = append(out, n)
	}
	return out, true
}

// tooNew returns the needed versions above floor, sorted, each with its symbol.
func tooNew(needs map[string]string, floor string) []string {
	var out []string
	for v, sym := range needs {
		if newerThan(v, floor) {
			out = append(out, v+" ("+sym+")")
		}
	}
	sort.Strings(out)
	return out
}

func sortedKeys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return newerThan(out[j], strings.TrimPrefix(out[i], "GLIBC_")) })
	return out
}

func TestGlibcVersionOrder(t *testing.T) {
	tests := []struct {
		v, floor string
		newer    bool
	}{
		{"GLIBC_2.34", "2.31", true},
		{"GLIBC_2.31", "2.31", false},
		{"GLIBC_2.3.4", "2.31", false},
		{"GLIBC_2.2.5", "2.31", false},
		{"GLIBC_2.32", "2.31", true},
		{"GLIBC_3.0", "2.31", true},
		{"GLIBC_2.31.1", "2.31", true},
		{"GLIBC_PRIVATE", "2.31", true},
	}
	for _, tc := range tests {
		if got := newerThan(tc.v, tc.floor); got != tc.newer {
			t.Errorf("newerThan(%q, %q) = %v, want %v", tc.v, tc.floor, got, tc.newer)
		}
	}
}

// TestGlibcFloor lists the C library versions each executable in the image
// needs, and fails above the floor. The entrypoint needs none: it is static.
func TestGlibcFloor(t *testing.T) {
	dir := extractFromImage(t, "/usr/local/bin/paddle-entrypoint", "/usr/local/bin/paddle-gpu-probe")

	ep := filepath.Join(dir, "paddle-entrypoint")
	f, err := elf.Open(ep)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("paddle-entrypoint has an ELF interpreter: it is not static")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("paddle-entrypoint needs shared libraries %v: it is not static", libs)
	}
	f.Close()
	needs, err := glibcNeeds(ep)
	if err != nil || len(needs) > 0 {
		t.Errorf("paddle-entrypoint: needs %v (%v), want no C library at all", needs, err)
	}

	probe := filepath.Join(dir, "paddle-gpu-probe")
	needs, err = glibcNeeds(probe)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("paddle-gpu-probe needs %s", strings.Join(sortedKeys(needs), " "))
	if bad := tooNew(needs, glibcFloor); len(bad) > 0 {
		if setup.rootfs == "" {
			t.Skipf("%s, so the image ships a probe built on this host, which needs %v above glibc %s", setup.noRootfs, bad, glibcFloor)
		}
		t.Errorf("paddle-gpu-probe needs %v, above the Paddle 2.6 images' glibc %s", bad, glibcFloor)
	}
}

// TestGlibcFloorCatchesHostBuild shows the check failing where it must: the
// probe `make build` writes on a host with a newer glibc cannot ship.
func TestGlibcFloorCatchesHostBuild(t *testing.T) {
	out, err := exec.Command("getconf", "GNU_LIBC_VERSION").Output()
	host := strings.TrimPrefix(strings.TrimSpace(string(out)), "glibc ")
	if err != nil || !newerThan("GLIBC_"+host, glibcFloor) {
		t.Skipf("host glibc %q (%v) is not newer than %s", host, err, glibcFloor)
	}
	probe := filepath.Join(t.TempDir(), "paddle-gpu-probe")
	buildHostProbe(t, probe)
	needs, err := glibcNeeds(probe)
	if err != nil {
		t.Fatal(err)
	}
	if bad := tooNew(needs, glibcFloor); len(bad) == 0 {
		t.Errorf("a probe built against glibc %s needs only %v: the floor check would not catch it", host, sortedKeys(needs))
	} else {
		t.Logf("host-built probe (glibc %s) needs %v: rightly refused", host, bad)
	}
}

// extractFromImage copies files out of the test image into a fresh directory.
func extractFromImage(t *testing.T, paths ...string) string {
	t.Helper()
	dir := t.TempDir()
	name := containerName(t)
	if r := podman(t, time.Minute, "create", "--name", name, testImage); r.Code != 0 {
		t.Fatalf("podman create: %s", r.Stderr)
	}
	defer podman(t, time.Minute, "rm", "--force", name)
	for _, p := range paths {
		if r := podman(t, time.Minute, "cp", name+":"+p, filepath.Join(dir, filepath.Base(p))); r.Code != 0 {
			t.Fatalf("podman cp %s: %s", p, r.Stderr)
		}
	}
	return dir
}
