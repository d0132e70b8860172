package focus

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/report"
)

// countingSource is a store with no tasks that counts the reads of each
// window's observations and tasks.
type countingSource struct {
	mu    sync.Mutex
	obs   map[facts.Window]int
	tasks map[facts.Window]int
}

func (c *countingSource) ReportSums(context.Context, facts.Window, []string, bool) (facts.Sums, error) {
	return facts.Sums{}, nil
}

func (c *countingSource) ReportMetric(context.Context, facts.Window, []string, string) ([]facts.MetricSums, error) {
	return nil, nil
}

func (c *countingSource) ReportTasks(_ context.Context, w facts.Window) ([]facts.TaskUsage, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tasks[w]++
	return nil, nil
}

func (c *countingSource) Observations(_ context.Context, w facts.Window) (*facts.Observations, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.obs[w]++
	return &facts.Observations{}, nil
}

// TestGenerateReadsEachDayOnce: each day of the export reads its
// observations and its tasks once, for the chargeback's lines, the three
// billing parts and the declared offset together (MONITOR.md 18: they
// were read five times a day).
func TestGenerateReadsEachDayOnce(t *testing.T) {
	p, err := report.ParsePrices(strings.NewReader(`{"currency":"EUR","models":{"x":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	src := &countingSource{obs: map[facts.Window]int{}, tasks: map[facts.Window]int{}}
	if _, err := Generate(context.Background(), Config{Source: src, Prices: p}, "2026-11", nil); err != nil {
		t.Fatal(err)
	}
	from := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for d := range 30 {
		w := facts.Window{From: from.AddDate(0, 0, d), To: from.AddDate(0, 0, d+1)}
		if src.obs[w] != 1 || src.tasks[w] != 1 {
			t.Errorf("%s: observations read %d times, tasks %d; want 1 and 1", w.From.Format(time.DateOnly), src.obs[w], src.tasks[w])
		}
	}
}
