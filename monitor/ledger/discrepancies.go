package ledger

import (
	"context"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/access"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
)

// Discrepancies are what the nodes observed that differs from what the
// tasks declared, over a window (docs/cost.md, "Discrepancies").
type Discrepancies struct {
	From  time.Time         `json:"from"`
	To    time.Time         `json:"to"`
	Tasks []TaskDiscrepancy `json:"tasks"`
	// Overcommitted: GPU instances whose declared shares add up to more
	// than 1 at one instant.
	Overcommitted []Overcommit `json:"overcommitted"`
	// Untied: users that declared a task they cannot be tied to.
	Untied []UserFigures `json:"untied_declarations"`
	// Users: the undeclared and unattributed users, largest first.
	Users []UserFigures `json:"users"`
	// GPUConflicts: GPU UUIDs a node reports while another holds them
	// (their entries count nowhere until `node retire`; an admin's only).
	GPUConflicts []store.GPUConflict `json:"gpu_conflicts"`
}

// conflictSource is a Source that keeps GPU UUID conflicts (a *store.Store).
type conflictSource interface {
	GPUConflicts(ctx context.Context) ([]store.GPUConflict, error)
}

// TaskDiscrepancy is a task whose declared and observed GPU-hours differ
// by more than 5 % of the larger and more than 0.01 GPU-hours.
type TaskDiscrepancy struct {
	TaskID      string   `json:"task_id"`
	Project     string   `json:"project"`
	Owner       string   `json:"owner"`
	Node        string   `json:"node"`
	Declared    float64  `json:"declared_gpu_hours"`
	Observed    float64  `json:"observed_gpu_hours"`
	Differences []string `json:"differences"`
	// MoneyAtStake is the declared cost − the billed cost (what the
	// report bills the task; null without prices).
	MoneyAtStake *float64 `json:"money_at_stake"`
}

// Overcommit is one GPU instance whose declared shares exceed 1.
type Overcommit struct {
	UUID          string     `json:"uuid"`
	GPUInstanceID *int64     `json:"gpu_instance_id"`
	Time          time.Time  `json:"time"`
	Share         float64    `json:"share"`
	Tasks         []TaskName `json:"tasks"`
	// ExcessGPUHours are the GPU-hours declared on the instance above 1
	// over the window; MoneyAtStake their declared cost (null without a
	// price).
	ExcessGPUHours float64  `json:"excess_gpu_hours"`
	MoneyAtStake   *float64 `json:"money_at_stake"`
}

// TaskName names a task: one of an overcommit, or the one a user declared.
type TaskName struct {
	TaskID  string `json:"task_id"`
	Project string `json:"project"`
	Owner   string `json:"owner"`
}

// UserFigures is a user of the fleet with its GPU-hours.
type UserFigures struct {
	Node        string    `json:"node"`
	State       string    `json:"state"`
	Project     string    `json:"project"`
	Runtime     string    `json:"runtime"`
	ContainerID string    `json:"container_id"`
	Namespace   string    `json:"namespace"`
	Pod         string    `json:"pod"`
	Container   string    `json:"container"`
	SlurmJob    string    `json:"slurm_job"`
	UID         *int64    `json:"uid"`
	Cgroup      string    `json:"cgroup"`
	Declared    *TaskName `json:"declared"` // the task it declared
	GPUHours    float64   `json:"gpu_hours"`
	// MoneyAtStake is the use's cost at the instance's price (null
	// without a price for it).
	MoneyAtStake *float64 `json:"money_at_stake"`
}

