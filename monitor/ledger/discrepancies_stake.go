package ledger

import (
	"context"
	"fmt"
	"math"
	"sort"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/report"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
)

// The money at stake of discrepancies (MONITOR.md 20.22): a task's
// declared cost − its billed cost (the chargeback's line, the report's
// figure); an undeclared or unattributed user's cost at the instance's
// price (userFigures); an over-declared share's excess declared cost:
// over the time the shares declared on one GPU instance add up to more
// than 1, Σ (shares − 1) × seconds, at the GPU's price.

// billedSource is a Source the report can bill tasks from (a *store.Store).
type billedSource interface {
	report.TaskLister
	report.Observer
}

// billedCosts are the tasks' billed costs in q's window by store key, as
// the chargeback bills them (nil without prices or a billedSource).
func billedCosts(ctx context.Context, src Source, q Query) (map[int64]float64, error) {
	b, ok := src.(billedSource)
	if !ok || q.Prices == nil {
		return nil, nil
	}
	rq := report.Query{Window: q.Window, Prices: q.Prices}
	if q.Namespaces != nil {
		rq.Namespaces = q.Namespaces.Project
	}
	st, err := report.Chargeback(ctx, b, rq)
	if err != nil {
		return nil, fmt.Errorf("discrepancies: billed: %w", err)
	}
	out := map[int64]float64{}
	for _, l := range st.Lines {
		if l.ID != 0 && l.Cost != nil {
			out[l.ID] += *l.Cost
		}
	}
	return out, nil
}

// instanceKey is one GPU instance (gi -1: the whole GPU).
type instanceKey struct {
	uuid string
	gi   int64
}

// excess is an over-declared instance's excess: GPU-hours declared above
// 1, their cost at the GPU's price (priced: every claim's model had one).
type excess struct {
	hours, cost float64
	priced      bool
}

// excessShares sweeps each GPU instance's claims over [from, to) (a task's
// claim from its start to its counted end, now for one without) and sums
// the share declared above 1 over time.
func excessShares(tasks []store.DeclaredTask, from, to, now int64, p *report.Prices) map[instanceKey]excess {
	type edge struct {
		at    int64
		share float64
		price float64
		ok    bool
	}
	edges := map[instanceKey][]edge{}
	for _, t := range tasks {
		end := now
		if t.End != nil {
			end = *t.End
		}
		s, e := max(t.Start, from), min(end, to)
		if e <= s {
			continue
		}
		for _, g := range t.GPUs {
			if g.UUID == "" || g.Share <= 0 {
				continue
			}
			k := instanceKey{g.UUID, -1}
			if g.GPUInstanceID != nil {
				k.gi = *g.GPUInstanceID
			}
			price, ok := gpuPrice(p, g.Model)
			edges[k] = append(edges[k], edge{s, g.Share, price, ok}, edge{e, -g.Share, price, ok})
		}
	}
	out := map[instanceKey]excess{}
	for k, es := range edges {
		sort.SliceStable(es, func(i, j int) bool { return es[i].at < es[j].at })
		var x excess
		x.priced = true
		sum, price := 0.0, 0.0
		for i, e := range es {
			if i > 0 && e.at > es[i-1].at && sum > 1+1e-9 {
				h := (sum - 1) * float64(e.at-es[i-1].at) / 3600
				x.hours += h
				x.cost += h * price
			}
			sum += e.share
			if e.share > 0 {
				// The instance's price: its claims' (one model).
				price = e.price
				x.priced = x.priced && e.ok
			}
		}
		if x.hours > 0 {
			out[k] = x
		}
	}
	return out
}

// stakeOf sets o's excess GPU-hours and money at stake from xs.
func (o *Overcommit) stakeOf(xs map[instanceKey]excess, priced bool) {
	k := instanceKey{o.UUID, -1}
	if o.GPUInstanceID != nil {
		k.gi = *o.GPUInstanceID
	}
	x := xs[k]
	o.ExcessGPUHours = round(x.hours)
	if priced && x.priced {
		v := math.Round(x.cost*100) / 100
		o.MoneyAtStake = &v
	}
}
