package monitor

import (
	"context"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/accounts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/report"
)

// ProjectsEvery is how often the project month series are computed at
// most: a month's report per scrape would cost every Prometheus (and every
// replica) a report of the whole month.
const ProjectsEvery = time.Minute

// ProjectCollector exposes, for the current UTC month, each project's
// GPU-seconds and cost (with prices) and its budget's limit, in base units:
// paddle_project_month_gpu_seconds, paddle_project_month_cost,
// paddle_project_budget_gpu_seconds, paddle_project_budget_cost. The
// month's report is computed at most once per ProjectsEvery by each
// replica; scrapes in between get the cached series.
type ProjectCollector struct {
	src     facts.Source
	prices  *report.Prices
	budgets *report.Budgets
	now     func() time.Time
	log     *slog.Logger
	// Namespaces charges undeclared use to projects (--namespace-projects;
	// nil: none is), as the report does; set it before the first scrape.
	Namespaces func(namespace string) (project string, ok bool)
	// Accounts, when set, are the figures of the series (serve hands every
	// view the same); nil: made of src, the prices and Namespaces.
	Accounts *accounts.Accounts

	mu      sync.Mutex
	at      time.Time
	cached  []prometheus.Metric
	timeout time.Duration
}

// due says whether a month's series computed at at (never: none) are
// computed again at now: at most once per ProjectsEvery, and again when
// the clock went back.
func due(none bool, at, now time.Time) bool {
	return none || now.Sub(at) >= ProjectsEvery || now.Before(at)
}

// NewProjectCollector returns the collector of src's month by project.
// now is the clock (time.Now when nil).
func NewProjectCollector(src facts.Source, prices *report.Prices, budgets *report.Budgets, now func() time.Time, log *slog.Logger) *ProjectCollector {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &ProjectCollector{src: src, prices: prices, budgets: budgets, now: now, log: log, timeout: 30 * time.Second}
}

// Describe implements prometheus.Collector: the families of
// projectFamilies.
func (c *ProjectCollector) Describe(ch chan<- *prometheus.Desc) {
	describe(ch, projectFamilies)
}

// Collect implements prometheus.Collector.
func (c *ProjectCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if due(c.cached == nil, c.at, now) {
		c.cached, c.at = c.compute(now), now
	}
	for _, m := range c.cached {
		ch <- m
	}
}

func (c *ProjectCollector) compute(now time.Time) []prometheus.Metric {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	acc := c.Accounts
	if acc == nil {
		acc = accounts.New(accounts.Sources{Facts: c.src}, accounts.Inputs{Prices: c.prices, Charge: c.Namespaces})
	}
	rep, err := acc.ProjectMonth(ctx, now)
	if err != nil {
		c.log.Error("project month series: the report failed", "err", err)
		return []prometheus.Metric{famProjectScrapeError.metric(1)}
	}
	out := []prometheus.Metric{famProjectScrapeError.metric(0)}
	seen := map[string]bool{}
	emit := func(project string, gpuHours float64, cost *float64) {
		seen[project] = true
		out = append(out, famProjectGPUSeconds.metric(math.Round(gpuHours*3600*100)/100, project))
		if c.prices != nil {
			v := 0.0
			if cost != nil {
				v = *cost
			}
			out = append(out, famProjectCost.metric(v, project))
		}
		if l, ok := c.budgets.For(project); ok {
			if l.Kind == report.BudgetCost {
				out = append(out, famBudgetCost.metric(l.Value, project))
			} else {
				out = append(out, famBudgetGPUSeconds.metric(l.Value*3600, project))
			}
		}
	}
	for _, row := range rep.Rows {
		emit(row.Key["project"], row.GPUHours, row.Cost)
	}
	// A project named in the budgets that used nothing yet this month
	// still has its limit (and 0 used), so that its alert can be read.
	for _, p := range c.budgets.Exact() {
		if !seen[p] {
			emit(p, 0, nil)
		}
	}
	return out
}
