package monitor

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/access"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/accounts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/report"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
)

//go:embed page.html
var pageFS embed.FS

var pageTemplate = template.Must(template.New("page.html").Funcs(template.FuncMap{
	"hours": significant,
	"money": func(x *float64) string {
		if x == nil {
			return ""
		}
		return strconv.FormatFloat(*x, 'f', 2, 64)
	},
	"deref": func(x *float64) float64 { return *x },
	// opt writes a figure that may be null (no energy reported): "–".
	"opt": func(x *float64) string {
		if x == nil {
			return "–"
		}
		return significant(*x)
	},
	// budgetValue writes a budget's limit or figure in its unit.
	"budgetValue": func(kind string, v float64) string {
		if kind == report.BudgetCost {
			return strconv.FormatFloat(v, 'f', 2, 64)
		}
		return significant(v) + " GPU-h"
	},
	"percent": func(x *float64) string {
		switch {
		case x == nil:
			return "–"
		case *x*100 > 999:
			return ">999 %"
		}
		return strconv.FormatFloat(*x*100, 'f', 0, 64) + " %"
	},
}).ParseFS(pageFS, "page.html"))

// significant formats x with at least three significant digits (one
// decimal at the least), so that small rows do not all read "0.0" while
// their bars differ: 1234.5, 12.3, 1.23, 0.0123.
func significant(x float64) string {
	decimals := 1
	if a := math.Abs(x); a > 0 && a < 100 {
		decimals = max(1, 2-int(math.Floor(math.Log10(a))))
	}
	return strconv.FormatFloat(x, 'f', decimals, 64)
}

// The page shows at most this many running tasks (the API lists them all).
const pageRunningMax = 100

type pageBar struct {
	Label      string
	Y, Width   int
	TextX      int
	Value      string
	LabelShort string
}

type pageTask struct {
	TaskID, Name, Project, Owner, Hostname string
	// GPUs is what it holds: a count of whole GPUs, MIG profiles, shares.
	GPUs              string
	Started, LastSeen string
	// NoEnd: it reported nothing since its start (exec mode).
	NoEnd bool
}

// pageIdle is one task of "Idle now".
type pageIdle struct {
	TaskID, Name, Project, Owner string
	GPUs                         int64
	IdleFor                      string
	Cost                         *float64
}

type pageData struct {
	Idle              []pageIdle
	IdleMore          bool
	Budgeted          bool
	Month, Prev, Next string
	MonthName         string
	Report            *report.Report
	Currency          string
	Priced            bool
	// EnergyPriced and CO2 say the prices file has the energy factors:
	// the energy cost and CO2 columns are shown then.
	EnergyPriced, CO2 bool
	Bars              []pageBar
	ChartHeight       int
	// Rows are the main table's: each project with its previous month's
	// amount (PrevMonthName's) and the change; Trend the twelve months.
	Rows          []pageRow
	PrevMonthName string
	// Partial says that the month is not over: its change is against all
	// of last month (last month's report), so it is partial.
	Partial string
	Trend   trendChart
	// ByLabel is the month by the extra label Label (by=label:NAME), nil
	// without one.
	ByLabel     *report.Report
	Label       string
	CSV         []struct{ Label, URL string }
	JSON        string
	Running     []pageTask
	RunningMore int
	NoEnd       int // running tasks that reported nothing since their start
	Now         string
	// Fleet is the ledger's section (page_fleet.go); nil without node
	// reports in the month.
	Fleet *pageFleet
	// Finance is who closed the month and why, the statements per
	// project and the FOCUS link (page_finance.go); nil without books.
	Finance *pageFinance
}

