// Package ledger accounts for every GPU-hour of the fleet from the node
// reports (docs/cost.md, "The ledger"): per (node, GPU) its capacity over
// a window, and that capacity split into five states — attributed (to a
// registered task), undeclared (charged to a project by namespace),
// unattributed, unallocated and unobserved — with their costs.
//
// Guarantees: on every node and model row and the total, capacity equals
// the sum of the five states within 1e-6 of capacity, and check_gpu_hours
// says by how much it does not (the states are computed independently of
// capacity: unobserved from the lives and the covered seconds, the others
// from the instances' weights). The same store data gives the same
// answer, from the roll-ups or from the raw reports. A ledger is its
// facts (Facts: GPU-hours, cost and capacity at the finest key any
// grouping needs) grouped by one function (Group) for the query's key
// and scope, live or from a closed month's frozen facts alike, so both
// add the same numbers in the same order and give the same bytes.
package ledger

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/access"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/report"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
)

// The states, in the order they are shown.
const (
	Attributed   = "attributed"
	Undeclared   = "undeclared"
	Unattributed = "unattributed"
	Unallocated  = "unallocated"
	Unobserved   = "unobserved"
)

// States lists the five states in order.
var States = []string{Attributed, Undeclared, Unattributed, Unallocated, Unobserved}

// The keys a ledger groups by.
const (
	ByNode      = "node"
	ByModel     = "model"
	ByProject   = "project"
	ByNamespace = "namespace"
	ByState     = "state"
)

// Split rules of an instance's occupied time among its users.
const (
	SplitEqual = "equal"
	SplitUtil  = "util"
)

// ErrBadQuery classifies every error about a ledger's parameters.
var ErrBadQuery = errors.New("bad ledger query")

// Source is what a ledger is computed from (a *store.Store).
type Source interface {
	LedgerData(ctx context.Context, from, to, retire int64) (*store.LedgerData, error)
	LedgerDataRaw(ctx context.Context, from, to, retire int64) (*store.LedgerData, error)
	TieCandidates(ctx context.Context, node string, u *store.UserIdentity) ([]store.Tie, error)
	LedgerTies(ctx context.Context, users []store.UserHour) (map[string][]store.Tie, error)
	LedgerUserHours(ctx context.Context, from, to int64, u *store.UserHour) ([]store.UserHour, error)
	DeclaredTasks(ctx context.Context, from, to int64) ([]store.DeclaredTask, error)
	ShareOverlaps(ctx context.Context, w facts.Window) ([]store.ShareOverlap, error)
}

// Query says which ledger to compute.
type Query struct {
	Window facts.Window
	By     string
	Split  string
	Prices *report.Prices
	// Namespaces charges undeclared use to projects (nil: none is).
	Namespaces *NamespaceProjects
	// Scope narrows to its projects' attributed and undeclared use (nil:
	// everything, an admin).
	Scope *access.Scope
	// Retire is --node-retire; Now the clock (store's defaults when zero).
	Retire time.Duration
	Now    time.Time
	// Raw computes from the raw reports instead of the roll-ups.
	Raw bool
}

// Check returns the query's problem, naming the parameter.
func (q *Query) Check() error {
	switch q.By {
	case ByNode, ByModel, ByProject, ByNamespace, ByState:
	default:
		return fmt.Errorf("%w: by %q: must be node, model, project, namespace or state", ErrBadQuery, q.By)
	}
	switch q.Split {
	case SplitEqual, SplitUtil:
	default:
		return fmt.Errorf("%w: split %q: must be equal or util", ErrBadQuery, q.Split)
	}
	if err := q.Window.Check(); err != nil {
		return err
	}
	return nil
}

// Figures are one row's (or the total's) GPU-hours and costs.
type Figures struct {
	// Capacity and Check are nil on rows of other keys than node and
	// model, and for a team (it sees its own use only).
	Capacity *float64
	States   [5]float64 // in the order of States
	Check    *float64
	// Costs by state (nil without prices, or when a part had no price);
	// CapacityCost is their sum.
	CapacityCost *float64
	StateCosts   [5]*float64

	costs   [5]float64
	unknown [5]bool
	priced  bool
}