// FindDiscrepancies lists the discrepancies of q's window; q.Scope narrows
// them to the tasks and projects the token sees.
func FindDiscrepancies(ctx context.Context, src Source, q Query) (*Discrepancies, error) {
	scope := q.Scope
	q.Scope, q.By = nil, ByNode
	l, err := Compute(ctx, src, q)
	if err != nil {
		return nil, err
	}
	from, to := q.Window.From.Unix(), q.Window.To.Unix()
	tasks, err := src.DeclaredTasks(ctx, from, to)
	if err != nil {
		return nil, err
	}
	d := &Discrepancies{From: q.Window.From.UTC(), To: q.Window.To.UTC(), Tasks: []TaskDiscrepancy{}, Overcommitted: []Overcommit{},
		Untied: []UserFigures{}, Users: []UserFigures{}}
	now := q.Now.Unix()
	billed, err := billedCosts(ctx, src, q)
	if err != nil {
		return nil, err
	}
	for _, t := range tasks {
		if !scope.Allows(t.Project, t.Owner) {
			continue
		}
		end := now
		if t.End != nil {
			end = *t.End
		}
		span := float64(max(0, min(end, to)-max(t.Start, from))) / 3600
		gpus := float64(t.Unlisted)
		cost, priced := 0.0, q.Prices != nil
		for _, g := range t.GPUs {
			gpus += g.Share
			p, ok := gpuPrice(q.Prices, g.Model)
			cost += g.Share * span * p
			priced = priced && ok
		}
		priced = priced && t.Unlisted == 0
		declared := gpus * span
		o := l.observed[t.Key]
		node := t.K8sNode
		if node == "" {
			node = t.Hostname
		}
		observed := 0.0
		var diffs []string
		switch {
		case o != nil:
			node, observed = o.node, o.hours
			if !sameSet(t.GPUs, o.uuids) {
				diffs = append(diffs, "GPU set")
			}
		case l.covered[node] && span > 0 && gpus > 0:
			// Only a task that declared GPUs can go unobserved (a
			// CPU-only task is no discrepancy).
			diffs = append(diffs, "never observed")
		default:
			continue // not on a node that reports
		}
		big := math.Max(declared, observed)
		if math.Abs(declared-observed) <= 0.05*big || math.Abs(declared-observed) <= 0.01 {
			if len(diffs) == 0 || diffs[0] != "never observed" {
				continue
			}
		}
		if len(diffs) == 0 {
			diffs = append(diffs, "share or duration")
		}
		td := TaskDiscrepancy{TaskID: t.TaskID, Project: t.Project, Owner: t.Owner, Node: node,
			Declared: round(declared), Observed: round(observed), Differences: diffs}
		if b, ok := billed[t.Key]; priced && ok {
			v := math.Round((cost-b)*100) / 100
			td.MoneyAtStake = &v
		} else if priced && declared > 0 {
			// Without the report's bill: at the declared GPUs' mean price
			// per GPU-hour, against what was observed.
			v := math.Round((cost-observed*cost/declared)*100) / 100
			td.MoneyAtStake = &v
		}
		d.Tasks = append(d.Tasks, td)
	}
	// The money at stake first (finance reads the largest), then the
	// GPU-hours where no prices are loaded.
	sort.Slice(d.Tasks, func(i, j int) bool {
		a, b := d.Tasks[i], d.Tasks[j]
		if ma, mb := stake(a), stake(b); ma != mb {
			return ma > mb
		}
		if da, db := math.Abs(a.Declared-a.Observed), math.Abs(b.Declared-b.Observed); da != db {
			return da > db
		}
		return a.TaskID+a.Project < b.TaskID+b.Project
	})
	if d.Overcommitted, err = overcommits(ctx, src, q.Window, scope); err != nil {
		return nil, err
	}
	xs := excessShares(tasks, from, to, now, q.Prices)
	for i := range d.Overcommitted {
		d.Overcommitted[i].stakeOf(xs, q.Prices != nil)
	}
	// Sorted as the tasks: the money at stake, then the excess GPU-hours.
	sort.SliceStable(d.Overcommitted, func(i, j int) bool {
		a, b := d.Overcommitted[i], d.Overcommitted[j]
		if ma, mb := money(a.MoneyAtStake), money(b.MoneyAtStake); ma != mb {
			return ma > mb
		}
		return a.ExcessGPUHours > b.ExcessGPUHours
	})
	for _, u := range l.Users {
		f := userFigures(u)
		visible := scope == nil || (u.State == Undeclared && (&access.Scope{Projects: scope.Projects}).Allows(u.Project, ""))
		if u.User.Declared {
			if scope == nil || (&access.Scope{Projects: scope.Projects}).Allows(u.User.DeclaredProject, "") {
				d.Untied = append(d.Untied, f)
			}
		}
		if visible {
			d.Users = append(d.Users, f)
		}
	}
	// The users as the tasks: the money at stake first, then GPU-hours.
	sort.SliceStable(d.Users, func(i, j int) bool {
		a, b := d.Users[i], d.Users[j]
		if ma, mb := money(a.MoneyAtStake), money(b.MoneyAtStake); ma != mb {
			return ma > mb
		}
		return a.GPUHours > b.GPUHours
	})
	d.GPUConflicts = []store.GPUConflict{}
	if c, ok := src.(conflictSource); ok && scope == nil {
		list, err := c.GPUConflicts(ctx)
		if err != nil {
			return nil, err
		}
		d.GPUConflicts = append(d.GPUConflicts, list...)
	}
	return d, nil
}

