package ledger_test

// Property test of MONITOR.md section 17's second invariant, every view
// agrees with every other, on random fleets (propFleet) and random windows
// at one-second resolution, on both engines: the report's total equals the
// sum of its rows for every grouping, the same total whatever the
// grouping, the rows of a finer grouping add up to the coarser one's, a
// scoped reader's total is the sum of the rows it may see, the chargeback's
// lines add up to the report (per project and in total), the JSON and CSV
// writers print those figures (read back from their bytes), and over the
// fleet's calendar month the budgets' used figures and the /metrics month
// series (ProjectCollector, frozen clock) are the report's.
//
// Precision: every row, line and total is rounded to the micro-GPU-hour
// (and micro-unit of money) on its own, as the writers print them, so a
// sum of n figures meets the total within (n+1) × 5e-7; the writers' bytes
// read back to exactly the figures (shortest round-trip formatting), and
// the /metrics series are the report's rows × 3600 rounded to 0.01 s.

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/report"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// propPrices price both of propFleet's models (and GPUs without one).
const propPrices = `{"currency":"CNY","default":2,"models":{"NVIDIA H200*":21,"NVIDIA A100*":12}}`

// propNamespaces charges namespace ns-<i> (fleet i's unregistered pod) to
// project u<i>, for every fleet at once (a month holds many fleets).
func propNamespaces(namespace string) (string, bool) {
	if rest, ok := strings.CutPrefix(namespace, "ns-"); ok {
		return "u" + rest, true
	}
	return "", false
}

// viewGroupings are the report's --by lists the test compares (every
// single key of facts.Keys is added to them).
var viewGroupings = [][]string{{"project", "owner"}, {"owner", "model"}, {"project", "model"}}

// microTol is how far a sum of n figures, each rounded to 1e-6 as the
// total is, may be from the total.
func microTol(n int) float64 { return float64(n+1)*5e-7 + 1e-12 }

// figureSums adds up the rows' GPU-hours and cost.
func figureSums(rows []report.Row) (hours, cost float64) {
	for _, r := range rows {
		hours += r.GPUHours
		if r.Cost != nil {
			cost += *r.Cost
		}
	}
	return hours, cost
}

func TestBooksPropertyViewsAgree(t *testing.T) {
	seed := propertySeed(t)
	fleets := propertyFleets(t)
	t.Logf("PADDLE_PROPERTY_SEED=%d (%d fleets per engine)", seed, fleets)
	prices, err := report.ParsePrices(strings.NewReader(propPrices))
	if err != nil {
		t.Fatal(err)
	}
	groupings := slices.Clone(viewGroupings)
	for _, k := range facts.Keys {
		groupings = append(groupings, []string{k})
	}
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := storetest.Open(t, dsn)
		rng := rand.New(rand.NewPCG(seed, 2))
		for i := range fleets {
			base := t0 - int64(i+1)*86400
			propFleet(t, s, rng, i, base)
			from := base + int64(rng.IntN(4*3600))
			to := from + 1 + int64(rng.IntN(int(base+4*3600-from)))
			w := facts.Window{From: time.Unix(from, 0).UTC(), To: time.Unix(to, 0).UTC()}
			where := fmt.Sprintf("fleet %d (PADDLE_PROPERTY_SEED=%d), window [%s, %s)", i, seed, w.From.Format(time.RFC3339), w.To.Format(time.RFC3339))
			q := report.Query{Window: w, Prices: prices, Namespaces: propNamespaces, Now: time.Unix(base+86400, 0)}
			byProject := viewReport(t, where, q, s, []string{"project"})
			total := byProject.Total
			for _, by := range groupings {
				r := byProject
				if !slices.Equal(by, []string{"project"}) {
					r = viewReport(t, where, q, s, by)
				}
				at := where + ", --by " + strings.Join(by, ",")
				if d := math.Abs(r.Total.GPUHours - total.GPUHours); d > 1e-6 {
					t.Errorf("%s: total %v GPU-hours, by project %v", at, r.Total.GPUHours, total.GPUHours)
				}
				if d := math.Abs(*r.Total.Cost - *total.Cost); d > 1e-6 {
					t.Errorf("%s: total cost %v, by project %v", at, *r.Total.Cost, *total.Cost)
				}
				if by[0] == "project" && len(by) > 1 {
					sameProjects(t, at+" against --by project", r.Rows, byProject.Rows)
				}
				checkWriters(t, at, r)
			}
			// A reader who may see the projects p<i>_0 only: its total is
			// their rows.
			mine := func(project, _ string) bool { return strings.HasSuffix(project, "_0") }
			sq := q
			sq.Scope = mine
			scoped := viewReport(t, where+", scope *_0", sq, s, []string{"project"})
			var seen []report.Row
			for _, row := range byProject.Rows {
				if mine(row.Key["project"], "") {
					seen = append(seen, row)
				}
			}
			sameProjects(t, where+", scope *_0 against the admin's rows", scoped.Rows, seen)
			checkChargeback(t, where, s, q, byProject)
			checkMonth(t, where, s, prices, time.Unix(base+86400, 0).UTC(), i)
			if t.Failed() {
				return
			}
		}
	})
}