// Row is one key's figures.
type Row struct {
	Key string
	Figures
}

// Ledger is the answer.
type Ledger struct {
	From, To time.Time
	By       string
	Split    string
	Currency string
	Rows     []Row
	Total    Figures
	// Users are the undeclared and unattributed users with their
	// GPU-hours, and the declarations that could not be tied (for
	// discrepancies).
	Users []UserUse

	// observed: each attributed task's use (by tasks.id); covered: the
	// nodes whose reports covered some of the window.
	observed map[int64]*observedTask
	covered  map[string]bool
}

type observedTask struct {
	node  string
	hours float64
	uuids map[string]bool
}

// UserUse is one user's use of the fleet over the window, as a
// discrepancy lists it.
type UserUse struct {
	Node     string
	User     store.UserIdentity
	State    string // undeclared or unattributed
	Project  string // the namespace's project, for undeclared use
	GPUHours float64
	// Cost is GPUHours at the instance's price; Unpriced when a part of
	// it has no price (discrepancies' money at stake, MONITOR.md 20.22).
	Cost     float64
	Unpriced bool

	// order is Node and User's key concatenated, sortedUsers' order after
	// GPUHours, built once per user as it is counted.
	order string
}

func ptr(v float64) *float64 { return &v }

// acc collects figures by key (group).
type acc struct {
	rows  map[string]*Figures
	total Figures
}

func (a *acc) row(key string) *Figures {
	f := a.rows[key]
	if f == nil {
		f = &Figures{}
		a.rows[key] = f
	}
	return f
}

// add counts h GPU-hours of state under key, with their cost (unknown: a
// part of them had no price).
func (a *acc) add(key string, state int, h, cost float64, unknown bool) {
	for _, f := range []*Figures{a.row(key), &a.total} {
		f.States[state] += h
		f.costs[state] += cost
		if unknown {
			f.unknown[state] = true
		}
	}
}

// stateRows are the rows of --by state: one per state.
func stateRows(total *Figures) []Row {
	rows := make([]Row, len(States))
	for i, s := range States {
		rows[i].Key = s
		rows[i].States[i] = total.States[i]
		rows[i].costs[i] = total.costs[i]
		rows[i].unknown[i] = total.unknown[i]
	}
	return rows
}

// finish sets the check and the costs; withCapacity keeps capacity and the
// check, else both are nil.
func finish(f *Figures, priced, withCapacity bool) {
	if !withCapacity {
		f.Capacity, f.Check = nil, nil
	} else {
		if f.Capacity == nil {
			f.Capacity = ptr(0)
		}
		sum := 0.0
		for _, v := range f.States {
			sum += v
		}
		f.Check = ptr(*f.Capacity - sum)
	}
	f.priced = priced
	if !priced {
		return
	}
	total, known := 0.0, true
	for i := range f.StateCosts {
		if f.unknown[i] {
			known = false
			continue
		}
		f.StateCosts[i] = ptr(f.costs[i])
		total += f.costs[i]
	}
	if known {
		f.CapacityCost = ptr(total)
	}
}

// keyOf is the row a part of a state counts in.
func keyOf(by, node, model, project, namespace, state string) string {
	switch by {
	case ByNode:
		return node
	case ByModel:
		return model
	case ByProject:
		return project
	case ByNamespace:
		return namespace
	}
	return state
}

// latest is the registration of cands (oldest first) that started last by
// at, or nil.
func latest(cands []store.Tie, at int64) *store.Tie {
	var t *store.Tie
	for i := range cands {
		if cands[i].StartTime <= at {
			t = &cands[i]
		}
	}
	return t
}

// union sorts l and merges its overlapping and adjacent intervals.
func union(l [][2]int64) [][2]int64 {
	slices.SortFunc(l, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
	var out [][2]int64
	for _, iv := range l {
		if iv[1] <= iv[0] {
			continue
		}
		if n := len(out); n > 0 && iv[0] <= out[n-1][1] {
			out[n-1][1] = max(out[n-1][1], iv[1])
			continue
		}
		out = append(out, iv)
	}
	return out
}
