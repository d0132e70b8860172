package focus

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/access"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/ledger"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/report"
)

// part is one billing basis of the report: the report's billing is linear
// in its inputs (declared sums, less the covered declared part, plus the
// attributed use, plus the undeclared use), so handing report.Compute the
// inputs of one part gives that part's figures, priced by the report.
type part int

const (
	declaredPart   part = iota // declared sums less what node reports covered
	attributedPart             // what the ledger attributed to tasks
	undeclaredPart             // undeclared use charged to projects by namespace
)

// partSource is the store seen through one part.
type partSource struct {
	Source
	part part
}

func (p partSource) ReportSums(ctx context.Context, w facts.Window, keys []string, scoped bool) (facts.Sums, error) {
	if p.part != declaredPart {
		return facts.Sums{}, nil
	}
	return p.Source.ReportSums(ctx, w, keys, scoped)
}

func (p partSource) Observations(ctx context.Context, w facts.Window) (*facts.Observations, error) {
	o, ok := p.Source.(report.Observer)
	if !ok {
		return nil, nil
	}
	obs, err := o.Observations(ctx, w)
	if err != nil || obs == nil {
		return obs, err
	}
	out := &facts.Observations{Covered: obs.Covered}
	switch p.part {
	case declaredPart:
		for _, t := range obs.Tasks {
			t.Observed, t.Unattributed = nil, nil
			out.Tasks = append(out.Tasks, t)
		}
	case attributedPart:
		for _, t := range obs.Tasks {
			t.CoveredDeclared, t.CoveredUnlistedSeconds = nil, 0
			out.Tasks = append(out.Tasks, t)
		}
	case undeclaredPart:
		out.Undeclared = obs.Undeclared
	}
	return out, nil
}

// daySource is the store for one day's rows: the day's observations and
// its tasks are read once and handed to every computation of the day
// that asks for them (the GPUs' sharing and labels, the three parts'
// reports, the declared offset), where each read them again before (five
// reads of the same rows a day). A read of another window goes to the
// store. It lives for one day of one export: no answer outlives the
// export.
type daySource struct {
	Source
	day facts.Window

	obsOnce sync.Once
	obs     *facts.Observations
	obsErr  error

	tasksOnce sync.Once
	tasks     []facts.TaskUsage
	tasksErr  error
	// fromMonth, when set, lists the day's tasks from the month's read
	// (monthTasks) instead of a read of the day.
	fromMonth func(context.Context) ([]facts.TaskUsage, error)
}

func (d *daySource) isDay(w facts.Window) bool {
	return w.From.Equal(d.day.From) && w.To.Equal(d.day.To)
}

// Observations are the store's (nil when it observes nothing, as
// report.Compute takes a source that is no report.Observer).
func (d *daySource) Observations(ctx context.Context, w facts.Window) (*facts.Observations, error) {
	o, ok := d.Source.(report.Observer)
	if !ok {
		return nil, nil
	}
	if !d.isDay(w) {
		return o.Observations(ctx, w)
	}
	d.obsOnce.Do(func() { d.obs, d.obsErr = o.Observations(ctx, w) })
	return d.obs, d.obsErr
}

func (d *daySource) ReportTasks(ctx context.Context, w facts.Window) ([]facts.TaskUsage, error) {
	if !d.isDay(w) {
		return d.Source.ReportTasks(ctx, w)
	}
	d.tasksOnce.Do(func() {
		if d.fromMonth != nil {
			d.tasks, d.tasksErr = d.fromMonth(ctx)
			return
		}
		d.tasks, d.tasksErr = d.Source.ReportTasks(ctx, w)
	})
	return d.tasks, d.tasksErr
}

// gen is one export's computation.
type gen struct {
	cfg     Config
	month   facts.Window
	scope   *access.Scope
	version int
	// now is the instant the ledger is computed at (its capacity ends at
	// the clock): one for the whole export.
	now time.Time
	// decl and tasks are the month's declared tasks and its tasks by
	// day, each read once for all the days (one export).
	decl  *declaredOnce
	tasks *monthTasks
}

// rowKeys are the report's keys of the export's rows: pipeline too, for
// the Tags (rows of one key and several pipelines are added up, without a
// pipeline tag).
var rowKeys = []string{"project", "owner", "model", "pipeline"}

// usage is one (project, owner, model) of a part, over its pipelines.
type usage struct {
	project, owner, model string
	pipelines             map[string]bool
	hours, cost           float64
}