// viewReport is report.Compute of q by by; it checks that the rows add up
// to the total.
func viewReport(t *testing.T, where string, q report.Query, src facts.Source, by []string) *report.Report {
	t.Helper()
	q.By = by
	r, err := report.Compute(ctx, src, q)
	if err != nil {
		t.Fatalf("%s: report --by %s: %v", where, strings.Join(by, ","), err)
	}
	hours, cost := figureSums(r.Rows)
	if math.Abs(hours-r.Total.GPUHours) > microTol(len(r.Rows)) || math.Abs(cost-*r.Total.Cost) > microTol(len(r.Rows)) {
		t.Errorf("%s, --by %s: %d rows add up to %v GPU-hours and %v CNY, the total is %v and %v",
			where, strings.Join(by, ","), len(r.Rows), hours, cost, r.Total.GPUHours, *r.Total.Cost)
	}
	return r
}

// sameProjects checks that rows (of any grouping that holds project) add
// up per project to the figures of want (rows by project).
func sameProjects(t *testing.T, where string, rows, want []report.Row) {
	t.Helper()
	type sum struct {
		hours, cost float64
		n           int
	}
	got := map[string]*sum{}
	for _, r := range rows {
		s := got[r.Key["project"]]
		if s == nil {
			s = &sum{}
			got[r.Key["project"]] = s
		}
		s.hours += r.GPUHours
		s.cost += *r.Cost
		s.n++
	}
	for _, w := range want {
		p := w.Key["project"]
		s := got[p]
		if s == nil {
			s = &sum{}
		}
		delete(got, p)
		if math.Abs(s.hours-w.GPUHours) > microTol(s.n) || math.Abs(s.cost-*w.Cost) > microTol(s.n) {
			t.Errorf("%s: project %s: %v GPU-hours and %v CNY in %d rows, want %v and %v", where, p, s.hours, s.cost, s.n, w.GPUHours, *w.Cost)
		}
	}
	for p, s := range got {
		if math.Abs(s.hours) > microTol(s.n) || math.Abs(s.cost) > microTol(s.n) {
			t.Errorf("%s: project %s: %v GPU-hours and %v CNY, none in the other view", where, p, s.hours, s.cost)
		}
	}
}

