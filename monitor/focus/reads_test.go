package focus

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/report"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
)

// countingSource is a store with no tasks and one GPU no report covers
// (unobserved all month, so every day computes a declared offset) that
// counts the reads of each window's observations, tasks (by window, and
// by day of a window), ledger data and declared tasks.
type countingSource struct {
	mu       sync.Mutex
	obs      map[facts.Window]int
	tasks    map[facts.Window]int
	byDay    map[facts.Window]int
	ledger   map[[2]int64]int
	declared map[[2]int64]int
}

func (c *countingSource) count(m map[facts.Window]int, w facts.Window) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m[w]++
}

func (c *countingSource) countUnix(m map[[2]int64]int, from, to int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m[[2]int64{from, to}]++
}

func (c *countingSource) ReportSums(context.Context, facts.Window, []string, bool) (facts.Sums, error) {
	return facts.Sums{}, nil
}

func (c *countingSource) ReportMetric(context.Context, facts.Window, []string, string) ([]facts.MetricSums, error) {
	return nil, nil
}

func (c *countingSource) ReportTasks(_ context.Context, w facts.Window) ([]facts.TaskUsage, error) {
	c.count(c.tasks, w)
	return nil, nil
}

func (c *countingSource) ReportTasksByDay(_ context.Context, w facts.Window) ([][]facts.TaskUsage, error) {
	c.count(c.byDay, w)
	return make([][]facts.TaskUsage, w.To.Sub(w.From)/(24*time.Hour)), nil
}

func (c *countingSource) Observations(_ context.Context, w facts.Window) (*facts.Observations, error) {
	c.count(c.obs, w)
	return &facts.Observations{}, nil
}

func (c *countingSource) LedgerData(_ context.Context, from, to, _ int64) (*store.LedgerData, error) {
	c.countUnix(c.ledger, from, to)
	return &store.LedgerData{Lives: []store.GPULife{{Node: "n1", UUID: "GPU-1", Model: "x", FirstStart: 0, LastEnd: 4e9}}}, nil
}

func (c *countingSource) LedgerDataRaw(ctx context.Context, from, to, retire int64) (*store.LedgerData, error) {
	return c.LedgerData(ctx, from, to, retire)
}

func (c *countingSource) TieCandidates(context.Context, string, *store.UserIdentity) ([]store.Tie, error) {
	return nil, nil
}

func (c *countingSource) LedgerTies(context.Context, []store.UserHour) (map[string][]store.Tie, error) {
	return nil, nil
}

func (c *countingSource) LedgerUserHours(context.Context, int64, int64, *store.UserHour) ([]store.UserHour, error) {
	return nil, nil
}

func (c *countingSource) DeclaredTasks(_ context.Context, from, to int64) ([]store.DeclaredTask, error) {
	c.countUnix(c.declared, from, to)
	return nil, nil
}

func (c *countingSource) ShareOverlaps(context.Context, facts.Window) ([]store.ShareOverlap, error) {
	return nil, nil
}

func (c *countingSource) CoveredSpans(context.Context, int64, int64) (map[string]map[string][][2]int64, error) {
	return nil, nil
}

// TestGenerateReadsEachDayOnce: each day of the export reads its
// observations and its ledger data once, for the sharing of its GPUs, the
// three billing parts, the ledger and the declared offset together
// (MONITOR.md 18: the observations were read five times a day, the ledger
// data twice), and the month's tasks by day and its declared tasks are
// read once for every day (each day read its own before).
func TestGenerateReadsEachDayOnce(t *testing.T) {
	p, err := report.ParsePrices(strings.NewReader(`{"currency":"EUR","models":{"x":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	src := &countingSource{obs: map[facts.Window]int{}, tasks: map[facts.Window]int{}, byDay: map[facts.Window]int{},
		ledger: map[[2]int64]int{}, declared: map[[2]int64]int{}}
	if _, err := Generate(context.Background(), Config{Source: src, Ledger: src, Prices: p}, "2026-11", nil); err != nil {
		t.Fatal(err)
	}
	from := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for d := range 30 {
		w := facts.Window{From: from.AddDate(0, 0, d), To: from.AddDate(0, 0, d+1)}
		day := [2]int64{w.From.Unix(), w.To.Unix()}
		if src.obs[w] != 1 || src.ledger[day] != 1 {
			t.Errorf("%s: observations read %d times, ledger data %d; want 1 and 1", w.From.Format(time.DateOnly), src.obs[w], src.ledger[day])
		}
	}
	month := facts.Window{From: from, To: from.AddDate(0, 1, 0)}
	if len(src.obs) != 30 || len(src.ledger) != 30 || len(src.tasks) != 0 || len(src.byDay) != 1 || src.byDay[month] != 1 ||
		len(src.declared) != 1 || src.declared[[2]int64{month.From.Unix(), month.To.Unix()}] != 1 {
		t.Errorf("windows read: %d of observations, %d of ledger data (want 30 each); tasks %v (want none), by day %v (the month's, once); "+
			"declared tasks %v (the month's, once)", len(src.obs), len(src.ledger), src.tasks, src.byDay, src.declared)
	}
}