// stake is a discrepancy's money at stake by size (0 without prices).
func stake(t TaskDiscrepancy) float64 { return money(t.MoneyAtStake) }

// money is an amount at stake by size (0 when not priced).
func money(v *float64) float64 {
	if v == nil {
		return 0
	}
	return math.Abs(*v)
}

func userFigures(u UserUse) UserFigures {
	f := UserFigures{Node: u.Node, State: u.State, Project: u.Project, Runtime: u.User.Runtime, ContainerID: u.User.ContainerID,
		Namespace: u.User.Namespace, Pod: u.User.Pod, Container: u.User.Container, SlurmJob: u.User.SlurmJob, UID: u.User.UID,
		Cgroup: u.User.Cgroup, GPUHours: round(u.GPUHours)}
	if !u.Unpriced && u.Cost > 0 {
		v := math.Round(u.Cost*100) / 100
		f.MoneyAtStake = &v
	}
	if u.User.Declared {
		f.Declared = &TaskName{TaskID: u.User.DeclaredTaskID, Project: u.User.DeclaredProject, Owner: u.User.DeclaredOwner}
	}
	return f
}

func sameSet(gpus []store.DeclaredGPU, seen map[string]bool) bool {
	declared := map[string]bool{}
	for _, g := range gpus {
		declared[g.UUID] = true
	}
	if len(declared) != len(seen) {
		return false
	}
	for u := range seen {
		if !declared[u] {
			return false
		}
	}
	return true
}

// overcommits finds, per GPU instance, the first instant in the window at
// which the declared shares of the claims on it add up to more than 1
// (store.ShareOverlaps: each claim from its task's start to the earlier of
// its claim's end and its task's counted end), listed when scope sees one
// of its tasks.
func overcommits(ctx context.Context, src Source, w facts.Window, scope *access.Scope) ([]Overcommit, error) {
	overlaps, err := src.ShareOverlaps(ctx, w)
	if err != nil {
		return nil, err
	}
	out := []Overcommit{}
	type ik struct {
		uuid string
		gi   int64
	}
	listed := map[ik]bool{}
	for _, ov := range overlaps { // by UUID, instance and time
		k := ik{ov.UUID, -1}
		if ov.GPUInstanceID != nil {
			k.gi = *ov.GPUInstanceID
		}
		if listed[k] {
			continue
		}
		o := Overcommit{UUID: ov.UUID, GPUInstanceID: ov.GPUInstanceID, Time: time.Unix(ov.At, 0).UTC(), Share: round(ov.Total)}
		mine := false
		for _, t := range ov.Tasks {
			o.Tasks = append(o.Tasks, TaskName{t.TaskID, t.Project, t.Owner})
			mine = mine || scope.Allows(t.Project, t.Owner)
		}
		sort.Slice(o.Tasks, func(i, j int) bool { return fmt.Sprint(o.Tasks[i]) < fmt.Sprint(o.Tasks[j]) })
		if mine {
			listed[k] = true
			out = append(out, o)
		}
	}
	return out, nil
}
