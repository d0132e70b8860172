package report

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
)

// observingSource is a fakeSource that is also an Observer.
type observingSource struct {
	fakeSource
	obs *facts.Observations
}

func (o *observingSource) Observations(context.Context, facts.Window) (*facts.Observations, error) {
	return o.obs, nil
}

// randomFleet is a fleet's declared sums and observations drawn from r:
// tasks of a few projects, owners and models, some attributed (their
// covered part taken from their declared sums), undeclared use of a few
// namespaces.
func randomFleet(r *rand.Rand) *observingSource {
	src := &observingSource{obs: &facts.Observations{Covered: true}}
	projects, owners := []string{"a", "b", "c"}, []string{"x", "y"}
	models := []string{"T4", "NVIDIA H200", ""}
	for i := range 1 + r.IntN(12) {
		k := key("project", projects[r.IntN(3)], "owner", owners[r.IntN(2)], "hostname", fmt.Sprint("h", r.IntN(3)),
			"node", fmt.Sprint("n", r.IntN(3)))
		sec := float64(r.IntN(36000))
		failed := r.IntN(4) == 0
		t := facts.TaskSums{Key: k, Tasks: 1, Completed: 1}
		if failed {
			t.Failed = 1
		}
		src.tasks = append(src.tasks, t)
		model := models[r.IntN(3)]
		gk := key("project", k["project"], "owner", k["owner"], "hostname", k["hostname"], "node", k["node"], "model", model)
		share := []float64{1, 0.5, 0.01}[r.IntN(3)]
		g := facts.GPUSums{Key: gk, InstanceSeconds: int64(sec), GPUSeconds: share * sec, IdleGPUSeconds: share * sec / 4}
		if failed {
			g.FailedGPUSeconds = g.GPUSeconds
		} else {
			g.IdleOKGPUSeconds = g.IdleGPUSeconds
		}
		src.gpus = append(src.gpus, g)
		if r.IntN(2) == 0 {
			continue
		}
		cov := sec * float64(r.IntN(3)) / 2
		f := 0.0
		if sec > 0 {
			f = cov / sec
		}
		ot := facts.ObservedTask{Key: k, Failed: failed, CountedSeconds: sec, CoveredSeconds: cov}
		if f > 0 {
			d := g
			d.InstanceSeconds = int64(math.Round(cov))
			d.GPUSeconds, d.FailedGPUSeconds, d.IdleGPUSeconds, d.IdleOKGPUSeconds =
				g.GPUSeconds*f, g.FailedGPUSeconds*f, g.IdleGPUSeconds*f, g.IdleOKGPUSeconds*f
			ot.CoveredDeclared = []facts.GPUSums{d}
		}
		for range 1 + r.IntN(2) {
			// Observed on the task's node, or on another one (the node
			// that reported it is its row by node).
			ot.Observed = append(ot.Observed, facts.InstanceUse{Node: fmt.Sprint("n", r.IntN(4)), Model: models[r.IntN(2)], Seconds: float64(r.IntN(36000)),
				BusySeconds: float64(r.IntN(100)), MIG: i%3 == 0, Profile: "1g.18gb", Slices: 1, TotalSlices: 7})
		}
		if r.IntN(3) == 0 {
			// A claim on use nobody could be tied to (MONITOR.md 20.2),
			// billed unless its namespace is mapped.
			ot.Unattributed = append(ot.Unattributed, facts.UndeclaredUse{Namespace: []string{"", "team-a", "kube"}[r.IntN(3)],
				Use: facts.InstanceUse{Node: fmt.Sprint("n", r.IntN(3)), Model: models[r.IntN(2)], Seconds: float64(r.IntN(3600))}})
		}
		src.obs.Tasks = append(src.obs.Tasks, ot)
	}
	for range r.IntN(4) {
		src.obs.Undeclared = append(src.obs.Undeclared, facts.UndeclaredUse{Namespace: []string{"team-a", "team-b", "kube"}[r.IntN(3)],
			Use: facts.InstanceUse{Node: fmt.Sprint("n", r.IntN(3)), Model: models[r.IntN(3)], Seconds: float64(r.IntN(36000))}})
	}
	src.totalTasks = src.tasks
	return src
}

