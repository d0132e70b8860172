package books

import (
	"context"

	"slices"
	"strings"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/report"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
)

// Adjust turns a closed month's late tasks into adjustment rows per
// project: each task's part of the month as it is counted now, less the
// part the month counted (none for a late registration; up to its
// last_seen then for a task open at the close), priced by the report's own
// rules (report.Compute over that one task). Tasks whose part did not
// change are left out; rows by project, tasks by task_id.
func Adjust(month string, late []store.LateTask, prices *report.Prices) ([]report.Adjustment, error) {
	w, err := facts.ParseMonth("month", month)
	if err != nil {
		return nil, err
	}
	byProject := map[string]*report.Adjustment{}
	for _, t := range late {
		now, err := part(w, t, countedEnd(t.Start, t.End, t.LastSeen), prices)
		if err != nil {
			return nil, err
		}
		var before report.Figures
		if t.Before {
			if before, err = part(w, t, countedEnd(t.Start, nil, t.BeforeLastSeen), prices); err != nil {
				return nil, err
			}
		}
		hours := round6(now.GPUHours - before.GPUHours)
		var cost *float64
		if prices != nil {
			c := round6(value(now.Cost) - value(before.Cost))
			cost = &c
		}
		if hours == 0 && (cost == nil || *cost == 0) && now.Tasks == before.Tasks {
			continue
		}
		a := byProject[t.Project]
		if a == nil {
			a = &report.Adjustment{AdjustmentOf: month, Project: t.Project}
			if prices != nil {
				zero := 0.0
				a.Cost = &zero
			}
			byProject[t.Project] = a
		}
		change := "seen_after_close"
		switch {
		case t.RegisteredLate:
			change = "late_registration"
		case t.CompletedAfterClose:
			change = "completed_after_close"
		}
		a.GPUHours = round6(a.GPUHours + hours)
		if cost != nil {
			c := round6(*a.Cost + *cost)
			a.Cost = &c
		}
		a.Tasks = append(a.Tasks, report.AdjustedTask{TaskID: t.TaskID, Owner: t.Owner, Change: change, GPUHours: hours, Cost: cost})
	}
	out := make([]report.Adjustment, 0, len(byProject))
	for _, a := range byProject {
		slices.SortFunc(a.Tasks, func(x, y report.AdjustedTask) int {
			if c := strings.Compare(x.TaskID, y.TaskID); c != 0 {
				return c
			}
			return strings.Compare(x.Owner, y.Owner)
		})
		out = append(out, *a)
	}
	slices.SortFunc(out, func(x, y report.Adjustment) int { return strings.Compare(x.Project, y.Project) })
	return out, nil
}

func value(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}

// countedEnd is the report's counted end: the completion's end, else the
// last heartbeat, else the start.
func countedEnd(start int64, end, lastSeen *int64) int64 {
	switch {
	case end != nil:
		return *end
	case lastSeen != nil:
		return *lastSeen
	}
	return start
}

// part is one task's figures in window w when counted up to end, by the
// report's rules (a task without a counted interval counts when it started
// inside the window).
func part(w facts.Window, t store.LateTask, end int64, prices *report.Prices) (report.Figures, error) {
	f, tt := w.From.Unix(), w.To.Unix()
	in := (t.Start >= f && t.Start < tt) || (end > f && t.Start < f)
	if !in {
		return report.Figures{}, nil
	}
	s0, e1 := max(t.Start, f), min(end, tt)
	sec := max(e1-s0, 0)
	key := map[string]string{"project": t.Project, "owner": t.Owner}
	ts := facts.TaskSums{Key: key, Tasks: 1, UnlistedGPUSeconds: t.GPUUnlisted * sec}
	if t.End != nil && end == *t.End {
		ts.Completed = 1
		if t.Failed {
			ts.Failed, ts.FailedUnlistedGPUSeconds = 1, t.GPUUnlisted*sec
		}
	} else {
		ts.Open = 1
	}
	var gpus []facts.GPUSums
	for _, g := range t.GPUs {
		k := map[string]string{"project": t.Project, "owner": t.Owner, "model": g.Model}
		gs := facts.GPUSums{Key: k, MIG: g.MIG, Profile: g.Profile, InstanceSeconds: sec, GPUSeconds: g.Share * float64(sec)}
		if ts.Failed == 1 {
			gs.FailedGPUSeconds = gs.GPUSeconds
		}
		gpus = append(gpus, gs)
	}
	r, err := report.Compute(context.Background(), oneTask{ts, gpus}, report.Query{Window: w, By: []string{"project"}, Prices: prices})
	if err != nil {
		return report.Figures{}, err
	}
	return r.Total, nil
}

// oneTask is a facts.Source of one task's sums.
type oneTask struct {
	t    facts.TaskSums
	gpus []facts.GPUSums
}

func (o oneTask) ReportSums(context.Context, facts.Window, []string, bool) (facts.Sums, error) {
	return facts.Sums{Tasks: []facts.TaskSums{o.t}, GPUs: o.gpus}, nil
}

func (o oneTask) ReportMetric(context.Context, facts.Window, []string, string) ([]facts.MetricSums, error) {
	return nil, nil
}