// day is one UTC day's rows, every read of the day's observations and
// tasks made once (daySource), the tasks from the month's read where the
// source lists a month's tasks by day (monthTasker).
func (g *gen) day(ctx context.Context, w facts.Window) ([]Row, error) {
	day := *g
	ds := &daySource{Source: g.cfg.Source, day: w}
	if mt, ok := g.cfg.Source.(monthTasker); ok {
		i := int(w.From.Sub(g.month.From) / (24 * time.Hour))
		ds.fromMonth = func(ctx context.Context) ([]facts.TaskUsage, error) {
			days, err := g.tasks.read(ctx, mt, g.month)
			if err != nil {
				return nil, err
			}
			if i >= len(days) {
				return nil, fmt.Errorf("the month's tasks by day end before day %d", i+1)
			}
			return days[i], nil
		}
	}
	day.cfg.Source = ds
	return day.dayRows(ctx, w)
}

// dayRows are the rows of the day w, g's source that day's.
func (g *gen) dayRows(ctx context.Context, w facts.Window) ([]Row, error) {
	q := report.Query{Window: w, By: rowKeys, Prices: g.cfg.Prices}
	if g.scope != nil {
		q.Scope = g.scope.Allows
	}
	if g.cfg.Namespaces != nil {
		q.Namespaces = g.cfg.Namespaces.Project
	}
	shared, err := g.sharing(ctx, q)
	if err != nil {
		return nil, err
	}
	var rows []Row
	for _, p := range []struct {
		part         part
		basis, state string
	}{
		{declaredPart, facts.BasisDeclared, ledger.Unobserved},
		{attributedPart, facts.BasisObserved, ledger.Attributed},
		{undeclaredPart, facts.BasisObserved, ledger.Undeclared},
	} {
		rep, err := report.Compute(ctx, partSource{g.cfg.Source, p.part}, q)
		if err != nil {
			return nil, err
		}
		for _, u := range merge(rep) {
			if u.hours == 0 && u.cost == 0 {
				continue
			}
			rows = append(rows, g.usageRow(w, u, p.basis, p.state, shared[shareKey(u.project, u.owner, u.model)]))
		}
	}
	if g.scope != nil || g.cfg.Ledger == nil {
		return rows, nil
	}
	platform, err := g.platform(ctx, w)
	if err != nil {
		return nil, err
	}
	return append(rows, platform...), nil
}

// merge adds up a part's rows over their pipelines, keyed by project,
// owner and GPU model, in a fixed order. The report keys a MIG instance's
// declared GPUs by model and profile but its observed use (and the
// covered part taken away) by model: rows are merged by the model alone,
// and the profile comes back from the tasks' declarations (sharing).
func merge(rep *report.Report) []*usage {
	by := map[string]*usage{}
	for _, row := range rep.Rows {
		k := row.Key
		model := baseModel(k["model"])
		id := k["project"] + "\x00" + k["owner"] + "\x00" + model
		u := by[id]
		if u == nil {
			u = &usage{project: k["project"], owner: k["owner"], model: model, pipelines: map[string]bool{}}
			by[id] = u
		}
		u.pipelines[k["pipeline"]] = true
		u.hours += row.GPUHours
		cost := 0.0
		if row.Cost != nil {
			cost = *row.Cost
		}
		u.cost += cost
	}
	ids := slices.Sorted(maps.Keys(by))
	out := make([]*usage, 0, len(ids))
	for _, id := range ids {
		u := by[id]
		u.hours, u.cost = round6(u.hours), round6(u.cost)
		out = append(out, u)
	}
	return out
}

func round6(x float64) float64 { return math.Round(x*1e6) / 1e6 }

// baseModel is a report model key without its MIG profile.
func baseModel(key string) string {
	if report.NamesProfile(key) {
		return key[:strings.LastIndexByte(key, ' ')]
	}
	return key
}

// usageRow is a task part's row.
func (g *gen) usageRow(w facts.Window, u *usage, basis, state string, sh *sharing) Row {
	model := u.model
	if p := sh.profile(); p != "" {
		model += " " + p
	}
	r := g.base(w, model)
	r.BilledCost = u.cost
	r.SubAccountID, r.SubAccountName, r.owner = u.project, u.project, u.owner
	r.BillingBasis, r.LedgerState = basis, state
	hours := u.hours
	r.ConsumedQuantity = &hours
	g.price(&r, model, hours, u.cost)
	r.ChargeDescription = fmt.Sprintf("%s GPU time, %s (%s)", skuName(model), state, basis)
	r.Tags = map[string]string{}
	if u.owner != "" {
		r.Tags["paddle/owner"] = u.owner
	}
	if len(u.pipelines) == 1 {
		for p := range u.pipelines {
			if p != "" {
				r.Tags["paddle/pipeline"] = p
			}
		}
	}
	if sh != nil {
		maps.Copy(r.Tags, sh.labels)
		switch {
		case sh.mig:
			r.SplitRule = "mig-slices"
		case sh.shared && basis == facts.BasisObserved:
			r.SplitRule = g.cfg.Split
		}
		r.AllocatedShare = sh.share()
	}
	return r
}

