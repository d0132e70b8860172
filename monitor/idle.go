package monitor

import (
	"math"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/report"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
)

// DefaultIdleFor is how long a task must have been idle to be listed by
// GET /v1/tasks?state=idle without idle_for (and on the page's "Idle now").
const DefaultIdleFor = 30 * time.Minute

// idleTask is a task of GET /v1/tasks?state=idle: the task, and what it
// has cost since its start (null without prices).
type idleTask struct {
	store.Task
	CostSoFar *float64 `json:"cost_so_far"`
}

// idleList is the answer of GET /v1/tasks?state=idle.
type idleList struct {
	Tasks      []idleTask `json:"tasks"`
	NextCursor *string    `json:"next_cursor"`
}

func idleTasks(tasks []store.Task, p *report.Prices) []idleTask {
	out := make([]idleTask, len(tasks))
	for i, t := range tasks {
		out[i] = idleTask{Task: t, CostSoFar: costSoFar(p, t)}
	}
	return out
}

// costSoFar is what an open task has cost from its start to its last
// heartbeat: each listed GPU at its model's price × share (a MIG instance
// at its profile's price when the prices have one), GPUs counted but not
// listed at the default price; nil without prices. Rounded like the
// report's cost.
func costSoFar(p *report.Prices, t store.Task) *float64 {
	if p == nil {
		return nil
	}
	end := t.StartTime
	if t.LastSeen != nil && *t.LastSeen > end {
		end = *t.LastSeen
	}
	var perHour float64
	for _, g := range t.GPUs {
		profile := ""
		if g.MIG != nil {
			profile = g.MIG.Profile
		}
		price, _ := p.EntryPrice(g.Name, profile, g.MIG != nil, g.Share)
		perHour += price
	}
	if n := t.GPUCount - int64(len(t.GPUs)); n > 0 {
		price, _ := p.Price("")
		perHour += price * float64(n)
	}
	c := math.Round(perHour*float64(end-t.StartTime)/3600*1e6) / 1e6
	return &c
}
