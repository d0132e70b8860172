package report

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/termtable"
)

// The table for a terminal (termtable): by default it fits 120 columns —
// the key columns, then tasks, gpu_hours, cost, waste_share, util_mean
// and, when some row has a budget, budget_used_share; the last of these
// are left out, right to left, when a line would still be too long, and a
// note under the table says which. Every column of the CSV can be named
// (TableOptions.Columns) or all shown (TableOptions.Wide). Money has 2
// decimals, hours 3 significant digits, shares are percentages: in the
// table only, JSON and CSV keep full precision.

// TableOptions choose the table's width and columns.
type TableOptions = termtable.Options

// tableRow is one line of the table: a row, or the total (Key nil).
type tableRow struct {
	Key    map[string]string
	Total  bool
	F      Figures
	Budget *BudgetFigures
}

// defaultPriority places the figure columns shown by default.
var defaultPriority = map[string]int{
	"tasks": 1, "gpu_hours": 2, "cost": 3, "waste_share": 4, "util_mean": 5, "budget_used_share": 6,
}

// hourColumns are written with 3 significant digits, moneyColumns with 2
// decimals.
var (
	hourColumns  = []string{"gpu_hours", "failed_gpu_hours", "idle_gpu_hours", "duration_est_hours", "duration_actual_hours"}
	moneyColumns = []string{"cost", "energy_cost"}
)

// TableColumns are the table's columns for r, keys first, then every
// figure column of the CSV in its order.
func TableColumns(r *Report) []termtable.Column[tableRow] {
	priced := r.Currency != nil
	var cols []termtable.Column[tableRow]
	for i, k := range r.By {
		cols = append(cols, termtable.Column[tableRow]{Name: k, Key: true, Cell: func(t tableRow) string {
			switch {
			case t.Total && i == 0:
				return "total"
			case t.Total:
				return ""
			case t.Key[k] == "":
				return "-"
			}
			return t.Key[k]
		}})
	}
	for i, name := range columns(priced, r.Metrics) {
		cell := func(t tableRow) string { return t.F.values(priced, true, r.Metrics)[i] }
		switch {
		case slices.Contains(hourColumns, name):
			cell = func(t tableRow) string { return termtable.Hours(figure(t.F, name)) }
		case slices.Contains(moneyColumns, name):
			cell = func(t tableRow) string { return optional(pointer(t.F, name), termtable.Money) }
		case name == "waste_share":
			cell = func(t tableRow) string { return optional(t.F.WasteShare, termtable.Percent) }
		case name == "util_mean":
			cell = func(t tableRow) string { return optional(t.F.UtilMean, oneDecimal) }
		}
		prio := defaultPriority[name]
		if strings.HasPrefix(name, "metric_") {
			// The metrics asked for come after the default figures, the
			// first to be left out.
			prio = len(defaultPriority) + 1 + i
		}
		cols = append(cols, termtable.Column[tableRow]{Name: name, Priority: prio, Cell: cell})
	}
	if r.Observed() {
		// The billing columns (a window a node report covered): with
		// --wide or --columns.
		for _, c := range []struct {
			name string
			cell func(f Figures) string
		}{
			{"declared_gpu_hours", func(f Figures) string { return optional(f.DeclaredGPUHours, termtable.Hours) }},
			{"observed_gpu_hours", func(f Figures) string { return optional(f.ObservedGPUHours, termtable.Hours) }},
			{"undeclared_gpu_hours", func(f Figures) string { return optional(f.UndeclaredGPUHours, termtable.Hours) }},
			{"billing_basis", func(f Figures) string { return f.BillingBasis }},
		} {
			cols = append(cols, termtable.Column[tableRow]{Name: c.name, Cell: func(t tableRow) string { return c.cell(t.F) }})
		}
	}
	if r.budgeted() {
		amount := func(b *BudgetFigures, x float64) string {
			if b.Kind == "cost" {
				return termtable.Money(x)
			}
			return termtable.Hours(x)
		}
		budget := func(f func(b *BudgetFigures) string) func(tableRow) string {
			return func(t tableRow) string {
				if t.Budget == nil {
					return "-"
				}
				return f(t.Budget)
			}
		}
		for _, c := range []struct {
			name string
			cell func(b *BudgetFigures) string
		}{
			{"budget_kind", func(b *BudgetFigures) string { return b.Kind }},
			{"budget_limit", func(b *BudgetFigures) string { return amount(b, b.Limit) }},
			{"budget_used", func(b *BudgetFigures) string { return amount(b, b.Used) }},
			{"budget_used_share", func(b *BudgetFigures) string { return optional(b.UsedShare, termtable.Percent) }},
			{"budget_forecast", func(b *BudgetFigures) string { return amount(b, b.Forecast) }},
			{"budget_forecast_share", func(b *BudgetFigures) string { return optional(b.ForecastShare, termtable.Percent) }},
		} {
			cols = append(cols, termtable.Column[tableRow]{Name: c.name, Priority: defaultPriority[c.name], Cell: budget(c.cell)})
		}
	}
	return cols
}

