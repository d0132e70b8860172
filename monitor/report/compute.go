package report

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
)

// Compute asks src for the sums of q's window and assembles the report.
func Compute(ctx context.Context, src facts.Source, q Query) (*Report, error) {
	by, err := checkQuery(q)
	if err != nil {
		return nil, err
	}
	in := func(key map[string]string) bool {
		return q.Scope == nil || q.Scope(key["project"], key["owner"])
	}
	rs := &rowSet{by: by, rows: map[string]*acc{}, keys: map[string]map[string]string{}}
	if err := rs.addSums(ctx, src, q, in); err != nil {
		return nil, err
	}
	// Billing from observations: what the node reports observed replaces
	// what the tasks declared for the parts they covered.
	var obs *facts.Observations
	if o, ok := src.(Observer); ok {
		if obs, err = o.Observations(ctx, q.Window); err != nil {
			return nil, fmt.Errorf("report: observations: %w", err)
		}
	}
	observed := obs != nil && obs.Covered
	if observed {
		for _, a := range rs.rows {
			a.bill.declaredSec = a.gpuSec
		}
		rs.total.bill.declaredSec = rs.total.gpuSec
		observe(obs, q, in, rs.row, &rs.total)
	}
	if err := rs.addMetrics(ctx, src, q, in); err != nil {
		return nil, err
	}
	r := rs.report(q, observed)
	if err := addBudgets(ctx, src, q, r, obs); err != nil {
		return nil, err
	}
	return r, nil
}

// checkQuery checks q's window, keys and metrics and returns the keys to
// group by (project when none is given).
func checkQuery(q Query) ([]string, error) {
	if err := q.Window.Check(); err != nil {
		return nil, err
	}
	by := q.By
	if len(by) == 0 {
		by = []string{"project"}
	}
	by, err := facts.ParseKeys(strings.Join(by, ","))
	if err != nil {
		return nil, err
	}
	if _, err := facts.ParseMetrics(q.Metrics); err != nil {
		return nil, err
	}
	return by, nil
}

// rowSet holds the accumulators of a report's rows, by row ID, and of its
// total.
type rowSet struct {
	by    []string
	rows  map[string]*acc
	keys  map[string]map[string]string
	total acc
}

// row is the accumulator of key's row (only the keys of by count),
// created on first use.
func (rs *rowSet) row(key map[string]string) *acc {
	k := make(map[string]string, len(rs.by))
	for _, name := range rs.by {
		k[name] = key[name]
	}
	id := rowID(rs.by, k)
	a := rs.rows[id]
	if a == nil {
		a = &acc{}
		rs.rows[id], rs.keys[id] = a, k
	}
	return a
}

// addSums adds the store's task and GPU sums the reader may see.
//
// With the key model a task counts in the row of each of its models;
// the total counts it once, and GPU-hours come from sums that leave
// model out.
func (rs *rowSet) addSums(ctx context.Context, src facts.Source, q Query, in func(map[string]string) bool) error {
	byModel := slices.Contains(rs.by, "model")
	sums, err := src.ReportSums(ctx, q.Window, rs.by, q.Scope != nil)
	if err != nil {
		return fmt.Errorf("report: sums: %w", err)
	}
	tasks, gpus, baseTasks := sums.Tasks, sums.GPUs, sums.Base
	if !byModel {
		baseTasks = tasks
	}
	// GPUs counted but not listed (device nodes) come from the task sums
	// without model (a task by model is in the group of each of its
	// models); they are the row of the empty model.
	for _, t := range baseTasks {
		if !in(t.Key) {
			continue
		}
		rs.total.addTasks(t)
		if t.UnlistedGPUSeconds > 0 {
			key := maps.Clone(t.Key)
			key["model"] = ""
			rs.row(key).addUnlisted(t.UnlistedGPUSeconds, t.FailedUnlistedGPUSeconds, q.Prices)
			rs.total.addUnlisted(t.UnlistedGPUSeconds, t.FailedUnlistedGPUSeconds, q.Prices)
		}
	}
	for _, t := range tasks {
		if in(t.Key) {
			rs.row(t.Key).addTasks(t)
		}
	}
	for _, g := range gpus {
		if !in(g.Key) {
			continue
		}
		rs.row(g.Key).addGPUs(g, q.Prices)
		rs.total.addGPUs(g, q.Prices)
	}
	return nil
}

// addMetrics adds q's metrics: rows by model take a task once per model,
// the total once (from sums that leave model out).
func (rs *rowSet) addMetrics(ctx context.Context, src facts.Source, q Query, in func(map[string]string) bool) error {
	byModel := slices.Contains(rs.by, "model")
	base := slices.DeleteFunc(slices.Clone(rs.by), func(k string) bool { return k == "model" })
	for _, name := range q.Metrics {
		sums, err := src.ReportMetric(ctx, q.Window, rs.by, name)
		if err != nil {
			return fmt.Errorf("report: metric %s: %w", name, err)
		}
		totals := sums
		if byModel {
			if totals, err = src.ReportMetric(ctx, q.Window, base, name); err != nil {
				return fmt.Errorf("report: metric %s: %w", name, err)
			}
		}
		for _, m := range sums {
			if in(m.Key) {
				rs.row(m.Key).addMetric(name, m)
			}
		}
		for _, m := range totals {
			if in(m.Key) {
				rs.total.addMetric(name, m)
			}
		}
	}
	return nil
}

// report turns the accumulators into the report's rows, GPU-hours largest
// first then by key, and its total.
func (rs *rowSet) report(q Query, observed bool) *Report {
	r := &Report{From: q.From.UTC(), To: q.To.UTC(), By: rs.by, Metrics: q.Metrics, Rows: []Row{}}
	if q.Prices != nil {
		c := q.Prices.Currency
		r.Currency = &c
	}
	for id, a := range rs.rows {
		f := a.figures(q.Prices, q.Metrics)
		if observed {
			a.billingFigures(&f)
		}
		r.Rows = append(r.Rows, Row{Key: rs.keys[id], Figures: f})
	}
	slices.SortFunc(r.Rows, func(a, b Row) int {
		switch {
		case a.GPUHours > b.GPUHours:
			return -1
		case a.GPUHours < b.GPUHours:
			return 1
		}
		return strings.Compare(rowID(rs.by, a.Key), rowID(rs.by, b.Key))
	})
	r.Total = rs.total.figures(q.Prices, q.Metrics)
	if observed {
		rs.total.billingFigures(&r.Total)
	}
	return r
}
