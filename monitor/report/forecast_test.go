package report

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
)

// runningSource is a fakeSource that also lists running tasks.
type runningSource struct {
	fakeSource
	running   []facts.RunningTask
	seenSince int64
}

func (r *runningSource) RunningTasks(_ context.Context, seenSince int64) ([]facts.RunningTask, error) {
	r.seenSince = seenSince
	return r.running, nil
}

// A GPU-hours forecast by hand: nlp used 10 GPU-hours; on December 31 at
// 00:00 it runs a task on a quarter of a T4 and one GPU counted from
// device nodes (1.25 GPUs) for the 24 hours left: 10 + 30 = 40 of 100. A
// running task outside the reader's scope adds nothing; a limit of 0 has
// no shares; only tasks seen in the last 10 minutes are asked for.
func TestForecastGPUHours(t *testing.T) {
	budgets, err := ParseBudgets(strings.NewReader(`{"budgets": [{"project": "nlp", "monthly_gpu_hours": 100}, {"project": "free", "monthly_gpu_hours": 0}]}`))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 31, 0, 0, 0, 0, time.UTC)
	src := &runningSource{fakeSource: fakeSource{tasks: []facts.TaskSums{
		{Key: key("project", "nlp", "owner", "dan"), Tasks: 1, Open: 1, UnlistedGPUSeconds: 36000},
		{Key: key("project", "free", "owner", "dan"), Tasks: 1, Open: 1, UnlistedGPUSeconds: 3600},
	}}, running: []facts.RunningTask{
		{Project: "nlp", Owner: "dan", GPUCount: 2, GPUs: []facts.RunningGPU{{Model: "Tesla T4", Share: 0.25}}},
		{Project: "nlp", Owner: "eve", GPUCount: 8}, // outside the scope
	}}
	r, err := Compute(context.Background(), src, Query{Window: facts.Month(now), Budgets: budgets, Now: now,
		Scope: func(_, owner string) bool { return owner == "dan" }})
	if err != nil {
		t.Fatal(err)
	}
	if src.seenSince != now.Add(-10*time.Minute).Unix() {
		t.Errorf("asked for tasks seen since %d, want now − 10 min", src.seenSince)
	}
	got := map[string]BudgetFigures{}
	for _, row := range r.Rows {
		if row.Budget != nil {
			got[row.Key["project"]] = *row.Budget
		}
	}
	nlp := got["nlp"]
	if nlp.Kind != BudgetGPUHours || nlp.Limit != 100 || nlp.Used != 10 || *nlp.UsedShare != 0.1 || nlp.Forecast != 40 || *nlp.ForecastShare != 0.4 {
		t.Errorf("nlp's budget %+v", nlp)
	}
	free := got["free"]
	if free.Used != 1 || free.Forecast != 1 || free.UsedShare != nil || free.ForecastShare != nil {
		t.Errorf("a limit of 0: %+v", free)
	}

	// A source that cannot list running tasks cannot forecast this month.
	if _, err := Compute(context.Background(), &src.fakeSource, Query{Window: facts.Month(now), Budgets: budgets, Now: now}); err == nil {
		t.Error("a forecast without the running tasks did not fail")
	}
	// Last month needs no running tasks: the forecast is what was used.
	r, err = Compute(context.Background(), &src.fakeSource, Query{Window: facts.Month(time.Date(2026, 11, 15, 0, 0, 0, 0, time.UTC)), Budgets: budgets, Now: now})
	if err != nil || r.Rows[0].Budget == nil || r.Rows[0].Budget.Forecast != r.Rows[0].Budget.Used {
		t.Errorf("last month: %+v, %v", r, err)
	}
}
