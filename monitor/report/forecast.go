package report

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
)

// ForecastSeen is how recently an open task must have been seen (start or
// heartbeat) to count in a budget's forecast: a task not heard from for
// longer may be gone, and forecasting it would make the number up.
const ForecastSeen = 10 * time.Minute

// BudgetFigures are a row's budget against what it used in the month and
// what it will have used at the month's end if the tasks running now keep
// running.
type BudgetFigures struct {
	Kind  string  `json:"kind"`
	Limit float64 `json:"limit"`
	// Used is the row's cost or gpu_hours (by Kind).
	Used float64 `json:"used"`
	// UsedShare is Used / Limit (null for a limit of 0).
	UsedShare *float64 `json:"used_share"`
	// Forecast is Used plus what the open tasks seen within ForecastSeen
	// add from now to the window's end at their share-weighted GPUs (and
	// prices); Used in any month but the one that holds now.
	Forecast      float64  `json:"forecast"`
	ForecastShare *float64 `json:"forecast_share"`
}

// Running is what a budget forecast needs from a store besides Source:
// the open tasks seen (started or heartbeat) at or after seenSince.
type Running interface {
	RunningTasks(ctx context.Context, seenSince int64) ([]facts.RunningTask, error)
}

// runningRates returns a running task's GPU-seconds per second and cost per
// second (nil prices: 0).
func runningRates(t facts.RunningTask, p *Prices) (gpus, cost float64) {
	listed := 0.0
	for _, g := range t.GPUs {
		share := g.Share
		if share <= 0 {
			share = 1
		}
		gpus += share
		if p != nil {
			price, _ := p.EntryPrice(g.Model, g.Profile, g.MIG, share)
			cost += price
		}
		listed++
	}
	if n := float64(t.GPUCount) - listed; n > 0 {
		gpus += n
		if p != nil {
			price, _ := p.Price("")
			cost += price * n
		}
	}
	return gpus, cost / 3600
}

// addBudgets fills the rows' budgets of a report by project over one
// calendar month.
func addBudgets(ctx context.Context, src facts.Source, q Query, r *Report, obs *facts.Observations) error {
	if q.Budgets == nil || !slices.Equal(r.By, []string{"project"}) || facts.Month(r.From) != (facts.Window{From: r.From, To: r.To}) {
		return nil
	}
	now := q.Now
	if now.IsZero() {
		now = time.Now()
	}
	// What the running tasks add per second, by project.
	gpuRate, costRate := map[string]float64{}, map[string]float64{}
	remaining := 0.0
	if !now.Before(r.From) && now.Before(r.To) {
		remaining = r.To.Sub(now).Seconds()
		run, ok := src.(Running)
		if !ok {
			return fmt.Errorf("report: a budget forecast needs the running tasks, which this source does not give")
		}
		tasks, err := run.RunningTasks(ctx, now.Add(-ForecastSeen).Unix())
		if err != nil {
			return fmt.Errorf("report: running tasks: %w", err)
		}
		observed := map[int64]*facts.ObservedTask{}
		if obs != nil && obs.Covered {
			for i := range obs.Tasks {
				if t := &obs.Tasks[i]; t.ID != 0 {
					observed[t.ID] = t
				}
			}
		}
		for _, t := range tasks {
			if q.Scope != nil && !q.Scope(t.Project, t.Owner) {
				continue
			}
			g, c := runningRates(t, q.Prices)
			if o := observed[t.ID]; o != nil && t.ID != 0 {
				g, c = observedRates(o, q.Prices)
			}
			gpuRate[t.Project] += g
			costRate[t.Project] += c
		}
	}
	for i := range r.Rows {
		row := &r.Rows[i]
		project := row.Key["project"]
		l, ok := q.Budgets.For(project)
		if !ok {
			continue
		}
		b := &BudgetFigures{Kind: l.Kind, Limit: l.Value}
		switch l.Kind {
		case BudgetCost:
			if row.Cost == nil {
				continue // no prices: LoadBudgets refuses that at start
			}
			b.Used = *row.Cost
			b.Forecast = round(b.Used+costRate[project]*remaining, 1e6)
		default:
			b.Used = row.GPUHours
			b.Forecast = round(b.Used+gpuRate[project]*remaining/3600, 1e6)
		}
		if l.Value > 0 {
			u, f := round(b.Used/l.Value, 1e9), round(b.Forecast/l.Value, 1e9)
			b.UsedShare, b.ForecastShare = &u, &f
		}
		row.Budget = b
	}
	return nil
}

// observedRates are an observed task's GPU-seconds per second and cost per second
// on the observed basis: its attributed GPU-seconds in the window over its
// counted seconds there (its GPUs as observed so far), and their cost the
// same way (nil prices: 0). No counted seconds: its declared rates' zero.
func observedRates(t *facts.ObservedTask, p *Prices) (gpus, cost float64) {
	if t.CountedSeconds <= 0 {
		return 0, 0
	}
	var a acc
	for _, u := range t.Observed {
		a.addGPUs(gpuSumsOf(u, map[string]string{"model": u.Model}, false), p)
	}
	return a.gpuSec / t.CountedSeconds, a.cost / t.CountedSeconds / 3600
}