// For every fleet and every --by, the total's billed, declared, observed
// and undeclared GPU-hours and cost are the sums of the rows'.
func TestTotalIsSumOfRows(t *testing.T) {
	prices, err := ParsePrices(strings.NewReader(`{"currency":"CNY","default":2,"models":{"NVIDIA H200":10,"NVIDIA H200 1g.18gb":1.5}}`))
	if err != nil {
		t.Fatal(err)
	}
	ns := func(namespace string) (string, bool) {
		switch namespace {
		case "team-a":
			return "a", true
		case "team-b":
			return "ads", true
		}
		return "", false
	}
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 7))
		src := randomFleet(r)
		for _, by := range [][]string{{"project"}, {"owner"}, {"hostname"}, {"node"}, {"project", "node"}, {"node", "model"}, {"project", "owner"}} {
			rep, err := Compute(context.Background(), src, Query{Window: nov, By: by, Prices: prices, Namespaces: ns})
			if err != nil {
				t.Fatal(err)
			}
			var gpu, cost, decl, obs, und float64
			for _, row := range rep.Rows {
				gpu += row.GPUHours
				cost += *row.Cost
				decl += *row.DeclaredGPUHours
				obs += *row.ObservedGPUHours
				und += *row.UndeclaredGPUHours
			}
			tol := 1e-6 * float64(len(rep.Rows)+1)
			tot := rep.Total
			for _, c := range []struct {
				name       string
				total, sum float64
			}{{"gpu_hours", tot.GPUHours, gpu}, {"cost", *tot.Cost, cost}, {"declared", *tot.DeclaredGPUHours, decl},
				{"observed", *tot.ObservedGPUHours, obs}, {"undeclared", *tot.UndeclaredGPUHours, und}} {
				if math.Abs(c.total-c.sum) > tol {
					t.Fatalf("seed %d by %v: total %s %v, Σ rows %v", seed, by, c.name, c.total, c.sum)
				}
			}
		}
	}
}