// checkWriters checks the JSON and CSV writers' bytes of r: the JSON reads
// back to r's rows and total, the CSV's rows to r's rows (it has no total
// line), so that their sums are the total's.
func checkWriters(t *testing.T, where string, r *report.Report) {
	t.Helper()
	var b bytes.Buffer
	if err := report.WriteJSON(&b, r); err != nil {
		t.Fatal(err)
	}
	var back report.Report
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatalf("%s: the JSON does not read back: %v", where, err)
	}
	if back.Total.GPUHours != r.Total.GPUHours || *back.Total.Cost != *r.Total.Cost || len(back.Rows) != len(r.Rows) {
		t.Errorf("%s: the JSON says total %v GPU-hours, %v CNY in %d rows; the report %v, %v in %d", where,
			back.Total.GPUHours, *back.Total.Cost, len(back.Rows), r.Total.GPUHours, *r.Total.Cost, len(r.Rows))
	}
	jh, jc := figureSums(back.Rows)
	rh, rc := figureSums(r.Rows)
	if jh != rh || jc != rc {
		t.Errorf("%s: the JSON's rows add up to %v GPU-hours, %v CNY; the report's %v, %v", where, jh, jc, rh, rc)
	}
	b.Reset()
	if err := report.WriteCSV(&b, r); err != nil {
		t.Fatal(err)
	}
	ch, cc, n := csvSums(t, where+": the report's CSV", b.Bytes())
	if n != len(r.Rows) || ch != rh || cc != rc {
		t.Errorf("%s: the CSV's %d rows add up to %v GPU-hours, %v CNY; the report's %d rows %v, %v", where, n, ch, cc, len(r.Rows), rh, rc)
	}
}

// csvSums reads a CSV's gpu_hours and cost columns and adds them up (its
// lines in order, as figureSums adds the rows); n is the number of lines
// below the header.
func csvSums(t *testing.T, where string, body []byte) (hours, cost float64, n int) {
	t.Helper()
	recs, err := csv.NewReader(bytes.NewReader(body)).ReadAll()
	if err != nil || len(recs) == 0 {
		t.Fatalf("%s does not read: %v", where, err)
	}
	hi, ci := slices.Index(recs[0], "gpu_hours"), slices.Index(recs[0], "cost")
	if hi < 0 || ci < 0 {
		t.Fatalf("%s: no gpu_hours or cost column in %q", where, recs[0])
	}
	for _, rec := range recs[1:] {
		h, err1 := strconv.ParseFloat(rec[hi], 64)
		c, err2 := strconv.ParseFloat(rec[ci], 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("%s: a line's gpu_hours %q or cost %q is not a number", where, rec[hi], rec[ci])
		}
		hours += h
		cost += c
	}
	return hours, cost, len(recs) - 1
}

// checkChargeback checks that the chargeback's lines add up to the
// report's rows per project and to its total, and that its CSV and JSON
// print those lines.

func checkChargeback(t *testing.T, where string, s report.TaskLister, q report.Query, byProject *report.Report) {
	t.Helper()
	st, err := report.Chargeback(ctx, s, q)
	if err != nil {
		t.Fatalf("%s: chargeback: %v", where, err)
	}
	var rows []report.Row
	var hours, cost float64
	for _, l := range st.Lines {
		c := 0.0
		if l.Cost != nil {
			c = *l.Cost
		}
		rows = append(rows, report.Row{Key: map[string]string{"project": l.Project}, Figures: report.Figures{GPUHours: l.GPUHours, Cost: &c}})
		hours += l.GPUHours
		cost += c
	}
	sameProjects(t, where+": chargeback lines against --by project", rows, byProject.Rows)
	if math.Abs(hours-byProject.Total.GPUHours) > microTol(len(rows)) || math.Abs(cost-*byProject.Total.Cost) > microTol(len(rows)) {
		t.Errorf("%s: %d chargeback lines add up to %v GPU-hours, %v CNY; the report's total %v, %v", where, len(rows), hours, cost,
			byProject.Total.GPUHours, *byProject.Total.Cost)
	}
	var b bytes.Buffer
	if err := report.WriteChargebackCSV(&b, st); err != nil {
		t.Fatal(err)
	}
	if ch, cc, n := csvSums(t, where+": the chargeback CSV", b.Bytes()); n != len(rows) || ch != hours || cc != cost {
		t.Errorf("%s: the chargeback CSV's %d lines add up to %v GPU-hours, %v CNY; its %d lines %v, %v", where, n, ch, cc, len(rows), hours, cost)
	}
	b.Reset()
	if err := report.WriteChargebackJSON(&b, st); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Lines []struct {
			GPUHours float64  `json:"gpu_hours"`
			Cost     *float64 `json:"cost"`
		} `json:"lines"`
	}
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatalf("%s: the chargeback JSON does not read back: %v", where, err)
	}
	var jh, jc float64
	for _, l := range doc.Lines {
		jh += l.GPUHours
		if l.Cost != nil {
			jc += *l.Cost
		}
	}
	if len(doc.Lines) != len(rows) || jh != hours || jc != cost {
		t.Errorf("%s: the chargeback JSON's %d lines add up to %v GPU-hours, %v CNY; its %d lines %v, %v", where, len(doc.Lines), jh, jc, len(rows), hours, cost)
	}
}

