package report

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/csvout"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
)

// The chargeback statement (report --by task --format csv): one line per
// task whose counted interval overlaps the window, with what finance
// charges it for. Its hours and cost are counted as the report counts
// them (the same window clipping, shares, prices and default), so a
// project's lines add up to that project's row of the report.

// TaskKey is the grouping key of the chargeback statement.
const TaskKey = "task"

// TaskLister lists the tasks of a window for the statement
// (*store.Store implements it).
type TaskLister interface {
	ReportTasks(ctx context.Context, w facts.Window) ([]facts.TaskUsage, error)
}

// StatementLine is one task's line.
type StatementLine struct {
	facts.TaskUsage
	GPUHours     float64
	PricePerHour *float64 // nil without prices
	Cost         *float64
	EnergyKWh    *float64
	// Basis says what the hours rest on: "completion" (start to end),
	// "last heartbeat" (a task without a completion, up to its last
	// heartbeat), "start only" (neither: counted 0 hours). When its own
	// node's reports cover part of its counted interval in the window (or
	// it was attributed use there) it is its billing basis instead:
	// BasisObserved or BasisMixed. It rests on the task's own GPUs and
	// time only, never on whether another node's report covers the
	// window, so a report about other GPUs leaves the line byte-identical
	// (MONITOR.md 17, invariant 4; 20.1). An undeclared use line's is
	// BasisObserved.
	Basis string
	// Namespace is set on a line of undeclared use (no task): the
	// namespace whose use --namespace-projects charges to Project.
	Namespace string
	// Undeclared is that line's use, by GPU kind.
	Undeclared []facts.InstanceUse
}

// Statement is the chargeback statement of a window.
type Statement struct {
	From, To time.Time
	Currency *string
	Labels   []string // every extra label of the lines' tasks, sorted
	Lines    []StatementLine
	// SHA256 is the closed month's statement hash when the window is a
	// closed month ("" for an open one): the file says on every line
	// which statement it is.
	SHA256 string
	// Adjustments are the late data of closed months this month carries
	// (the books fill them for an open month): each late task gets a line
	// of its own after the month's lines, with the month it adjusts.
	Adjustments []Adjustment
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
		st.addLine(t, q, labels)
	}
	if o, ok := src.(Observer); ok {
		obs, err := o.Observations(ctx, q.Window)
		if err != nil {
			return nil, fmt.Errorf("report: observations: %w", err)
		}
		if obs != nil && obs.Covered {
			if err := st.addAttributedOnly(ctx, src, obs, q, labels); err != nil {
				return nil, err
			}
			billLines(st, obs, q)
		}
	}
	st.Labels = slices.Sorted(maps.Keys(labels))
	return st, nil
}

// addAttributedOnly adds a line for each task attributed use in the window
// whose counted interval does not meet it (AttributedOutside), so that the
// lines still add up to the report, which bills that use (MONITOR.md
// 20.3); its counted seconds in the window are 0.
func (st *Statement) addAttributedOnly(ctx context.Context, src TaskLister, obs *facts.Observations, q Query, labels map[string]bool) error {
	listed := map[int64]bool{}
	for _, l := range st.Lines {
		listed[l.ID] = true
	}
	near, err := AttributedOutside(ctx, src, obs, q.Window, listed)
	if err != nil {
		return err
	}
	for _, t := range near {
		t.Seconds = 0
		st.addLine(t, q, labels)
	}
	return nil
}

// AttributedOutside are the tasks that obs attributes use to in window w
// and listed lacks: tasks whose counted interval does not meet w, whose
// pod was in a report whose span began before the task's start (a
// report's figures are spread evenly over its span, 20.8). Such a task
// meets w widened by a report's longest span (on either side, whatever
// moves a counted end), where src looks it up. The chargeback lists a line
// for each; the FOCUS export takes their labels and GPUs.
func AttributedOutside(ctx context.Context, src TaskLister, obs *facts.Observations, w facts.Window, listed map[int64]bool) ([]facts.TaskUsage, error) {
	missing := map[int64]bool{}
	for _, t := range obs.Tasks {
		if t.ID != 0 && !listed[t.ID] && len(t.Observed) > 0 {
			missing[t.ID] = true
		}
	}
	if len(missing) == 0 {
		return nil, nil
	}
	span := wire.MaxNodeInterval * time.Second
	near, err := src.ReportTasks(ctx, facts.Window{From: w.From.Add(-span), To: w.To.Add(span)})
	if err != nil {
		return nil, fmt.Errorf("report: tasks: %w", err)
	}
	out := near[:0]
	for _, t := range near {
		if missing[t.ID] {
			out = append(out, t)
		}
	}
	return out, nil
}

