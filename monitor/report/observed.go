package report

import (
	"context"
	"maps"
	"math"
)

// Billing bases (docs/cost.md, "Two bases"): what a task pays is what it
// declared, what its node's reports observed, or both for parts of its
// counted interval.
const (
	BasisDeclared = "declared"
	BasisObserved = "observed"
	BasisMixed    = "mixed"
)

// Observer is what billing from observations needs from a store besides
// Source. A Source that is not an Observer bills every task as declared.
type Observer interface {
	// Observations returns the window's observed use: by attributed task,
	// and undeclared by namespace.
	Observations(ctx context.Context, w Window) (*Observations, error)
}

// Observations are the node reports' use in a report's window.
type Observations struct {
	// Covered says a node report covered some of the window: only then
	// does a report show the billing columns (with no node reports, every
	// report is what it was before them).
	Covered bool
	// Tasks are the tasks users of the reports were attributed to.
	Tasks []ObservedTask
	// Undeclared is the use of users tied to no task, by namespace (the
	// report charges those a --namespace-projects file maps to a project).
	Undeclared []UndeclaredUse
}

// InstanceUse is one user's (or task's) use of GPU instances of one kind
// in the window: Seconds weighted as the ledger weighs them (a MIG
// instance's by slices/total_slices), BusySeconds their busy part, and the
// user's share of the instances' energy.
type InstanceUse struct {
	// Node is the node whose reports observed the use (the report's key
	// node of it, as the ledger keys it).
	Node                string
	Model, Profile      string
	MIG                 bool
	Slices, TotalSlices int64
	Seconds             float64
	BusySeconds         float64
	EnergyJoules        float64
}

// ObservedTask is one attributed task: its keys (every report key but
// model, from its registration), its attributed use, and the declared
// figures of the part of its counted interval in the window its node's
// reports covered (which the observed use replaces).
type ObservedTask struct {
	// ID is the store's key of the task (RunningTask.ID).
	ID     int64
	Key    map[string]string
	Failed bool
	// CountedSeconds is its counted interval's length in the window;
	// CoveredSeconds the part of it its node's reports covered.
	CountedSeconds, CoveredSeconds float64
	// CoveredDeclared are the declared GPU sums of the covered part (keyed
	// with model); CoveredUnlistedSeconds the GPUs counted without being
	// listed × the covered seconds.
	CoveredDeclared        []GPUSums
	CoveredUnlistedSeconds float64
	Observed               []InstanceUse
	// Unattributed are the declared figures it pays where a GPU it
	// declared had use nobody could be tied to (MONITOR.md 20.2), by that
	// use's namespace; BilledUse says which the report bills.
	Unattributed []UndeclaredUse
}

// UndeclaredUse is a user's use tied to no task.
type UndeclaredUse struct {
	Namespace string
	Use       InstanceUse
}

// Basis is the task's billing basis: observed when its node's reports
// covered all of its counted interval in the window (or it has none),
// mixed when they covered part of it.
func (t *ObservedTask) Basis() string {
	if t.CountedSeconds-t.CoveredSeconds > 0.5 {
		return BasisMixed
	}
	return BasisObserved
}

// gpuSums are an instance use as the report's GPU sums: its weighted
// seconds; idle the seconds not busy; a MIG instance's instance-seconds
// its seconds × total_slices / slices (the hours a profile's price is per).
func (u InstanceUse) gpuSums(key map[string]string, failed bool) GPUSums {
	g := GPUSums{Key: key, MIG: u.MIG, Profile: u.Profile, GPUSeconds: u.Seconds,
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
func (g GPUSums) negated() GPUSums {
	return GPUSums{Key: g.Key, MIG: g.MIG, Profile: g.Profile, InstanceSeconds: -g.InstanceSeconds,
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
func observe(obs *Observations, q Query, in func(map[string]string) bool,
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
			if basis == BasisMixed {
				a.bill.mixedTasks++
			} else {
				a.bill.observedTasks++
			}
		}
		for _, g := range t.CoveredDeclared {
			n := g.negated()
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
		for _, u := range t.BilledUse(q.Namespaces) {
			key := maps.Clone(t.Key)
			key["model"] = u.Model
			if u.Node != "" {
				key["node"] = u.Node
			}
			g := u.gpuSums(key, t.Failed)
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
		g := u.Use.gpuSums(key, false)
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
		return BasisDeclared
	case !declared:
		return BasisObserved
	}
	return BasisMixed
}

// billingFigures sets f's billing columns from a.
func (a *acc) billingFigures(f *Figures) {
	d, o, u := hours(a.bill.declaredSec), hours(a.bill.observedSec), hours(a.bill.undeclaredSec)
	f.DeclaredGPUHours, f.ObservedGPUHours, f.UndeclaredGPUHours = &d, &o, &u
	f.BillingBasis = a.basis()
}
