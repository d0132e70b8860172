package focus

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/books"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/report"
)

// corrections are the month's adjustments (late data of the closed months
// before it, as the books count them: books.Report's Adjustments) as rows
// with ChargeClass "Correction", one per (corrected month, project,
// owner): their charge period is the month they correct (the books keep
// no finer period for them), their billing period the month that carries
// them.
func (g *gen) corrections(ctx context.Context) ([]Row, error) {
	if g.cfg.Books == nil {
		return nil, nil
	}
	q := report.Query{Window: g.month, By: []string{"project"}, Prices: g.cfg.Prices}
	if g.scope != nil {
		q.Scope = g.scope.Allows
	}
	rep, err := books.Report(ctx, g.cfg.Books, q, false)
	if err != nil {
		return nil, err
	}
	var out []Row
	for _, a := range rep.Adjustments {
		of, err := facts.ParseMonth("adjustment_of", a.AdjustmentOf)
		if err != nil {
			return nil, err
		}
		type sum struct {
			hours, cost float64
			changes     map[string]bool
		}
		byOwner := map[string]*sum{}
		for _, t := range a.Tasks {
			s := byOwner[t.Owner]
			if s == nil {
				s = &sum{changes: map[string]bool{}}
				byOwner[t.Owner] = s
			}
			s.hours += t.GPUHours
			if t.Cost != nil {
				s.cost += *t.Cost
			}
			s.changes[t.Change] = true
		}
		for _, owner := range slices.Sorted(maps.Keys(byOwner)) {
			s := byOwner[owner]
			r := g.base(of, "")
			r.ChargeClass = "Correction"
			r.SkuID = ""
			r.BilledCost = round6(s.cost)
			hours := round6(s.hours)
			r.ConsumedQuantity, r.PricingQuantity = &hours, &hours
			r.PricingUnit = UnitGPUHours
			r.SubAccountID, r.SubAccountName, r.owner = a.Project, a.Project, owner
			r.BillingBasis = facts.BasisDeclared
			if len(s.changes) == 1 && s.changes[books.ReasonObservedAfterClose] {
				// Node reports stored after the close: priced observed.
				r.BillingBasis = facts.BasisObserved
			}
			r.Tags = map[string]string{}
			if owner != "" {
				r.Tags["paddle/owner"] = owner
			}
			r.ChargeDescription = fmt.Sprintf("GPU time, late data of %s (%s)", a.AdjustmentOf, strings.Join(slices.Sorted(maps.Keys(s.changes)), ", "))
			out = append(out, r)
		}
	}
	return out, nil
}
