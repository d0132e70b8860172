package books

import (
	"context"
	"math"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/report"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
)

// A scoped reader's part of a statement's report: its rows, a total
// summed from them, and its adjustments.

// scoped keeps the rows a scoped reader may see and the adjustments of
// its projects and owners; the total is then the sum of those rows'
// additive figures (shares and means, which the rows cannot add up to,
// are null), its billing basis the rows' together.
func scoped(r *report.Report, allows func(project, owner string) bool) *report.Report {
	out := *r
	out.Rows = nil
	out.Total = report.Figures{}
	priced := r.Currency != nil
	t := &out.Total
	if priced {
		t.Cost, t.UnpricedGPUHours = new(float64), new(float64)
	}
	var observed, declared bool
	for _, row := range r.Rows {
		if !allows(row.Key["project"], row.Key["owner"]) {
			continue
		}
		out.Rows = append(out.Rows, row)
		f := row.Figures
		t.Tasks += f.Tasks
		t.CompletedTasks += f.CompletedTasks
		t.FailedTasks += f.FailedTasks
		t.GateFailedTasks += f.GateFailedTasks
		t.OpenTasks += f.OpenTasks
		t.GPUHours = round6(t.GPUHours + f.GPUHours)
		t.FailedGPUHours = round6(t.FailedGPUHours + f.FailedGPUHours)
		t.IdleGPUHours = round6(t.IdleGPUHours + f.IdleGPUHours)
		t.DurationEstHours = round6(t.DurationEstHours + f.DurationEstHours)
		t.DurationActualHours = round6(t.DurationActualHours + f.DurationActualHours)
		if priced {
			t.Cost = addRounded(t.Cost, f.Cost)
			t.UnpricedGPUHours = addRounded(t.UnpricedGPUHours, f.UnpricedGPUHours)
		}
		t.EnergyKWh = addRounded(t.EnergyKWh, f.EnergyKWh)
		t.EnergyCost = addRounded(t.EnergyCost, f.EnergyCost)
		t.CO2Kg = addRounded(t.CO2Kg, f.CO2Kg)
		// The billing columns are there when a node report covered some
		// of the window: in every row then, and in the total.
		t.DeclaredGPUHours = addRounded(t.DeclaredGPUHours, f.DeclaredGPUHours)
		t.ObservedGPUHours = addRounded(t.ObservedGPUHours, f.ObservedGPUHours)
		t.UndeclaredGPUHours = addRounded(t.UndeclaredGPUHours, f.UndeclaredGPUHours)
		observed = observed || f.BillingBasis == facts.BasisObserved || f.BillingBasis == facts.BasisMixed
		declared = declared || f.BillingBasis == facts.BasisDeclared || f.BillingBasis == facts.BasisMixed
	}
	if r.Total.BillingBasis != "" {
		switch {
		case !observed:
			t.BillingBasis = facts.BasisDeclared
		case !declared:
			t.BillingBasis = facts.BasisObserved
		default:
			t.BillingBasis = facts.BasisMixed
		}
		zero := 0.0
		for _, p := range []**float64{&t.DeclaredGPUHours, &t.ObservedGPUHours, &t.UndeclaredGPUHours} {
			if *p == nil {
				*p = &zero
			}
		}
	}
	if out.Rows == nil {
		out.Rows = []report.Row{}
	}
	out.Adjustments = scopedAdjustments(r.Adjustments, allows, priced)
	return &out
}

// addRounded is sum + x rounded to 1e-6, or sum where x is null (null
// while every x was).
func addRounded(sum, x *float64) *float64 {
	if x == nil {
		return sum
	}
	v := *x
	if sum != nil {
		v += *sum
	}
	v = round6(v)
	return &v
}

func round6(x float64) float64 { return math.Round(x*1e6) / 1e6 }

// scopedAdjustments keeps the adjusted tasks a scoped reader may see, and
// sums each project's again over them.
func scopedAdjustments(all []report.Adjustment, allows func(project, owner string) bool, priced bool) []report.Adjustment {
	var out []report.Adjustment
	for _, a := range all {
		b := report.Adjustment{AdjustmentOf: a.AdjustmentOf, Project: a.Project}
		if priced {
			zero := 0.0
			b.Cost = &zero
		}
		for _, t := range a.Tasks {
			if !allows(a.Project, t.Owner) {
				continue
			}
			b.Tasks = append(b.Tasks, t)
			b.GPUHours = round6(b.GPUHours + t.GPUHours)
			if priced && t.Cost != nil {
				c := round6(*b.Cost + *t.Cost)
				b.Cost = &c
			}
		}
		if len(b.Tasks) > 0 {
			out = append(out, b)
		}
	}
	return out
}

// forReader is adj as q's reader may see it: its scope's part, all of it
// without a scope.
func forReader(adj []report.Adjustment, q report.Query) []report.Adjustment {
	if q.Scope == nil {
		return adj
	}
	return scopedAdjustments(adj, q.Scope, q.Prices != nil)
}

// carried are the adjustments closed month c's statement carries (late
// data of earlier months it counted), as q's reader may see them.
func carried(ctx context.Context, st Store, c *store.Closed, q report.Query) ([]report.Adjustment, error) {
	s, err := stored(ctx, st, c.Month, c.Version)
	if err != nil {
		return nil, err
	}
	return forReader(s.Adjustments, q), nil
}
