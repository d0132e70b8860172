package books

import (
	"context"
	"math"
	"slices"
	"strings"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/report"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
)

// ReasonObservedAfterClose is the change of an adjustment row made by
// node reports stored after its month closed (MONITOR.md 20.13).
const ReasonObservedAfterClose = "observed_after_close"

// adjustTolerance is the GPU-hours (and money) below which a live row and
// its frozen row are the same: each side is rounded to 1e-6 per row.
const adjustTolerance = 5e-6

// frozenRow is a (project, owner) row of a closed month as the books
// already counted it: its statement's row plus every adjustment of it
// later statements carried.
type frozenRow struct {
	project, owner string
	hours, cost    float64
}

// observedAfterClose is the rest of closed month e's late data once its
// late tasks (pending, priced by Adjust) are counted: per (project, owner)
// row, the billed figures as the month is computed now less what its
// statement froze, less what later statements (carried: their
// adjustments of e) and pending already count. It is what node reports
// stored after the close changed — priced on the observed basis by the
// report's own rules — and is added to pending's rows, one adjusted line
// per owner with change observed_after_close. A month reaching days
// retention trimmed has no live figures to compare and gets none.
func observedAfterClose(ctx context.Context, st Store, src facts.Source, e store.Closed, pending, carried []report.Adjustment, q report.Query) ([]report.Adjustment, error) {
	w, err := facts.ParseMonth("month", e.Month)
	if err != nil {
		return nil, err
	}
	trimmed, err := st.TrimmedBefore(ctx)
	if err != nil {
		return nil, err
	}
	if !trimmed.IsZero() && trimmed.After(w.From) {
		return pending, nil
	}
	s, err := stored(ctx, st, e.Month, e.Version)
	if err != nil {
		return nil, err
	}
	if s.ByProjectOwner == nil {
		return pending, nil
	}
	live, err := report.Compute(ctx, src, report.Query{Window: w, By: []string{"project", "owner"}, Prices: q.Prices,
		Namespaces: q.Namespaces, Now: q.Now})
	if err != nil {
		return nil, err
	}
	counted := map[[2]string]*frozenRow{}
	row := func(project, owner string) *frozenRow {
		k := [2]string{project, owner}
		if counted[k] == nil {
			counted[k] = &frozenRow{project: project, owner: owner}
		}
		return counted[k]
	}
	for _, r := range s.ByProjectOwner.Rows {
		f := row(r.Key["project"], r.Key["owner"])
		f.hours, f.cost = f.hours+r.GPUHours, f.cost+value(r.Cost)
	}
	for _, set := range [][]report.Adjustment{carried, pending} {
		for _, a := range set {
			for _, t := range a.Tasks {
				f := row(a.Project, t.Owner)
				f.hours, f.cost = f.hours+t.GPUHours, f.cost+value(t.Cost)
			}
		}
	}
	for _, r := range live.Rows {
		f := row(r.Key["project"], r.Key["owner"])
		f.hours, f.cost = f.hours-r.GPUHours, f.cost-value(r.Cost)
	}
	byProject := map[string]*report.Adjustment{}
	var order []string
	for i := range pending {
		a := pending[i]
		a.Tasks = slices.Clone(a.Tasks)
		byProject[a.Project] = &a
		order = append(order, a.Project)
	}
	keys := make([][2]string, 0, len(counted))
	for k := range counted {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(x, y [2]string) int {
		if c := strings.Compare(x[0], y[0]); c != 0 {
			return c
		}
		return strings.Compare(x[1], y[1])
	})
	for _, k := range keys {
		f := counted[k]
		// counted holds what the books count less what is billed now.
		hours, cost := round6(-f.hours), round6(-f.cost)
		if math.Abs(hours) < adjustTolerance && (q.Prices == nil || math.Abs(cost) < adjustTolerance) {
			continue
		}
		a := byProject[f.project]
		if a == nil {
			a = &report.Adjustment{AdjustmentOf: e.Month, Project: f.project}
			if q.Prices != nil {
				zero := 0.0
				a.Cost = &zero
			}
			byProject[f.project] = a
			order = append(order, f.project)
		}
		line := report.AdjustedTask{Owner: f.owner, Change: ReasonObservedAfterClose, GPUHours: hours}
		a.GPUHours = round6(a.GPUHours + hours)
		if q.Prices != nil {
			c := cost
			line.Cost = &c
			sum := round6(value(a.Cost) + cost)
			a.Cost = &sum
		}
		a.Tasks = append(a.Tasks, line)
	}
	out := make([]report.Adjustment, 0, len(order))
	for _, p := range order {
		out = append(out, *byProject[p])
	}
	slices.SortFunc(out, func(x, y report.Adjustment) int { return strings.Compare(x.Project, y.Project) })
	return out, nil
}

// carriedOf are the adjustments of month that the statements of later
// closed months (later, newest first) already carry.
func carriedOf(ctx context.Context, st Store, month string, later []store.Closed) ([]report.Adjustment, error) {
	var out []report.Adjustment
	for _, l := range later {
		s, err := stored(ctx, st, l.Month, l.Version)
		if err != nil {
			return nil, err
		}
		for _, a := range s.Adjustments {
			if a.AdjustmentOf == month {
				out = append(out, a)
			}
		}
	}
	return out, nil
}

// lateData is every adjustment month w carries of the closed months just
// before it (earlier, newest first): each one's late tasks (late) and what
// node reports stored after its close changed.
func lateData(ctx context.Context, st Store, src facts.Source, earlier []store.Closed, late func(store.Closed) ([]store.LateTask, error), q report.Query) ([]report.Adjustment, error) {
	var out []report.Adjustment
	for i, e := range earlier {
		tasks, err := late(e)
		if err != nil {
			return nil, err
		}
		pending, err := Adjust(e.Month, tasks, q.Prices)
		if err != nil {
			return nil, err
		}
		carried, err := carriedOf(ctx, st, e.Month, earlier[:i])
		if err != nil {
			return nil, err
		}
		adj, err := observedAfterClose(ctx, st, src, e, pending, carried, q)
		if err != nil {
			return nil, err
		}
		out = append(out, adj...)
	}
	return out, nil
}
