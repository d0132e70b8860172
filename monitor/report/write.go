package report

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/csvout"
)

// Formats a report is written in.
var Formats = []string{"table", "csv", "json"}

// Write writes r in format ("table", "csv" or "json").
func Write(w io.Writer, r *Report, format string) error {
	switch format {
	case "", "table":
		return WriteTable(w, r)
	case "csv":
		return WriteCSV(w, r)
	case "json":
		return WriteJSON(w, r)
	}
	return badQuery("format", "format %q is not one of %s", format, strings.Join(Formats, ", "))
}

// WriteJSON writes r as one indented JSON object and a newline.
//
// A report that carries adjustments also says what the month bills
// ("billed": the total plus the adjustments, MONITOR.md 20.13).
func WriteJSON(w io.Writer, r *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if b := r.Billed(); b != nil {
		return enc.Encode(struct {
			*Report
			Billed *Billed `json:"billed"`
		}{r, b})
	}
	return enc.Encode(r)
}

// columns are the figures' names in CSV and table order: energy_kwh
// always; cost, energy_cost and co2_kg only with prices (their factors are
// the prices file's); then, per metric, its mean and its task count.
func columns(priced bool, metrics []string) []string {
	c := []string{"tasks", "completed_tasks", "failed_tasks", "gate_failed_tasks", "open_tasks", "gpu_hours",
		"failed_gpu_hours", "idle_gpu_hours", "util_mean", "waste_share",
		"duration_est_hours", "duration_actual_hours", "queue_wait_mean_seconds", "queue_wait_max_seconds"}
	if priced {
		c = append(c, "cost")
	}
	c = append(c, "energy_kwh")
	if priced {
		c = append(c, "energy_cost", "co2_kg")
	}
	for _, m := range metrics {
		c = append(c, "metric_"+m+"_mean", "metric_"+m+"_tasks")
	}
	return c
}

// values are f's cells; table (for a terminal) writes waste_share as a
// percentage and a null as "-", CSV leaves a null cell empty.
func (f Figures) values(priced bool, table bool, metrics []string) []string {
	opt := func(x *float64) string {
		switch {
		case x != nil:
			return num(*x)
		case table:
			return "-"
		}
		return ""
	}
	v := []string{
		strconv.FormatInt(f.Tasks, 10), strconv.FormatInt(f.CompletedTasks, 10),
		strconv.FormatInt(f.FailedTasks, 10), strconv.FormatInt(f.GateFailedTasks, 10),
		strconv.FormatInt(f.OpenTasks, 10),
		num(f.GPUHours), num(f.FailedGPUHours), num(f.IdleGPUHours), opt(f.UtilMean),
	}
	if table {
		if f.WasteShare == nil {
			v = append(v, "-")
		} else {
			v = append(v, strconv.FormatFloat(*f.WasteShare*100, 'f', 1, 64)+" %")
		}
	} else {
		v = append(v, opt(f.WasteShare))
	}
	v = append(v, num(f.DurationEstHours), num(f.DurationActualHours), opt(f.QueueWaitMeanSeconds), opt(f.QueueWaitMaxSeconds))
	if priced {
		v = append(v, opt(f.Cost))
	}
	v = append(v, opt(f.EnergyKWh))
	if priced {
		v = append(v, opt(f.EnergyCost), opt(f.CO2Kg))
	}
	for _, name := range metrics {
		m := f.Metrics[name]
		v = append(v, opt(m.Mean), strconv.FormatInt(m.Tasks, 10))
	}
	return v
}

// num writes a figure the shortest way that reads back to the same float.
func num(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }

// WriteCSV writes a header line and one line per row (no total): the key
// columns in the order of By, then the figures; an empty cell is a null.
// No cost, energy_cost or co2_kg column without prices. Key cells are text
// a spreadsheet must not run: csvout writes them under the formula rule
// (a GPU model is free text from NVML). Figures stay numbers. A month
// that carries late data of closed months ends each line with
// adjustment_of and adjustment_reason, and lists every adjusted task
// after the rows (adjustmentLines).
func WriteCSV(w io.Writer, r *Report) error {
	priced := r.Currency != nil
	cw := csvout.NewWriter(w)
	budgeted := r.budgeted()
	head := append(append([]string{}, r.By...), columns(priced, r.Metrics)...)
	if budgeted {
		head = append(head, budgetColumns...)
	}
	if r.Observed() {
		head = append(head, billingColumns...)
	}
	adjusted := len(r.Adjustments) > 0
	if adjusted {
		head = append(head, adjustmentColumns...)
	}
	if err := cw.Write(head); err != nil {
		return err
	}
	for _, row := range r.Rows {
		rec := make([]string, 0, len(head))
		for _, k := range r.By {
			rec = append(rec, row.Key[k])
		}
		rec = append(rec, row.values(priced, false, r.Metrics)...)
		if budgeted {
			rec = append(rec, row.Budget.values()...)
		}
		if r.Observed() {
			rec = append(rec, row.billingValues()...)
		}
		if adjusted {
			rec = append(rec, "", "")
		}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	for _, rec := range r.adjustmentLines(head) {
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// budgetColumns are the CSV's columns of a row's budget, after the
// figures, in a report where some row has one.
var budgetColumns = []string{"budget_kind", "budget_limit", "budget_used", "budget_used_share", "budget_forecast", "budget_forecast_share"}

// budgeted says whether some row has a budget.
func (r *Report) budgeted() bool {
	for _, row := range r.Rows {
		if row.Budget != nil {
			return true
		}
	}
	return false
}

// values are the budget's CSV cells; empty for a row without one.
func (b *BudgetFigures) values() []string {
	if b == nil {
		return make([]string, len(budgetColumns))
	}
	opt := func(x *float64) string {
		if x == nil {
			return ""
		}
		return num(*x)
	}
	return []string{b.Kind, num(b.Limit), num(b.Used), opt(b.UsedShare), num(b.Forecast), opt(b.ForecastShare)}
}

// billingColumns are the CSV's billing columns (docs/cost.md, "Two
// bases"), after the figures and the budget, in a report whose window a
// node report covered.
var billingColumns = []string{"declared_gpu_hours", "observed_gpu_hours", "undeclared_gpu_hours", "billing_basis"}

// billingValues are the row's billing cells.
func (f Figures) billingValues() []string {
	opt := func(x *float64) string {
		if x == nil {
			return ""
		}
		return num(*x)
	}
	return []string{opt(f.DeclaredGPUHours), opt(f.ObservedGPUHours), opt(f.UndeclaredGPUHours), f.BillingBasis}
}

// writeAdjustments adds the table's lines of late data of closed months.
func writeAdjustments(w io.Writer, r *Report) {
	for _, a := range r.Adjustments {
		cost := ""
		if a.Cost != nil {
			cost = ", cost " + strconv.FormatFloat(*a.Cost, 'f', 2, 64)
		}
		fmt.Fprintf(w, "adjustment of %s (closed; late data counted here), project %s: %s GPU-hours%s, %d task(s)\n",
			a.AdjustmentOf, a.Project, num(a.GPUHours), cost, len(a.Tasks))
	}
	if b := r.Billed(); b != nil {
		cost := ""
		if b.Cost != nil {
			cost = ", cost " + strconv.FormatFloat(*b.Cost, 'f', 2, 64)
		}
		fmt.Fprintf(w, "billed this month (total + adjustments): %s GPU-hours%s\n", num(b.GPUHours), cost)
	}
}
