package focus

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/books"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/report"
)

// corrections are the month's adjustments (late data of the closed months
// before it, as the books count them: books.Report's Adjustments) as rows
// with ChargeClass "Correction", one per (corrected day, project, owner)
// (MONITOR.md 20.17): their charge period is the day of the closed month
// they correct, their billing period the month that carries them, their
// InvoiceId the carrying month's. A task's change is put on the days of
// the part of its counted interval that changed (days): a late
// registration's whole interval, the end a later completion or heartbeat
// added.
func (g *gen) corrections(ctx context.Context) ([]Row, error) {
	if g.cfg.Books == nil {
		return nil, nil
	}
	// The report's own inputs (the namespace mapping too): the
	// corrections are the adjustments the report of the month lists,
	// read without the report's rows.
	q := report.Query{Window: g.month, By: []string{"project"}, Prices: g.cfg.Prices}
	if g.cfg.Namespaces != nil {
		q.Namespaces = g.cfg.Namespaces.Project
	}
	if g.scope != nil {
		q.Scope = g.scope.Allows
	}
	adjustments, err := books.ReportAdjustments(ctx, g.cfg.Books, q)
	if err != nil {
		return nil, err
	}
	type key struct {
		day   int64
		owner string
	}
	type sum struct {
		hours, cost float64
		changes     map[string]bool
	}
	var out []Row
	listed := map[string]map[string]*facts.TaskUsage{} // by corrected month, then project, owner and task_id
	for _, a := range adjustments {
		of, err := facts.ParseMonth("adjustment_of", a.AdjustmentOf)
		if err != nil {
			return nil, err
		}
		if listed[a.AdjustmentOf] == nil {
			if listed[a.AdjustmentOf], err = g.tasksOf(ctx, of); err != nil {
				return nil, err
			}
		}
		by := map[key]*sum{}
		for _, t := range a.Tasks {
			cost := 0.0
			if t.Cost != nil {
				cost = *t.Cost
			}
			for _, d := range days(of, t, listed[a.AdjustmentOf][a.Project+"\x00"+t.Owner+"\x00"+t.TaskID]) {
				k := key{d.day, t.Owner}
				s := by[k]
				if s == nil {
					s = &sum{changes: map[string]bool{}}
					by[k] = s
				}
				s.hours += t.GPUHours * d.part
				s.cost += cost * d.part
				s.changes[t.Change] = true
			}
		}
		keys := slices.SortedFunc(maps.Keys(by), func(x, y key) int {
			if x.day != y.day {
				return int(x.day - y.day)
			}
			return strings.Compare(x.owner, y.owner)
		})
		for _, k := range keys {
			s := by[k]
			day := time.Unix(k.day, 0).UTC()
			r := g.base(facts.Window{From: day, To: day.AddDate(0, 0, 1)}, "")
			r.ChargeClass = "Correction"
			r.BilledCost = round6(s.cost)
			hours := round6(s.hours)
			r.ConsumedQuantity, r.PricingQuantity = &hours, &hours
			r.PricingUnit = UnitGPUHours
			r.SubAccountID, r.SubAccountName, r.owner = a.Project, a.Project, k.owner
			r.BillingBasis = facts.BasisDeclared
			if len(s.changes) == 1 && s.changes[books.ReasonObservedAfterClose] {
				// Node reports stored after the close: priced observed.
				r.BillingBasis = facts.BasisObserved
			}
			r.Tags = map[string]string{}
			if k.owner != "" {
				r.Tags["paddle/owner"] = k.owner
			}
			r.ChargeDescription = fmt.Sprintf("GPU time, late data of %s (%s)", a.AdjustmentOf, strings.Join(slices.Sorted(maps.Keys(s.changes)), ", "))
			out = append(out, r)
		}
	}
	return out, nil
}

// tasksOf are the tasks of a corrected month as they are counted now, by
// project, owner and task_id.
func (g *gen) tasksOf(ctx context.Context, of facts.Window) (map[string]*facts.TaskUsage, error) {
	tasks, err := g.cfg.Source.ReportTasks(ctx, of)
	if err != nil {
		return nil, err
	}
	out := map[string]*facts.TaskUsage{}
	for i := range tasks {
		t := &tasks[i]
		out[t.Project+"\x00"+t.Owner+"\x00"+t.TaskID] = t
	}
	return out, nil
}

// dayPart is a part of a correction on one UTC day (its start, Unix).
type dayPart struct {
	day  int64
	part float64
}

// days are the UTC days of the closed month of a task's change and the
// part of the change on each: the last GPU-hours ÷ GPUs of its counted
// interval in the month as it is counted now (u; all of it for a late
// registration), split by seconds. A change that names no task (node
// reports stored after the close), of a task no longer listed, or not an
// increase of a task's time, goes on the day its counted interval ends,
// else on the month's last day.
func days(of facts.Window, t report.AdjustedTask, u *facts.TaskUsage) []dayPart {
	last := dayPart{day: of.To.Unix() - 86400, part: 1}
	if u == nil {
		return []dayPart{last}
	}
	s0 := max(u.Start, of.From.Unix())
	e := s0 + u.Seconds
	if e > s0 {
		last.day = (e - 1) - (e-1)%86400
	}
	gpus := float64(u.UnlistedGPUs)
	for _, g := range u.GPUs {
		gpus += g.Share
	}
	if e <= s0 || gpus <= 0 || t.GPUHours <= 0 {
		return []dayPart{last}
	}
	a := max(s0, e-int64(math.Round(t.GPUHours*3600/gpus)))
	if a >= e {
		return []dayPart{last}
	}
	var out []dayPart
	for x := a; x < e; {
		day := x - x%86400
		y := min(e, day+86400)
		out = append(out, dayPart{day: day, part: float64(y-x) / float64(e-a)})
		x = y
	}
	return out
}