// addLine adds t's line (its declared figures over its counted seconds in
// the window) unless q.Scope leaves it out, and its labels to labels.
func (st *Statement) addLine(t facts.TaskUsage, q Query, labels map[string]bool) {
	if q.Scope != nil && !q.Scope(t.Project, t.Owner) {
		return
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

// billLines bills the statement's lines from observations as the report
// bills its rows (observe): a task its node's reports observed has the
// declared figures of its covered part taken away and its attributed use
// added, and its basis becomes its billing basis (observed or mixed); a
// task they did not observe keeps its declared figures and its label
// untouched (invariant 4: another node's report is no data about it);
// undeclared use --namespace-projects charges to a project gets a line
// per namespace (no task), so the lines still add up to the report's rows
// and total. Price per hour on an observed or mixed line is its cost per
// billed GPU-hour.
func billLines(st *Statement, obs *facts.Observations, q Query) {
	byID := map[int64]*facts.ObservedTask{}
	for i := range obs.Tasks {
		byID[obs.Tasks[i].ID] = &obs.Tasks[i]
	}
	for i := range st.Lines {
		l := &st.Lines[i]
		t, ok := byID[l.ID]
		if !ok {
			continue
		}
		l.Basis = t.Basis()
		var a acc
		for _, g := range t.CoveredDeclared {
			a.addGPUs(negated(g), q.Prices)
		}
		if t.CoveredUnlistedSeconds > 0 {
			a.addUnlistedSeconds(-t.CoveredUnlistedSeconds, 0, q.Prices)
		}
		for _, u := range billedUse(t, q.Namespaces) {
			a.addGPUs(gpuSumsOf(u, map[string]string{"model": u.Model}, t.Failed), q.Prices)
		}
		// Rounded as the report's figures are (sums of floats differ in
		// their last bits between stores).
		l.GPUHours = round(l.GPUHours+a.gpuSec/3600, 1e6)
		if l.Cost != nil {
			cost := round(*l.Cost+a.cost/3600, 1e6)
			l.Cost = &cost
			l.PricePerHour = perHour(cost, l.GPUHours)
		}
		if a.energyJ != 0 {
			kwh := a.energyJ / 3.6e6
			if l.EnergyKWh != nil {
				kwh += *l.EnergyKWh
			}
			kwh = round(kwh, 1e6)
			l.EnergyKWh = &kwh
		}
	}
	if q.Namespaces == nil {
		return
	}
	// Each namespace's line sums its uses unrounded and is rounded once,
	// as the report's row is (rounding after each use drifted from it).
	byNS := map[string]int{}
	sums := map[int]*acc{}
	for _, u := range inOrder(obs.Undeclared) {
		project, ok := q.Namespaces(u.Namespace)
		if !ok || (q.Scope != nil && !q.Scope(project, "")) {
			continue
		}
		i, ok := byNS[u.Namespace]
		if !ok {
			i = len(st.Lines)
			byNS[u.Namespace] = i
			sums[i] = &acc{}
			st.Lines = append(st.Lines, StatementLine{TaskUsage: facts.TaskUsage{Project: project,
				Start: st.From.Unix()}, Basis: facts.BasisObserved, Namespace: u.Namespace})
		}
		l := &st.Lines[i]
		l.Undeclared = append(l.Undeclared, inMicroUnits(u.Use))
		sums[i].addGPUs(gpuSumsOf(u.Use, map[string]string{"model": u.Use.Model}, false), q.Prices)
	}
	for i, a := range sums {
		l := &st.Lines[i]
		l.GPUHours = round(a.gpuSec/3600, 1e6)
		if q.Prices != nil {
			cost := round(a.cost/3600, 1e6)
			l.Cost = &cost
			l.PricePerHour = perHour(cost, l.GPUHours)
		}
		if a.energyJ != 0 {
			kwh := round(a.energyJ/3.6e6, 1e6)
			l.EnergyKWh = &kwh
		}
	}
}

// inOrder is undeclared use in one order, by namespace, node, model,
// profile and amounts, whatever order the store read it in (a PostgreSQL
// hash aggregate keeps none): the namespace lines, their lists and their
// sums are then the same bytes from a live read and from the facts a
// statement froze (invariant 3).
func inOrder(uses []facts.UndeclaredUse) []facts.UndeclaredUse {
	out := slices.Clone(uses)
	slices.SortStableFunc(out, func(a, b facts.UndeclaredUse) int {
		x, y := a.Use, b.Use
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(x.Node, y.Node),
			strings.Compare(x.Model, y.Model), strings.Compare(x.Profile, y.Profile), cmp.Compare(b2i(x.MIG), b2i(y.MIG)), cmp.Compare(x.Slices, y.Slices),
			cmp.Compare(x.TotalSlices, y.TotalSlices), cmp.Compare(x.Seconds, y.Seconds), cmp.Compare(x.BusySeconds, y.BusySeconds),
			cmp.Compare(x.EnergyJoules, y.EnergyJoules))
	})
	return out
}

// inMicroUnits is use as a line lists it: seconds and joules to the
// micro-unit (MONITOR.md 20.7), so that the list is the same bytes
// whatever order a store summed the use in (floating-point sums differ
// in their last digits by order: one use was 2113.6666666666665 s live
// and 2113.666666666667 s frozen on PostgreSQL). The line's hours and
// cost are summed from the use unrounded, as the report's rows are.
func inMicroUnits(u facts.InstanceUse) facts.InstanceUse {
	u.Seconds, u.BusySeconds, u.EnergyJoules = round(u.Seconds, 1e6), round(u.BusySeconds, 1e6), round(u.EnergyJoules, 1e6)
	return u
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// perHour is cost per GPU-hour (nil without hours).
func perHour(cost, hours float64) *float64 {
	if hours <= 0 {
		return nil
	}
	p := round(cost/hours, 1e6)
	return &p
}

// gpuPrice is the price of one hour of g as the report charges it: a MIG
// instance by its profile's key when there is one, else price(model) ×
// share.
func gpuPrice(p *Prices, g facts.TaskGPU) (float64, bool) {
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
func gpusText(l StatementLine) string {
	if l.Namespace != "" {
		var parts []string
		for _, u := range l.Undeclared {
			name := u.Model
			if u.MIG && u.Profile != "" {
				name += " " + u.Profile
			}
			parts = append(parts, name)
		}
		return "undeclared use of namespace " + l.Namespace + ": " + strings.Join(parts, " + ")
	}
	return taskGPUsText(l.TaskUsage)
}

func taskGPUsText(t facts.TaskUsage) string {
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
// prices), energy_kwh, billing_basis, and on every line the file's own
// context: currency ("" without prices), window_from, window_to (RFC
// 3339) and statement_sha256 ("" while the month is open), so that a
// line copied out of the file still says what it is. No line comes before
// the column names. Every cell passes the formula rule of csvout, as the
// report's do.
func WriteChargebackCSV(w io.Writer, st *Statement) error {
	cw := csvout.NewWriter(w)
	head := []string{"task_id", "task_name", "project", "owner"}
	for _, l := range st.Labels {
		head = append(head, facts.LabelPrefix+l)
	}
	head = append(head, "start", "end", "gpus", "gpu_hours")
	priced := st.Currency != nil
	if priced {
		head = append(head, "price_per_hour", "cost")
	}
	head = append(head, "energy_kwh", "billing_basis", "currency", "window_from", "window_to", "statement_sha256")
	adjusted := len(st.Adjustments) > 0
	if adjusted {
		head = append(head, adjustmentColumns...)
	}
	currency := ""
	if st.Currency != nil {
		currency = *st.Currency
	}
	context := []string{currency, st.From.UTC().Format(time.RFC3339), st.To.UTC().Format(time.RFC3339), st.SHA256}
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
		rec := []string{l.TaskID, l.Name, l.Project, l.Owner}
		for _, k := range st.Labels {
			rec = append(rec, l.Labels[k])
		}
		end := "running"
		if l.Namespace != "" {
			end = st.To.Format(time.RFC3339)
		} else if l.End != nil {
			end = time.Unix(*l.End, 0).UTC().Format(time.RFC3339)
		}
		rec = append(rec, time.Unix(l.Start, 0).UTC().Format(time.RFC3339), end, gpusText(l), num(l.GPUHours))
		if priced {
			rec = append(rec, opt(l.PricePerHour), opt(l.Cost))
		}
		rec = append(rec, opt(l.EnergyKWh), l.Basis)
		rec = append(rec, context...)
		if adjusted {
			rec = append(rec, "", "")
		}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	fixed := map[string]string{"currency": currency, "window_from": context[1], "window_to": context[2], "statement_sha256": st.SHA256}
	for _, a := range st.Adjustments {
		for _, t := range a.Tasks {
			if err := cw.Write(adjustedTaskRecord(head, a, t, fixed)); err != nil {
				return err
			}
		}
	}
	cw.Flush()
	return cw.Error()
}
