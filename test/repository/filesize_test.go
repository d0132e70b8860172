package repository

import (
	"bytes"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/paddle-entrypoint/paddle-entrypoint/test/harness"
)

// maxLines is the house's bound on a non-test Go file: a file longer than
// this holds more than one idea and is split where the ideas part.
const maxLines = 500

// sizeRuleApplies says whether the line bound holds for a tracked file:
// every non-test Go file outside test/bench (the benchmarks keep their
// scenarios in one place on purpose).
func sizeRuleApplies(path string) bool {
	return strings.HasSuffix(path, ".go") &&
		!strings.HasSuffix(path, "_test.go") &&
		!strings.HasPrefix(path, "test/bench/")
}

// lineCount counts the lines of b as wc -l does, plus a last line with no
// newline.
func lineCount(b []byte) int {
	n := bytes.Count(b, []byte("\n"))
	if len(b) > 0 && b[len(b)-1] != '\n' {
		n++
	}
	return n
}

func TestSizeRuleApplies(t *testing.T) {
	for _, tc := range []struct {
		path string
		want bool
	}{
		{"main.go", true},
		{"monitor/report/report.go", true},
		{"monitor/report/report_test.go", false},
		{"test/bench/monitorbench/scenarios.go", false},
		{"test/harness/harness.go", true},
		{"docs/architecture.md", false},
	} {
		if got := sizeRuleApplies(tc.path); got != tc.want {
			t.Errorf("sizeRuleApplies(%q) = %v, want %v", tc.path, got, tc.want)
		}
	}
	for _, tc := range []struct {
		in   string
		want int
	}{{"", 0}, {"a", 1}, {"a\n", 1}, {"a\nb", 2}, {"a\nb\n", 2}} {
		if got := lineCount([]byte(tc.in)); got != tc.want {
			t.Errorf("lineCount(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

// TestNoLongFiles: no non-test Go file outside test/bench is over
// maxLines lines; the failure lists every offender with its length.
func TestNoLongFiles(t *testing.T) {
	if err := harness.ChdirRoot(); err != nil {
		t.Fatal(err)
	}
	var over []string
	for _, f := range repositoryFiles(t) {
		if !sizeRuleApplies(f) {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		n := lineCount(b)
		if n > maxLines {
			over = append(over, f+": "+strconv.Itoa(n)+" lines")
		}
	}
	sort.Strings(over)
	if len(over) > 0 {
		t.Errorf("non-test Go files over %d lines (split each where its ideas part):\n\t%s", maxLines, strings.Join(over, "\n\t"))
	}
}
