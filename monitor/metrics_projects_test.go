package monitor_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/report"
)

// countingSource is a report source with one project's sums that counts
// the reports asked of it.
type countingSource struct {
	reports  int
	gpuSec   int64
	lastFrom time.Time
}

func (c *countingSource) ReportSums(_ context.Context, w facts.Window, _ []string, _ bool) (facts.Sums, error) {
	c.reports++
	c.lastFrom = w.From
	return facts.Sums{
		Tasks: []facts.TaskSums{{Key: map[string]string{"project": "search", "owner": "ann"}, Tasks: 1, Open: 1}},
		GPUs: []facts.GPUSums{{Key: map[string]string{"project": "search", "owner": "ann", "model": "Tesla T4"},
			InstanceSeconds: c.gpuSec, GPUSeconds: float64(c.gpuSec)}},
	}, nil
}

func (c *countingSource) ReportMetric(context.Context, facts.Window, []string, string) ([]facts.MetricSums, error) {
	return nil, nil
}

// The project month series come from one report per minute at most: a
// scrape within the minute gets the cached series, the first scrape after
// it a new report of the month that holds the clock.
func TestProjectCollectorCachesAMinute(t *testing.T) {
	prices, err := report.ParsePrices(strings.NewReader(`{"currency": "CNY", "models": {"Tesla T4": 2}}`))
	if err != nil {
		t.Fatal(err)
	}
	budgets, err := report.ParseBudgets(strings.NewReader(`{"currency": "CNY", "budgets": [{"project": "search", "monthly_cost": 500}, {"project": "idle_team", "monthly_gpu_hours": 8}, {"project": "n*", "monthly_gpu_hours": 1}]}`))
	if err != nil {
		t.Fatal(err)
	}
	src := &countingSource{gpuSec: 7200}
	now := time.Date(2026, 11, 30, 23, 59, 30, 0, time.UTC)
	c := monitor.NewProjectCollector(src, prices, budgets, func() time.Time { return now }, nil)
	want := func(gpuSec, cost string) string {
		return `# HELP paddle_project_budget_cost A project's monthly cost budget (monthly_cost of the budgets file, in its currency).
# TYPE paddle_project_budget_cost gauge
paddle_project_budget_cost{project="search"} 500
# HELP paddle_project_budget_gpu_seconds A project's monthly GPU budget (monthly_gpu_hours of the budgets file, in GPU-seconds).
# TYPE paddle_project_budget_gpu_seconds gauge
paddle_project_budget_gpu_seconds{project="idle_team"} 28800
# HELP paddle_project_month_cost What a project's GPUs cost in the current UTC month, in the prices file's currency (computed at most once a minute).
# TYPE paddle_project_month_cost gauge
paddle_project_month_cost{project="idle_team"} 0
paddle_project_month_cost{project="search"} ` + cost + `
# HELP paddle_project_month_gpu_seconds GPU-seconds a project used in the current UTC month, as the report counts them (computed at most once a minute).
# TYPE paddle_project_month_gpu_seconds gauge
paddle_project_month_gpu_seconds{project="idle_team"} 0
paddle_project_month_gpu_seconds{project="search"} ` + gpuSec + `
`
	}
	names := []string{"paddle_project_budget_cost", "paddle_project_budget_gpu_seconds", "paddle_project_month_cost", "paddle_project_month_gpu_seconds"}
	if err := testutil.CollectAndCompare(c, strings.NewReader(want("7200", "4")), names...); err != nil {
		t.Error(err)
	}
	// 59 s later, with more GPU-seconds in the store: the same series, no
	// new report.
	src.gpuSec = 10800
	now = now.Add(59 * time.Second)
	for range 3 {
		if err := testutil.CollectAndCompare(c, strings.NewReader(want("7200", "4")), names...); err != nil {
			t.Error(err)
		}
	}
	if src.reports != 1 {
		t.Errorf("%d reports for scrapes within a minute, want 1", src.reports)
	}
	// A minute after the first: a new report, of December now.
	now = now.Add(time.Second)
	if err := testutil.CollectAndCompare(c, strings.NewReader(want("10800", "6")), names...); err != nil {
		t.Error(err)
	}
	if src.reports != 2 || !src.lastFrom.Equal(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("after a minute: %d reports, the last of the month from %s; want 2, December", src.reports, src.lastFrom)
	}
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %+v", err, problems)
	}
}
