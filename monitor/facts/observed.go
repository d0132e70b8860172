package facts

// Billing bases (docs/cost.md, "Two bases"): what a task pays is what it
// declared, what its node's reports observed, or both for parts of its
// counted interval.
const (
	BasisDeclared = "declared"
	BasisObserved = "observed"
	BasisMixed    = "mixed"
)

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
	// use's namespace; the report bills those no namespace mapping maps.
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