// base is a row's columns common to every row of the day w and model.
func (g *gen) base(w facts.Window, model string) Row {
	r := Row{BillingCurrency: g.cfg.Prices.Currency, BillingPeriodStart: g.month.From, BillingPeriodEnd: g.month.To,
		ChargePeriodStart: w.From, ChargePeriodEnd: w.To, ChargeCategory: "Usage", ConsumedUnit: UnitGPUHours, SkuID: model}
	if g.version > 0 {
		r.InvoiceID = fmt.Sprintf("%s-v%d", g.month.From.Format("2006-01"), g.version)
	}
	return r
}

// skuName is a model key as a description says it.
func skuName(model string) string {
	if model == "" {
		return "GPU (no model)"
	}
	return model
}

// price sets the row's unit price and pricing quantity from the prices
// file's rule for model (a MIG profile's key prices an instance-hour,
// otherwise the model's a GPU-hour), so that ListUnitPrice ×
// PricingQuantity = the report's cost of the row.
func (g *gen) price(r *Row, model string, hours, cost float64) {
	p := g.cfg.Prices
	unit, price, key, ok := UnitGPUHours, 0.0, "", false
	if report.NamesProfile(model) {
		i := strings.LastIndexByte(model, ' ')
		if v, found := p.ProfilePrice(model[:i], model[i+1:]); found {
			unit, price, ok = UnitInstanceHours, v, true
			key, _ = p.ProfilePriceKey(model[:i], model[i+1:])
		} else if v, found := p.Price(model[:i]); found {
			price, ok = v, true
			key, _ = p.PriceKey(model[:i])
		}
	} else if v, found := p.Price(model); found {
		price, ok = v, true
		key, _ = p.PriceKey(model)
	}
	r.PricingUnit, r.SkuPriceID = unit, key
	lp := price
	r.ListUnitPrice = &lp
	q := hours
	if ok && price > 0 {
		q = cost / price
	}
	r.PricingQuantity = &q
}

// platform is the day's capacity nobody was billed for: the ledger's
// unattributed, unallocated and unobserved GPU-hours by model, as rows of
// the platform's sub-account; the unobserved ones less what tasks were
// billed on the declared basis for the same GPUs and instants
// (x_DeclaredOffsetGpuHours; offsets, offset.go), never below zero.
func (g *gen) platform(ctx context.Context, w facts.Window) ([]Row, error) {
	src := &dayLedger{Source: g.cfg.Ledger}
	l, err := ledger.Compute(ctx, src, ledger.Query{Window: w, By: ledger.ByModel, Split: g.cfg.Split, Prices: g.cfg.Prices,
		Namespaces: g.cfg.Namespaces, Retire: g.cfg.Retire, Now: g.now})
	if err != nil {
		return nil, err
	}
	off, err := g.offsets(ctx, src, w, g.now)
	if err != nil {
		return nil, err
	}
	var out []Row
	for _, row := range l.Rows {
		for i, state := range ledger.States {
			if state == ledger.Attributed || state == ledger.Undeclared {
				continue // billed to projects: the task and undeclared rows
			}
			hours := row.States[i]
			cost := 0.0
			if c := row.StateCosts[i]; c != nil {
				cost = *c
			}
			var offset *float64
			if o := off[row.Key]; state == ledger.Unobserved && o.hours > 0 {
				h := round6(min(hours, o.hours))
				offset = &h
				cost = max(0, cost-o.cost)
				hours = max(0, hours-o.hours)
			}
			hours, cost = round6(hours), round6(cost)
			if hours == 0 && cost == 0 && offset == nil {
				continue
			}
			r := g.base(w, row.Key)
			r.BilledCost = cost
			r.SubAccountID, r.SubAccountName = g.cfg.PlatformAccount, g.cfg.PlatformAccount
			r.LedgerState = state
			r.ConsumedQuantity = &hours
			r.DeclaredOffsetHours = offset
			g.price(&r, row.Key, hours, cost)
			r.ChargeDescription = fmt.Sprintf("%s GPU time, %s (platform)", skuName(row.Key), state)
			out = append(out, r)
		}
	}
	return out, nil
}
