package focus

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/report"
)

// fleetSource is a day's tasks and observations, and the tasks of the
// day widened by a report's longest span, as a store lists them.
type fleetSource struct {
	countingSource
	day        facts.Window
	tasks      []facts.TaskUsage
	near       []facts.TaskUsage
	obs        *facts.Observations
	nearReads  int
	otherReads int
}

func (f *fleetSource) ReportTasks(_ context.Context, w facts.Window) ([]facts.TaskUsage, error) {
	switch {
	case w == f.day:
		return f.tasks, nil
	case w.From.Before(f.day.From) && w.To.After(f.day.To):
		f.nearReads++
		return f.near, nil
	}
	f.otherReads++
	return nil, nil
}

func (f *fleetSource) Observations(context.Context, facts.Window) (*facts.Observations, error) {
	return f.obs, nil
}

// chargebackSharing is the sharing as the export took it from
// report.Chargeback's lines (before h-focusperf): the reference the
// sharing read from the day's tasks must equal.
func chargebackSharing(t *testing.T, src report.TaskLister, q report.Query) map[string]*sharing {
	st, err := report.Chargeback(context.Background(), src, q)
	if err != nil {
		t.Fatal(err)
	}
	// Each task line's GPUs counted in by model as the export did (addTask
	// is that code; the chargeback has applied the scope already).
	out := map[string]*sharing{}
	for _, l := range st.Lines {
		if l.Namespace == "" {
			addTask(out, l.TaskUsage, report.Query{})
		}
	}
	return out
}

// TestSharingIsTheChargebacks: on random days (tasks of a few projects,
// owners, labels and GPU kinds, MIG and shares, unlisted GPUs; node
// reports covering the day or not, with use attributed to tasks whose
// counted interval does not meet the day; undeclared use; a team's scope
// or none), the sharing the export reads from the day's tasks is the one
// the chargeback's lines gave, key by key, and the day widened is read
// only when such a task exists.
func TestSharingIsTheChargebacks(t *testing.T) {
	p, err := report.ParsePrices(strings.NewReader(`{"currency":"EUR","models":{"a":1,"b":2}}`))
	if err != nil {
		t.Fatal(err)
	}
	day := facts.Window{From: time.Date(2026, 11, 10, 0, 0, 0, 0, time.UTC), To: time.Date(2026, 11, 11, 0, 0, 0, 0, time.UTC)}
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 38))
		pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
		task := func(id int64) facts.TaskUsage {
			tu := facts.TaskUsage{ID: id, TaskID: fmt.Sprint("t", id), Project: pick("p", "q", "r"), Owner: pick("", "ann", "bob"),
				Start: day.From.Unix() + rng.Int64N(86400), Seconds: rng.Int64N(3) * 1800, Labels: map[string]string{}}
			for _, k := range []string{"team", "Run", "stage"} {
				if rng.IntN(2) == 0 {
					tu.Labels[k] = pick("x", "y")
				}
			}
			for range rng.IntN(3) {
				g := facts.TaskGPU{Model: pick("a", "b", ""), Share: []float64{1, 0.5, 0.25}[rng.IntN(3)]}
				if rng.IntN(4) == 0 {
					g.MIG, g.Profile, g.Share = true, pick("1g.10gb", "3g.40gb"), 3.0/7
				}
				tu.GPUs = append(tu.GPUs, g)
			}
			tu.UnlistedGPUs = rng.Int64N(2)
			return tu
		}
		src := &fleetSource{day: day, obs: &facts.Observations{Covered: rng.IntN(4) != 0}}
		for id := range int64(1 + rng.IntN(8)) {
			src.tasks = append(src.tasks, task(id+1))
		}
		src.near = slices.Clone(src.tasks)
		use := []facts.InstanceUse{{Node: "n1", Model: "a", Seconds: 600, BusySeconds: 300}}
		for _, tu := range src.tasks {
			if rng.IntN(2) == 0 {
				src.obs.Tasks = append(src.obs.Tasks, facts.ObservedTask{ID: tu.ID, Observed: use})
			}
		}
		for id := range int64(rng.IntN(3)) {
			// Attributed use in the day, the counted interval outside it.
			tu := task(100 + id)
			tu.Seconds = 0
			src.near = append(src.near, tu)
			src.obs.Tasks = append(src.obs.Tasks, facts.ObservedTask{ID: tu.ID, Observed: use})
		}
		src.obs.Undeclared = []facts.UndeclaredUse{{Namespace: "team-b", Use: use[0]}}
		q := report.Query{Window: day, By: rowKeys, Prices: p, Namespaces: func(string) (string, bool) { return "q", true }}
		if rng.IntN(2) == 0 {
			q.Scope = func(project, owner string) bool { return project != "r" && owner != "bob" }
		}
		want := chargebackSharing(t, src, q)
		wantNear := src.nearReads
		src.nearReads = 0
		g := &gen{cfg: Config{Source: src, Prices: p}, month: facts.Month(day.From)}
		got, err := g.sharing(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("seed %d: sharing from the tasks differs from the chargeback's:\n got %s\nwant %s", seed, dump(got), dump(want))
		}
		if src.nearReads > wantNear || src.otherReads != 0 {
			t.Errorf("seed %d: the widened day read %d times (the chargeback %d), other windows %d", seed, src.nearReads, wantNear, src.otherReads)
		}
	}
}

func dump(m map[string]*sharing) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(m)) {
		fmt.Fprintf(&b, "\n  %q: %+v", k, *m[k])
	}
	return b.String()
}
