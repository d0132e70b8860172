package main

// Black-box tests of the report's table for a terminal: 120 columns by
// default, --columns, --wide, one-line usage errors.

import (
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

var updateTable = os.Getenv("PADDLE_UPDATE_GOLDEN") != ""

func TestReportTableFitsTerminal(t *testing.T) {
	prices, budgets := fixtureFile(t, "prices.json"), fixtureFile(t, "budgets.json")
	db := storetest.SQLiteDSN(t)
	s := startServer(t, db, "--prices", prices)
	postFixture(t, s, "")
	postFixtureFile(t, s, "", "fixture-long-names.json")
	base := []string{"report", "--db", db, "--month", "2025-11", "--prices", prices, "--budgets", budgets}

	r := runMonitor(t, append(base, "--by", "project,owner")...)
	golden := "november-by-project-owner-120.txt"
	if updateTable {
		os.WriteFile(fixtureFile(t, golden), []byte(r.stdout), 0o644)
	}
	if r.code != 0 || r.stdout != readFixture(t, golden) {
		t.Errorf("report --by project,owner: exit %d, stderr %s\nstdout:\n%s\nwant %s", r.code, r.stderr, r.stdout, golden)
	}
	for _, line := range strings.Split(r.stdout, "\n") {
		if n := utf8.RuneCountInString(line); n > 120 {
			t.Errorf("line of %d characters: %q", n, line)
		}
	}
	// The figures of testdata/README.md, as the table writes them (no
	// budget: budgets are a report by project's).
	for _, want := range []string{
		"\nrecommendation-ranking-experime…  alice.wonderland.long-address@e…      1       2.50    5.00        0.0 %       40.0\n",
		"\nsearch                            ann@example.com                       2       14.0  158.00       75.0 %       38.6\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("table lacks %q:\n%s", want, r.stdout)
		}
	}
	// JSON keeps the whole key and full precision.
	if r := runMonitor(t, append(base, "--by", "project,owner", "--format", "json")...); !strings.Contains(r.stdout, `"recommendation-ranking-experiments-2025"`) ||
		strings.Contains(r.stdout, "…") {
		t.Errorf("JSON: %s", r.stdout)
	}

	// By project every default column fits, the budget's too; a budget's
	// figures below the table, the long project shortened there too.
	r = runMonitor(t, append(base, "--by", "project")...)
	lines := strings.Split(r.stdout, "\n")
	if r.code != 0 || lines[1] != "project                           tasks  gpu_hours    cost  waste_share  util_mean  budget_used_share" ||
		!strings.Contains(r.stdout, "\nsearch                                4       36.0  401.00       84.4 %       57.5             80.2 %\n") ||
		!strings.Contains(r.stdout, "\nnlp                                   4       12.5   25.00       12.0 %        0.0            125.0 %\n") ||
		!strings.Contains(r.stdout, "\nbudget recommendation-ranking-experime…: gpu_hours 2.50 of 10.0 (25.0 %), forecast 2.50 (25.0 %)\n") ||
		strings.Contains(r.stdout, "Too wide for") {
		t.Errorf("report --by project: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	r = runMonitor(t, append(base, "--columns", "idle_gpu_hours,cost,budget_forecast")...)
	if lines := strings.Split(r.stdout, "\n"); r.code != 0 ||
		lines[1] != "project                           idle_gpu_hours    cost  budget_forecast" ||
		!strings.Contains(r.stdout, "\nsearch                                      11.0  401.00           401.00\n") {
		t.Errorf("--columns: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runMonitor(t, append(base, "--wide")...)
	if r.code != 0 || !strings.Contains(strings.Split(r.stdout, "\n")[1], "queue_wait_max_seconds") || strings.Contains(r.stdout, "Too wide for") {
		t.Errorf("--wide: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// Usage errors: one line naming the bad value and the allowed ones.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--columns", "cost,gpu_hour"}, `paddle-monitor: usage: --columns: unknown column "gpu_hour": allowed: project, tasks, completed_tasks,`},
		{[]string{"--format", "xml"}, `paddle-monitor: usage: --format "xml": allowed: table, csv, json`},
		{[]string{"--by", "team"}, `paddle-monitor: usage: --by: unknown key "team" (allowed: project, owner,`},
		{[]string{"--wide", "--columns", "cost"}, "paddle-monitor: usage: --wide and --columns: give one of them"},
	} {
		r := runMonitor(t, append(base, c.args...)...)
		if r.code != 2 || !strings.HasPrefix(r.stderr, c.want) || strings.Count(r.stderr, "\n") != 1 || r.stdout != "" {
			t.Errorf("report %v: exit %d, stderr %q; want 2 and one line starting %q", c.args, r.code, r.stderr, c.want)
		}
	}
	if r := runMonitor(t, "reprot"); r.code != 2 || !strings.HasPrefix(r.stderr, "paddle-monitor: usage: unknown command \"reprot\" (allowed: serve, report, ") || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("unknown command: exit %d, stderr %q", r.code, r.stderr)
	}
}
