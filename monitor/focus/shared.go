package focus

import (
	"context"
	"fmt"
	"strings"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/report"
)

// sharing is what the tasks of one row key (the chargeback's task lines
// of the day) say about its GPUs and labels: no figure, only the tags and
// the split columns.
type sharing struct {
	labels   map[string]string // extra labels every task of the key has, paddle/label/NAME
	mig      bool              // a MIG instance
	shared   bool              // a GPU declared with a share below 1
	shares   map[float64]bool  // the shares the key's GPUs were declared with
	profiles map[string]bool   // the MIG profiles ("" for whole GPUs)
	seen     bool
}

// profile is the one MIG profile of the key's GPUs ("" for whole GPUs,
// several kinds, or none known).
func (s *sharing) profile() string {
	if s == nil || len(s.profiles) != 1 {
		return ""
	}
	for p := range s.profiles {
		return p
	}
	return ""
}

// share is the one share the key's shared GPUs were declared with (nil:
// whole GPUs, or several shares).
func (s *sharing) share() *float64 {
	if !s.shared || len(s.shares) != 1 {
		return nil
	}
	for v := range s.shares {
		return &v
	}
	return nil
}

func shareKey(project, owner, model string) string {
	return project + "\x00" + owner + "\x00" + model
}

// sharing is what the day's tasks say about their GPUs and labels, by
// (project, owner, model key): the tasks the chargeback of the day lists a
// line for (report.Chargeback), read from the day's tasks and
// observations without computing the lines' figures, which no row takes
// from there. Those are the tasks whose counted interval meets the day
// (the day's tasks; q.Scope filters them), and, when node reports cover
// the day, each task with attributed use in the day whose counted
// interval does not meet it (a report whose span began before the task's
// start), looked up as the chargeback looks it up, in the day widened by
// a report's longest span. The chargeback's lines of undeclared use carry
// no task and give nothing here.
func (g *gen) sharing(ctx context.Context, q report.Query) (map[string]*sharing, error) {
	tasks, err := g.cfg.Source.ReportTasks(ctx, q.Window)
	if err != nil {
		return nil, fmt.Errorf("focus: tasks: %w", err)
	}
	out := map[string]*sharing{}
	for _, t := range tasks {
		addTask(out, t, q)
	}
	o, ok := g.cfg.Source.(report.Observer)
	if !ok {
		return out, nil
	}
	obs, err := o.Observations(ctx, q.Window)
	if err != nil {
		return nil, fmt.Errorf("focus: observations: %w", err)
	}
	if obs == nil || !obs.Covered {
		return out, nil
	}
	listed := make(map[int64]bool, len(tasks))
	for _, t := range tasks {
		listed[t.ID] = true
	}
	near, err := report.AttributedOutside(ctx, g.cfg.Source, obs, q.Window, listed)
	if err != nil {
		return nil, err
	}
	for _, t := range near {
		addTask(out, t, q)
	}
	return out, nil
}

// addTask counts task t's GPUs and labels into its keys' sharing, by
// model (its unlisted GPUs are whole GPUs of the empty model), unless
// q.Scope leaves it out.
func addTask(out map[string]*sharing, t facts.TaskUsage, q report.Query) {
	if q.Scope != nil && !q.Scope(t.Project, t.Owner) {
		return
	}
	models := map[string][]facts.TaskGPU{}
	for _, gpu := range t.GPUs {
		models[gpu.Model] = append(models[gpu.Model], gpu)
	}
	if t.UnlistedGPUs > 0 {
		models[""] = append(models[""], facts.TaskGPU{Share: 1})
	}
	for m, gpus := range models {
		k := shareKey(t.Project, t.Owner, m)
		s := out[k]
		if s == nil {
			s = &sharing{}
			out[k] = s
		}
		s.add(t.Labels, gpus)
	}
}

// add counts one task's GPUs of the key in.
func (s *sharing) add(labels map[string]string, gpus []facts.TaskGPU) {
	mine := map[string]string{}
	for k, v := range labels {
		mine["paddle/label/"+strings.ToLower(k)] = v
	}
	if !s.seen {
		s.labels = mine
	} else {
		for k, v := range s.labels {
			if mine[k] != v {
				delete(s.labels, k)
			}
		}
	}
	s.seen = true
	if s.shares == nil {
		s.shares, s.profiles = map[float64]bool{}, map[string]bool{}
	}
	for _, gpu := range gpus {
		profile := ""
		if gpu.MIG {
			profile = gpu.Profile
		}
		s.profiles[profile] = true
		s.mig = s.mig || gpu.MIG
		s.shared = s.shared || gpu.MIG || gpu.Share < 1
		s.shares[gpu.Share] = true
	}
}