// checkMonth checks, over the calendar month that holds now, that every
// budget's used figure is its project's row, and that the /metrics month
// series with the clock frozen at now are the report's rows.
func checkMonth(t *testing.T, where string, src facts.Source, prices *report.Prices, now time.Time, i int) {
	t.Helper()
	budgets, err := report.ParseBudgets(strings.NewReader(fmt.Sprintf(`{"currency":"CNY","budgets":[
		{"project":"p%d_0","monthly_gpu_hours":3},{"project":"p%d_*","monthly_cost":40},{"project":"u*","monthly_gpu_hours":1}]}`, i, i)))
	if err != nil {
		t.Fatal(err)
	}
	where += ", month " + now.Format("2006-01") + " at " + now.Format(time.RFC3339)
	q := report.Query{Window: facts.Month(now), Prices: prices, Budgets: budgets, Namespaces: propNamespaces, Now: now}
	r := viewReport(t, where, q, src, []string{"project"})
	for _, row := range r.Rows {
		p := row.Key["project"]
		l, ok := budgets.For(p)
		switch {
		case !ok && row.Budget != nil:
			t.Errorf("%s: project %s has a budget row %+v and no budget", where, p, row.Budget)
		case !ok:
		case row.Budget == nil:
			t.Errorf("%s: project %s has no budget figures", where, p)
		case l.Kind == report.BudgetCost && row.Budget.Used != *row.Cost, l.Kind == report.BudgetGPUHours && row.Budget.Used != row.GPUHours:
			t.Errorf("%s: project %s's %s budget used %v; its row %v GPU-hours, %v CNY", where, p, l.Kind, row.Budget.Used, row.GPUHours, *row.Cost)
		}
	}
	c := monitor.NewProjectCollector(src, prices, budgets, func() time.Time { return now }, nil)
	c.Namespaces = propNamespaces
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := map[string]map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "project" {
					if series[mf.GetName()] == nil {
						series[mf.GetName()] = map[string]float64{}
					}
					series[mf.GetName()][lp.GetValue()] = m.GetGauge().GetValue()
				}
			}
		}
	}
	gpuSec, costs := series["paddle_project_month_gpu_seconds"], series["paddle_project_month_cost"]
	var sum float64
	for _, row := range r.Rows {
		p := row.Key["project"]
		want := math.Round(row.GPUHours*3600*100) / 100
		if gpuSec[p] != want || costs[p] != *row.Cost {
			t.Errorf("%s: /metrics says project %s used %v GPU-seconds, %v CNY; the report %v GPU-seconds, %v CNY",
				where, p, gpuSec[p], costs[p], want, *row.Cost)
		}
		sum += gpuSec[p]
		delete(gpuSec, p)
	}
	for p, v := range gpuSec {
		if v != 0 {
			t.Errorf("%s: /metrics says project %s used %v GPU-seconds, the report has no row", where, p, v)
		}
	}
	if math.Abs(sum-r.Total.GPUHours*3600) > 3600*microTol(len(r.Rows))+0.005*float64(len(r.Rows)) {
		t.Errorf("%s: /metrics' month series add up to %v GPU-seconds, the report's total %v", where, sum, r.Total.GPUHours*3600)
	}
}
