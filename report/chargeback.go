package report

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The chargeback statement (report --by task --format csv): one line per
// task whose counted interval overlaps the window, with what finance
// charges it for. Its hours and cost are counted as the report counts
// them (the same window clipping, shares, prices and default), so a
// project's lines add up to that project's row of the report.

// TaskKey is the grouping key of the chargeback statement.
const TaskKey = "task"

// TaskGPU is one GPU (or MIG instance) a task held.
type TaskGPU struct {
	Model, Profile string
	MIG            bool
	Share          float64
	// EnergyJoules is what the completion reported (nil: none).
	EnergyJoules *float64
}

// TaskUsage is a task as the statement counts it.
type TaskUsage struct {
	TaskID, Name, Project, Owner string
	Labels                       map[string]string
	Start                        int64
	End                          *int64 // nil: no completion
	// Heartbeat says an open task has heartbeats (it is counted up to
	// its last one).
	Heartbeat bool
	// Seconds are counted inside the window.
	Seconds int64
	GPUs    []TaskGPU
	// UnlistedGPUs are counted without a model (device nodes).
	UnlistedGPUs int64
}

// TaskLister lists the tasks of a window for the statement
// (*store.Store implements it).
type TaskLister interface {
	ReportTasks(ctx context.Context, w Window) ([]TaskUsage, error)
}

// StatementLine is one task's line.
type StatementLine struct {
	TaskUsage
	GPUHours     float64
	PricePerHour *float64 // nil without prices
	Cost         *float64
	EnergyKWh    *float64
	// Basis says what the hours rest on: "completion" (start to end),
	// "last heartbeat" (a task without a completion, up to its last
	// heartbeat), "start only" (neither: counted 0 hours).
	Basis string
}

// Statement is the chargeback statement of a window.
type Statement struct {
	From, To time.Time
	Currency *string
	Labels   []string // every extra label of the lines' tasks, sorted
	Lines    []StatementLine
}

// Chargeback computes the statement of q's window (q.By and q.Metrics are
// not used; q.Scope filters the tasks by project and owner).
func Chargeback(ctx context.Context, src TaskLister, q Query) (*Statement, error) {
	if err := q.Window.Check(); err != nil {
		return nil, err
	}
	tasks, err := src.ReportTasks(ctx, q.Window)
	if err != nil {
		return nil, fmt.Errorf("report: tasks: %w", err)
	}
	st := &Statement{From: q.From.UTC(), To: q.To.UTC()}
	if q.Prices != nil {
		c := q.Prices.Currency
		st.Currency = &c
	}
	labels := map[string]bool{}
	for _, t := range tasks {
		if q.Scope != nil && !q.Scope(t.Project, t.Owner) {
			continue
		}
		line := StatementLine{TaskUsage: t}
		hours := float64(t.Seconds) / 3600
		var price, energy float64
		priced, energized := q.Prices != nil, false
		for _, g := range t.GPUs {
			line.GPUHours += g.Share * hours
			if p, ok := gpuPrice(q.Prices, g); ok {
				price += p
			}
			if g.EnergyJoules != nil && t.End != nil {
				energized = true
				if t.End != nil && *t.End > t.Start {
					energy += *g.EnergyJoules * float64(t.Seconds) / float64(*t.End-t.Start)
				} else {
					energy += *g.EnergyJoules
				}
			}
		}
		line.GPUHours += float64(t.UnlistedGPUs) * hours
		if p, ok := q.Prices.priceOrNone(""); ok {
			price += p * float64(t.UnlistedGPUs)
		}
		if priced {
			cost := price * hours
			line.PricePerHour, line.Cost = &price, &cost
		}
		if energized {
			kwh := energy / 3.6e6
			line.EnergyKWh = &kwh
		}
		switch {
		case t.End != nil:
			line.Basis = "completion"
		case t.Heartbeat:
			line.Basis = "last heartbeat"
		default:
			line.Basis = "start only"
		}
		for k := range t.Labels {
			labels[k] = true
		}
		st.Lines = append(st.Lines, line)
	}
	st.Labels = slices.Sorted(maps.Keys(labels))
	return st, nil
}

// gpuPrice is the price of one hour of g as the report charges it: a MIG
// instance by its profile's key when there is one, else price(model) ×
// share.
func gpuPrice(p *Prices, g TaskGPU) (float64, bool) {
	if p == nil {
		return 0, false
	}
	if g.MIG {
		if price, ok := p.ProfilePrice(g.Model, g.Profile); ok {
			return price, true
		}
	}
	price, ok := p.Price(g.Model)
	return price * g.Share, ok
}

// priceOrNone is Price on a nil-safe receiver.
func (p *Prices) priceOrNone(model string) (float64, bool) {
	if p == nil {
		return 0, false
	}
	return p.Price(model)
}

// gpusText writes a task's GPUs for the statement: each model (with its
// MIG profile) once, with its count and the share of each when not whole:
// "2 × Tesla T4", "1 × NVIDIA H200 3g.71gb (share 0.428571)".
func gpusText(t TaskUsage) string {
	type kind struct {
		name  string
		share float64
	}
	var order []kind
	count := map[kind]int{}
	for _, g := range t.GPUs {
		name := g.Model
		if g.MIG && g.Profile != "" {
			name += " " + g.Profile
		}
		k := kind{name, g.Share}
		if count[k] == 0 {
			order = append(order, k)
		}
		count[k]++
	}
	var parts []string
	for _, k := range order {
		s := fmt.Sprintf("%d × %s", count[k], k.name)
		if k.share != 1 {
			s += " (share " + strconv.FormatFloat(k.share, 'f', -1, 64) + ")"
		}
		parts = append(parts, s)
	}
	if t.UnlistedGPUs > 0 {
		parts = append(parts, fmt.Sprintf("%d × (device node, no model)", t.UnlistedGPUs))
	}
	return strings.Join(parts, " + ")
}

// WriteChargebackCSV writes the statement: a header line and one line per
// task: task_id, task_name, project, owner, label:NAME for every extra
// label, start and end (RFC 3339; end "running" without a completion),
// gpus, gpu_hours, price_per_hour, cost (no price columns without
// prices), energy_kwh, billing_basis. Text cells are neutralised against
// CSV injection as the report's are.
func WriteChargebackCSV(w io.Writer, st *Statement) error {
	cw := csv.NewWriter(w)
	head := []string{"task_id", "task_name", "project", "owner"}
	for _, l := range st.Labels {
		head = append(head, LabelPrefix+l)
	}
	head = append(head, "start", "end", "gpus", "gpu_hours")
	priced := st.Currency != nil
	if priced {
		head = append(head, "price_per_hour", "cost")
	}
	head = append(head, "energy_kwh", "billing_basis")
	if err := cw.Write(head); err != nil {
		return err
	}
	opt := func(x *float64) string {
		if x == nil {
			return ""
		}
		return num(*x)
	}
	for _, l := range st.Lines {
		rec := []string{csvText(l.TaskID), csvText(l.Name), csvText(l.Project), csvText(l.Owner)}
		for _, k := range st.Labels {
			rec = append(rec, csvText(l.Labels[k]))
		}
		end := "running"
		if l.End != nil {
			end = time.Unix(*l.End, 0).UTC().Format(time.RFC3339)
		}
		rec = append(rec, time.Unix(l.Start, 0).UTC().Format(time.RFC3339), end, csvText(gpusText(l.TaskUsage)), num(l.GPUHours))
		if priced {
			rec = append(rec, opt(l.PricePerHour), opt(l.Cost))
		}
		rec = append(rec, opt(l.EnergyKWh), l.Basis)
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}