// page answers GET /: one month's GPU-hours and cost per project as a
// table and a bar chart (?month=YYYY-MM, default this month, UTC), the
// running tasks, and links to the CSV. No script, no external asset.
func (h *reports) page(w http.ResponseWriter, r *http.Request, scope *access.Scope) {
	now := h.cfg.Now().UTC()
	win := facts.Month(now)
	if m := r.URL.Query().Get("month"); m != "" {
		var err error
		if win, err = facts.ParseMonth("month", m); err != nil {
			h.api.fail(w, http.StatusBadRequest, badParameter(err))
			return
		}
	}
	// metric (repeated) is not shown on the page itself: it is kept in the
	// CSV and JSON links, so a link to the page can carry the metrics a
	// team reads beside cost.
	metrics, err := facts.ParseMetrics(r.URL.Query()["metric"])
	if err != nil {
		h.api.fail(w, http.StatusBadRequest, badParameter(err))
		return
	}
	// by=label:NAME adds a table of the month by that extra label.
	var byLabel []string
	if v := r.URL.Query().Get("by"); v != "" {
		keys, err := facts.ParseKeys(v)
		_, isLabel := facts.LabelName(v)
		if err == nil && (len(keys) != 1 || !isLabel) {
			err = fmt.Errorf("by: the page groups by one extra label, label:NAME (got %q)", v)
		}
		if err != nil {
			h.api.fail(w, http.StatusBadRequest, badParameter(err))
			return
		}
		byLabel = keys
	}
	// The Fleet section's reads (the ledger and its discrepancies) are
	// their own: they run beside the month's reports, not after them.
	type fleetResult struct {
		f   *pageFleet
		err error
	}
	fleetDone := make(chan fleetResult, 1)
	go func() {
		f, err := h.fleet(r.Context(), win, scope, now)
		fleetDone <- fleetResult{f, err}
	}()
	rep, err := h.acc.Report(r.Context(), accounts.Request{Window: win, By: []string{"project"}, Scope: scope, Now: now})
	if err != nil {
		h.api.storeFailed(w, r, "page report", err)
		return
	}
	open, err := h.cfg.Source.OpenTasks(r.Context(), now.Add(-h.cfg.OpenTTL).Unix(), 0)
	if err != nil {
		h.api.storeFailed(w, r, "page open tasks", err)
		return
	}

	idle, more, err := h.cfg.Source.Tasks(r.Context(), store.Filter{State: "idle", IdleFor: int64(DefaultIdleFor / time.Second),
		Limit: pageRunningMax}, scope)
	if err != nil {
		h.api.storeFailed(w, r, "page idle tasks", err)
		return
	}

	d := pageData{
		IdleMore:  more != "",
		Budgeted:  h.cfg.Budgets != nil,
		Month:     win.From.Format("2006-01"),
		Prev:      win.From.AddDate(0, -1, 0).Format("2006-01"),
		Next:      win.To.Format("2006-01"),
		MonthName: win.From.Format("January 2006"),
		Report:    rep,
		Priced:    rep.Currency != nil,
		Now:       now.Format("2006-01-02 15:04 UTC"),
	}
	if d.Priced {
		d.Currency = *rep.Currency
		d.EnergyPriced, d.CO2 = h.cfg.Prices.PricePerKWh != nil, h.cfg.Prices.CO2KgPerKWh != nil
	}
	if byLabel != nil {
		d.Label = strings.TrimPrefix(byLabel[0], facts.LabelPrefix)
		if d.ByLabel, err = h.acc.Report(r.Context(), accounts.Request{Window: win, By: byLabel, Scope: scope, Now: now}); err != nil {
			h.api.storeFailed(w, r, "page report", err)
			return
		}
	}
	// A closed month's figures are its statement's; each month has the
	// inputs of the page's own month's report: without the namespace
	// mapping a project billed only for undeclared use last month was
	// shown as "new" (issue 36). The page's own month is rep, not read
	// again.
	months, err := h.acc.Months(r.Context(), win, trendMonths, scope, now, rep)
	if err != nil {
		h.api.storeFailed(w, r, "page report", err)
		return
	}
	d.Rows = compared(rep, months[len(months)-2], d.Priced)
	d.PrevMonthName = months[len(months)-2].From.Format("January")
	if now.Before(win.To) && !now.Before(win.From) {
		d.Partial = fmt.Sprintf("partial: day %d of %d, against all of %s", int(now.Sub(win.From).Hours()/24)+1,
			int(win.To.Sub(win.From).Hours()/24), d.PrevMonthName)
	}
	d.Trend = trend(months, d.Priced, d.Currency)
	fr := <-fleetDone
	if fr.err != nil {
		h.api.storeFailed(w, r, "page fleet", fr.err)
		return
	}
	d.Fleet = fr.f
	// Bars: one per project, the longest 420 px wide: cost with prices,
	// GPU-hours without.
	max := 0.0
	for _, row := range rep.Rows {
		max = maxf(max, amount(row.Figures, d.Priced))
	}
	for i, row := range rep.Rows {
		width := 0
		if max > 0 {
			width = int(420*amount(row.Figures, d.Priced)/max + 0.5)
		}
		label := row.Key["project"]
		short := label
		if len([]rune(short)) > 22 {
			short = string([]rune(short)[:21]) + "…"
		}
		value := significant(row.GPUHours) + " GPU-h"
		if d.Priced {
			value = strconv.FormatFloat(amount(row.Figures, true), 'f', 2, 64) + " " + d.Currency
		}
		d.Bars = append(d.Bars, pageBar{Label: label, LabelShort: short, Y: i * 28, Width: width,
			TextX: 170 + width + 6, Value: value})
	}
	d.ChartHeight = len(d.Bars)*28 + 4
	d.Finance = h.finance(r.Context(), win, rep)
	period := url.Values{"from": {win.From.Format(time.DateOnly)}, "to": {win.To.Format(time.DateOnly)}}
	for _, c := range []struct{ label, by string }{
		{"by project", "project"}, {"by project and owner", "project,owner"}, {"by GPU model", "model"},
		{"by project and pipeline step", "project,pipeline,step"}, {"by task (chargeback: one line per task)", report.TaskKey},
	} {
		v := url.Values{"from": period["from"], "to": period["to"], "by": {c.by}, "format": {"csv"}, "metric": metrics}
		d.CSV = append(d.CSV, struct{ Label, URL string }{c.label, "/v1/report?" + v.Encode()})
	}
	if byLabel != nil {
		v := url.Values{"from": period["from"], "to": period["to"], "by": byLabel, "format": {"csv"}, "metric": metrics}
		d.CSV = append(d.CSV, struct{ Label, URL string }{"by label " + d.Label, "/v1/report?" + v.Encode()})
	}
	if len(metrics) > 0 {
		period["metric"] = metrics
	}
	d.JSON = "/v1/report?" + period.Encode()
	for _, t := range idle {
		d.Idle = append(d.Idle, pageIdle{TaskID: t.TaskID, Name: t.TaskName, Project: t.Project, Owner: t.Owner,
			GPUs: t.GPUCount, IdleFor: idleFor(t), Cost: costSoFar(h.cfg.Prices, t)})
	}
	execTTL := h.cfg.ExecTTL
	if execTTL <= 0 {
		execTTL = DefaultExecTTL
	}
	for _, t := range alive(open, execTTL, now) {
		if !scope.Allows(t.Project, t.Owner) {
			continue
		}
		if len(d.Running) == pageRunningMax {
			d.RunningMore++
			continue
		}
		d.Running = append(d.Running, pageTask{TaskID: t.TaskID, Name: t.TaskName, Project: t.Project,
			Owner: t.Owner, Hostname: t.Hostname, GPUs: gpusText(t),
			Started:  time.Unix(t.StartTime, 0).UTC().Format("2006-01-02 15:04"),
			LastSeen: time.Unix(t.LastSeen, 0).UTC().Format("2006-01-02 15:04"),
			NoEnd:    NoEndReported(t)})
		if NoEndReported(t) {
			d.NoEnd++
		}
	}

	h.api.writePage(w, pageTemplate, d, "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; form-action 'self'")
}

// writePage answers with page t rendered from d, under the content
// security policy csp: nothing on a page loads from anywhere, and the
// policy says so to the browser. A template that fails is a 500, nothing
// of the page sent.
func (a *API) writePage(w http.ResponseWriter, t *template.Template, d any, csp string) {
	var b bytes.Buffer
	if err := t.Execute(&b, d); err != nil {
		a.fail(w, http.StatusInternalServerError, "rendering the page: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", csp)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Write(b.Bytes())
}

// idleFor writes how long a task has been idle (last seen − idle since)
// as hours and minutes.
func idleFor(t store.Task) string {
	if t.IdleSince == nil || t.LastSeen == nil {
		return ""
	}
	d := time.Duration(max(*t.LastSeen-*t.IdleSince, 0)) * time.Second
	return fmt.Sprintf("%d h %02d min", int(d.Hours()), int(d.Minutes())%60)
}

func maxf(a, b float64) float64 {
	if a > b {
		return a
	}
	return b
}