// figure is an hour column's value.
func figure(f Figures, name string) float64 {
	switch name {
	case "gpu_hours":
		return f.GPUHours
	case "failed_gpu_hours":
		return f.FailedGPUHours
	case "idle_gpu_hours":
		return f.IdleGPUHours
	case "duration_est_hours":
		return f.DurationEstHours
	}
	return f.DurationActualHours
}

// pointer is a money column's value.
func pointer(f Figures, name string) *float64 {
	if name == "cost" {
		return f.Cost
	}
	return f.EnergyCost
}

func optional(x *float64, format func(float64) string) string {
	if x == nil {
		return "-"
	}
	return format(*x)
}

func oneDecimal(x float64) string { return strconv.FormatFloat(x, 'f', 1, 64) }

// CheckColumns checks names for TableOptions.Columns against r's table:
// an unknown one is a *QueryError of "columns" that names it and the
// allowed ones.
func CheckColumns(r *Report, names []string) error {
	if _, err := termtable.Select(TableColumns(r), TableOptions{Columns: names}); err != nil {
		return badQuery("columns", "columns: %v", err)
	}
	return nil
}

// WriteTable writes r as a table that fits 120 columns (WriteTableWith
// with the default options).
func WriteTable(w io.Writer, r *Report) error { return WriteTableWith(w, r, TableOptions{}) }

// WriteTableWith writes an aligned table for a terminal: the window, one
// line per row and a total line, the columns opt selects, then what the
// table leaves out (columns left out for width, tasks with no end,
// unpriced GPU-hours) and each row's budget.
func WriteTableWith(w io.Writer, r *Report, opt TableOptions) error {
	priced := r.Currency != nil
	fmt.Fprintf(w, "GPU report %s to %s", r.From.Format(time.RFC3339), r.To.Format(time.RFC3339))
	if priced && *r.Currency != "" {
		fmt.Fprintf(w, ", cost in %s", *r.Currency)
	}
	fmt.Fprintln(w)
	if c := r.Closed; c != nil {
		fmt.Fprintf(w, "closed on %s (statement %s version %d): these figures do not move; --live recomputes them\n",
			c.ClosedAt.Format(time.RFC3339), c.Month, c.Version)
	}
	rows := make([]tableRow, 0, len(r.Rows)+1)
	for _, row := range r.Rows {
		rows = append(rows, tableRow{Key: row.Key, F: row.Figures, Budget: row.Budget})
	}
	rows = append(rows, tableRow{Total: true, F: r.Total})
	lay, err := termtable.Write(w, TableColumns(r), rows, opt)
	if err != nil {
		return badQuery("columns", "columns: %v", err)
	}
	if len(lay.Dropped) > 0 {
		width := opt.Width
		if width == 0 {
			width = termtable.DefaultWidth
		}
		fmt.Fprintf(w, "Too wide for %d columns, --wide shows: %s\n", width, strings.Join(lay.Dropped, ", "))
	}
	if n := r.Total.OpenTasks; n > 0 {
		fmt.Fprintf(w, "%d task(s) have no end (exec mode, or still running): counted up to their last heartbeat, or not at all.\n", n)
	}
	if u := r.Total.UnpricedGPUHours; u != nil && *u > 0 {
		fmt.Fprintf(w, "%s GPU-hours matched no price and no default: they cost 0 here.\n", termtable.Hours(*u))
	}
	for _, row := range r.Rows {
		if b := row.Budget; b != nil {
			amount := termtable.Hours
			if b.Kind == "cost" {
				amount = termtable.Money
			}
			fmt.Fprintf(w, "budget %s: %s %s of %s (%s), forecast %s (%s)\n", termtable.Shorten(row.Key["project"], termtable.DefaultMaxKey),
				b.Kind, amount(b.Used), amount(b.Limit), optional(b.UsedShare, termtable.Percent),
				amount(b.Forecast), optional(b.ForecastShare, termtable.Percent))
		}
	}
	if r.Observed() {
		t := r.Total
		fmt.Fprintf(w, "billed on the %s basis: %s GPU-hours declared, %s observed (attributed), %s undeclared charged to projects; gpu_hours and cost are what is billed.\n",
			t.BillingBasis, termtable.Hours(*t.DeclaredGPUHours), termtable.Hours(*t.ObservedGPUHours), termtable.Hours(*t.UndeclaredGPUHours))
	}
	writeAdjustments(w, r)
	if len(r.Metrics) > 0 {
		fmt.Fprintln(w, "metric_*_mean: the metric's mean over the completed tasks that ended in the window and reported it.")
	}
	_, err = fmt.Fprintln(w, "waste_share = (failed GPU-hours + idle GPU-hours of tasks that did not fail) / GPU-hours.")
	return err
}