// Billing bases: a row is declared when nothing of it was observed,
// observed when all of it was, mixed otherwise; a report whose window no
// node report covered has no billing columns at all.
func TestBillingBasis(t *testing.T) {
	k := key("project", "p", "owner", "o")
	gk := key("project", "p", "owner", "o", "model", "T4")
	declared := fakeSource{tasks: []facts.TaskSums{{Key: k, Tasks: 2, Completed: 2}},
		gpus: []facts.GPUSums{{Key: gk, InstanceSeconds: 7200, GPUSeconds: 7200}}}
	cases := []struct {
		name  string
		obs   *facts.Observations
		basis string
		gpu   float64
	}{
		{"no reports", &facts.Observations{}, "", 2},
		{"covered elsewhere", &facts.Observations{Covered: true}, facts.BasisDeclared, 2},
		{"one of two observed", &facts.Observations{Covered: true, Tasks: []facts.ObservedTask{{Key: k, CountedSeconds: 3600, CoveredSeconds: 3600,
			CoveredDeclared: []facts.GPUSums{{Key: gk, InstanceSeconds: 3600, GPUSeconds: 3600}},
			Observed:        []facts.InstanceUse{{Model: "T4", Seconds: 1800}}}}}, facts.BasisMixed, 1.5},
		{"both observed", &facts.Observations{Covered: true, Tasks: []facts.ObservedTask{
			{Key: k, CountedSeconds: 3600, CoveredSeconds: 3600, CoveredDeclared: []facts.GPUSums{{Key: gk, InstanceSeconds: 3600, GPUSeconds: 3600}},
				Observed: []facts.InstanceUse{{Model: "T4", Seconds: 7200}}},
			{Key: k, CountedSeconds: 3600, CoveredSeconds: 3600, CoveredDeclared: []facts.GPUSums{{Key: gk, InstanceSeconds: 3600, GPUSeconds: 3600}},
				Observed: []facts.InstanceUse{{Model: "T4", Seconds: 3600}}}}}, facts.BasisObserved, 3},
		{"partly covered", &facts.Observations{Covered: true, Tasks: []facts.ObservedTask{
			{Key: k, CountedSeconds: 7200, CoveredSeconds: 3600, CoveredDeclared: []facts.GPUSums{{Key: gk, InstanceSeconds: 3600, GPUSeconds: 3600}},
				Observed: []facts.InstanceUse{{Model: "T4", Seconds: 3600}}}}}, facts.BasisMixed, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := &observingSource{fakeSource: declared, obs: c.obs}
			rep, err := Compute(context.Background(), src, Query{Window: nov})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Observed() != (c.basis != "") || len(rep.Rows) != 1 {
				t.Fatalf("observed %v, rows %+v", rep.Observed(), rep.Rows)
			}
			row := rep.Rows[0]
			if row.BillingBasis != c.basis || row.GPUHours != c.gpu || rep.Total.GPUHours != c.gpu {
				t.Errorf("basis %q gpu_hours %v (total %v), want %q %v", row.BillingBasis, row.GPUHours, rep.Total.GPUHours, c.basis, c.gpu)
			}
			if c.basis == "" && (row.DeclaredGPUHours != nil || row.ObservedGPUHours != nil || row.UndeclaredGPUHours != nil) {
				t.Errorf("billing columns without reports: %+v", row.Figures)
			}
		})
	}
}

// observingRunning is an observingSource that also lists running tasks.
type observingRunning struct {
	observingSource
	running []facts.RunningTask
}

func (o *observingRunning) RunningTasks(context.Context, int64) ([]facts.RunningTask, error) {
	return o.running, nil
}

// A forecast on the observed basis, by hand: on December 31 at 00:00 nlp's
// running task declared 0.01 of a GPU for its 10 hours so far, but its
// node's reports saw it hold the GPU whole: used 10 GPU-hours, and the 24
// hours left at its observed 1 GPU: 34 (at its declared 0.01: 10.24).
func TestForecastObserved(t *testing.T) {
	budgets, err := ParseBudgets(strings.NewReader(`{"budgets": [{"project": "nlp", "monthly_gpu_hours": 100}]}`))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 31, 0, 0, 0, 0, time.UTC)
	k := key("project", "nlp", "owner", "dan")
	gk := key("project", "nlp", "owner", "dan", "model", "T4")
	declared := facts.GPUSums{Key: gk, InstanceSeconds: 36000, GPUSeconds: 360}
	src := &observingRunning{observingSource: observingSource{
		fakeSource: fakeSource{tasks: []facts.TaskSums{{Key: k, Tasks: 1, Open: 1}}, gpus: []facts.GPUSums{declared}},
		obs: &facts.Observations{Covered: true, Tasks: []facts.ObservedTask{{ID: 7, Key: k, CountedSeconds: 36000, CoveredSeconds: 36000,
			CoveredDeclared: []facts.GPUSums{declared}, Observed: []facts.InstanceUse{{Model: "T4", Seconds: 36000}}}}}},
		running: []facts.RunningTask{{ID: 7, Project: "nlp", Owner: "dan", GPUCount: 1, GPUs: []facts.RunningGPU{{Model: "T4", Share: 0.01}}}}}
	r, err := Compute(context.Background(), src, Query{Window: facts.Month(now), Budgets: budgets, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	b := r.Rows[0].Budget
	if b == nil || b.Used != 10 || b.Forecast != 34 {
		t.Errorf("nlp's budget: %+v", b)
	}
}
