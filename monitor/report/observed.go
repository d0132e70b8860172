package report

import (
	"context"
	"maps"
	"math"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
)

// Observer is what billing from observations needs from a store besides
// Source. A Source that is not an Observer bills every task as declared.
type Observer interface {
	// Observations returns the window's observed use: by attributed task,
	// and undeclared by namespace.
	Observations(ctx context.Context, w facts.Window) (*facts.Observations, error)
}

// gpuSumsOf are an instance use as the report's GPU sums: its weighted
// seconds; idle the seconds not busy; a MIG instance's instance-seconds
// its seconds × total_slices / slices (the hours a profile's price is per).
func gpuSumsOf(u facts.InstanceUse, key map[string]string, failed bool) facts.GPUSums {
	g := facts.GPUSums{Key: key, MIG: u.MIG, Profile: u.Profile, GPUSeconds: u.Seconds,
		IdleGPUSeconds: max(u.Seconds-u.BusySeconds, 0), EnergyJoules: u.EnergyJoules}
	g.InstanceSeconds = int64(math.Round(u.Seconds))
	if u.MIG && u.Slices > 0 && u.TotalSlices > 0 {
		g.InstanceSeconds = int64(math.Round(u.Seconds * float64(u.TotalSlices) / float64(u.Slices)))
	}
	if failed {
		g.FailedGPUSeconds = g.GPUSeconds
	} else {
		g.IdleOKGPUSeconds = g.IdleGPUSeconds
	}
	if u.EnergyJoules > 0 {
		g.EnergyGPUs = 1
	}
	return g
}

// negated are g's sums with the opposite sign (its energy GPUs, a count
// of what reported, left out), to take a part away from a row.
func negated(g facts.GPUSums) facts.GPUSums {
	return facts.GPUSums{Key: g.Key, MIG: g.MIG, Profile: g.Profile, InstanceSeconds: -g.InstanceSeconds,
		GPUSeconds: -g.GPUSeconds, FailedGPUSeconds: -g.FailedGPUSeconds, IdleGPUSeconds: -g.IdleGPUSeconds,
		IdleOKGPUSeconds: -g.IdleOKGPUSeconds, UtilWeighted: -g.UtilWeighted, UtilSeconds: -g.UtilSeconds,
		EnergyJoules: -g.EnergyJoules}
}

// billing are a row's billing figures besides the billed ones.
type billing struct {
	declaredSec, observedSec, undeclaredSec float64
	observedTasks, mixedTasks               int64
}

// observe bills obs into the rows: for each attributed task, the declared
// figures of its covered part taken away and its attributed use added in
// the row of its keys (by model, of the instances' model); undeclared use
// a --namespace-projects maps to a project in rows of their own.
func observe(obs *facts.Observations, q Query, in func(map[string]string) bool,
	row func(map[string]string) *acc, total *acc) {
	for _, t := range obs.Tasks {
		if !in(t.Key) {
			continue
		}
		basis := t.Basis()
		seen := map[*acc]bool{}
		count := func(a *acc) {
			if seen[a] {
				return
			}
			seen[a] = true
			if basis == facts.BasisMixed {
				a.bill.mixedTasks++
			} else {
				a.bill.observedTasks++
			}
		}
		for _, g := range t.CoveredDeclared {
			n := negated(g)
			a := row(g.Key)
			a.addGPUs(n, q.Prices)
			// A task attributed nothing on its covered node is on the
			// observed basis all the same (it pays nothing there).
			count(a)
			total.addGPUs(n, q.Prices)
		}
		if t.CoveredUnlistedSeconds > 0 {
			key := maps.Clone(t.Key)
			key["model"] = ""
			failed := 0.0
			if t.Failed {
				failed = t.CoveredUnlistedSeconds
			}
			row(key).addUnlistedSeconds(-t.CoveredUnlistedSeconds, -failed, q.Prices)
			total.addUnlistedSeconds(-t.CoveredUnlistedSeconds, -failed, q.Prices)
		}
		if len(t.Observed) == 0 && len(t.CoveredDeclared) == 0 && t.CoveredUnlistedSeconds == 0 {
			// A task without GPUs on its covered node.
			key := maps.Clone(t.Key)
			key["model"] = ""
			count(row(key))
		}
		for _, u := range billedUse(&t, q.Namespaces) {
			key := maps.Clone(t.Key)
			key["model"] = u.Model
			if u.Node != "" {
				key["node"] = u.Node
			}
			g := gpuSumsOf(u, key, t.Failed)
			a := row(key)
			a.addGPUs(g, q.Prices)
			a.bill.observedSec += u.Seconds
			count(a)
			total.addGPUs(g, q.Prices)
			total.bill.observedSec += u.Seconds
		}
		count(total)
	}
	if q.Namespaces == nil {
		return
	}
	for _, u := range obs.Undeclared {
		project, ok := q.Namespaces(u.Namespace)
		if !ok || (q.Scope != nil && !q.Scope(project, "")) {
			continue
		}
		key := map[string]string{"project": project, "model": u.Use.Model, "node": u.Use.Node}
		g := gpuSumsOf(u.Use, key, false)
		a := row(key)
		a.addGPUs(g, q.Prices)
		a.bill.undeclaredSec += u.Use.Seconds
		total.addGPUs(g, q.Prices)
		total.bill.undeclaredSec += u.Use.Seconds
	}
}

// basis is the row's billing basis: declared when nothing of it was
// observed, observed when all of it was (its tasks' counted intervals
// covered, or undeclared use), mixed otherwise.
func (a *acc) basis() string {
	b := a.bill
	observed := b.observedTasks > 0 || b.mixedTasks > 0 || b.undeclaredSec > 0
	declared := b.mixedTasks > 0 || a.t.Tasks > b.observedTasks+b.mixedTasks
	switch {
	case !observed:
		return facts.BasisDeclared
	case !declared:
		return facts.BasisObserved
	}
	return facts.BasisMixed
}

// billingFigures sets f's billing columns from a.
func (a *acc) billingFigures(f *Figures) {
	d, o, u := hours(a.bill.declaredSec), hours(a.bill.observedSec), hours(a.bill.undeclaredSec)
	f.DeclaredGPUHours, f.ObservedGPUHours, f.UndeclaredGPUHours = &d, &o, &u
	f.BillingBasis = a.basis()
}
