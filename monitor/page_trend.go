package monitor

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/report"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
)

// Month over month: the page shows beside each project the previous
// month's cost (GPU-hours without prices) and the change, and a chart of
// the last twelve months' cost per project, an SVG written here (no
// script).

// trendMonths is how many months the chart covers, the page's month last.
const trendMonths = 12

// trendColors are the chart's project colours (the largest projects of
// the year first); the rest are "other".
var trendColors = []string{"#3b7dd8", "#e07b39", "#3aa57a", "#b5489c", "#c9a227", "#5a6b7d"}

// amount is what the page compares month over month: cost with prices,
// GPU-hours without.
func amount(f report.Figures, priced bool) float64 {
	if priced {
		if f.Cost == nil {
			return 0
		}
		return *f.Cost
	}
	return f.GPUHours
}

// pageRow is a row of the main table: the project's figures, its previous
// month's amount and the change.
type pageRow struct {
	report.Row
	Project      string
	Prev, Change string
}

// compared returns the main table's rows: each row of rep with the
// previous month's amount of its project (prev) and the change.
func compared(rep, prev *report.Report, priced bool) []pageRow {
	before := map[string]float64{}
	for _, r := range prev.Rows {
		before[r.Key["project"]] = amount(r.Figures, priced)
	}
	format := significant
	if priced {
		format = func(x float64) string { return strconv.FormatFloat(x, 'f', 2, 64) }
	}
	var out []pageRow
	for _, r := range rep.Rows {
		p := r.Key["project"]
		row := pageRow{Row: r, Project: p, Prev: "–", Change: "new"}
		if b, ok := before[p]; ok {
			row.Prev = format(b)
			row.Change = change(amount(r.Figures, priced), b)
		}
		out = append(out, row)
	}
	return out
}

// change writes now against before as a signed percentage ("+12 %",
// "−40 %", "0 %"); above 999 % as ">999 %".
func change(now, before float64) string {
	if before == 0 {
		if now == 0 {
			return "0 %"
		}
		return "new"
	}
	c := (now - before) / before * 100
	switch {
	case c > 999:
		return ">+999 %"
	case math.Round(c) == 0:
		return "0 %"
	case c > 0:
		return "+" + strconv.FormatFloat(c, 'f', 0, 64) + " %"
	}
	return "−" + strconv.FormatFloat(-c, 'f', 0, 64) + " %"
}

// trendChart is the twelve months' chart: one stacked bar per month, a
// segment per project.
type trendChart struct {
	Title         string
	Width, Height int
	LabelY        int // the months' labels' baseline
	Bars          []trendBar
	Legend        []trendLegend
	Axis          []trendTick
}

type trendBar struct {
	X, LabelX int
	Label     string // "Nov", "Dec 2025"
	Total     string
	TotalY    int
	Segments  []trendSegment
}

type trendSegment struct {
	Y, Height int
	Color     string
	Title     string
}

type trendLegend struct {
	X, Y  int
	Color string
	Name  string
}

type trendTick struct {
	Y     int
	Label string
}

// Geometry of the chart (SVG user units).
const (
	trendLeft   = 70
	trendTop    = 28
	trendPlot   = 220 // height of the bars' area
	trendBarW   = 44
	trendStep   = 64
	trendBottom = 40 // month labels
)

// trend draws the chart of reps (oldest first).
func trend(reps []*report.Report, priced bool, currency string) trendChart {
	// Projects by their total over the months, largest first.
	totals := map[string]float64{}
	for _, r := range reps {
		for _, row := range r.Rows {
			totals[row.Key["project"]] += amount(row.Figures, priced)
		}
	}
	projects := slices.SortedFunc(func(yield func(string) bool) {
		for p := range totals {
			if !yield(p) {
				return
			}
		}
	}, func(a, b string) int {
		if totals[a] != totals[b] {
			if totals[a] > totals[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	named := projects
	if len(projects) > len(trendColors) {
		named = projects[:len(trendColors)-1]
	}
	color := func(p string) (string, string) {
		if i := slices.Index(named, p); i >= 0 {
			return trendColors[i], p
		}
		return trendColors[len(trendColors)-1], "other"
	}
	unit := "GPU-hours"
	format := significant
	if priced {
		unit = "cost (" + currency + ")"
		format = func(x float64) string { return strconv.FormatFloat(x, 'f', 0, 64) }
	}
	top := 0.0
	for _, r := range reps {
		top = max(top, amount(r.Total, priced))
	}
	minStep := 0.0
	if priced {
		minStep = 1 // whole units of money once the top reaches one
	}
	ticks, scale := axisTicks(top, minStep)
	c := trendChart{Title: "Monthly " + unit + " per project, the last 12 months",
		Width: trendLeft + len(reps)*trendStep + 10}
	for _, v := range ticks {
		y := trendTop + trendPlot
		if scale > 0 {
			y -= int(math.Round(float64(trendPlot) * v / scale))
		}
		step := 0.0
		if len(ticks) > 1 {
			step = ticks[1]
		}
		c.Axis = append(c.Axis, trendTick{Y: y, Label: tickLabel(v, step)})
	}
	for i, r := range reps {
		x := trendLeft + i*trendStep + (trendStep-trendBarW)/2
		label := r.From.Format("Jan")
		if i == 0 || r.From.Month() == time.January {
			label = r.From.Format("Jan ’06") // the year where it starts or changes
		}
		b := trendBar{X: x, LabelX: x + trendBarW/2, Label: label}
		y := float64(trendTop + trendPlot)
		acc := map[string]float64{}
		var order []string
		for _, row := range r.Rows {
			_, name := color(row.Key["project"])
			if _, seen := acc[name]; !seen {
				order = append(order, name)
			}
			acc[name] += amount(row.Figures, priced)
		}
		for _, name := range order {
			v := acc[name]
			if v <= 0 || scale == 0 {
				continue
			}
			hgt := float64(trendPlot) * v / scale
			y -= hgt
			col, _ := color(name)
			if name == "other" {
				col = trendColors[len(trendColors)-1]
			}
			b.Segments = append(b.Segments, trendSegment{Y: int(math.Round(y)), Height: max(int(math.Round(hgt)), 1), Color: col,
				Title: fmt.Sprintf("%s, %s: %s", name, r.From.Format("January 2006"), format(v))})
		}
		t := amount(r.Total, priced)
		b.Total, b.TotalY = format(t), int(math.Round(y))-4
		if t == 0 {
			b.Total = ""
		}
		c.Bars = append(c.Bars, b)
	}
	legend := slices.Clone(named)
	if len(projects) > len(named) {
		legend = append(legend, "other")
	}
	for i, p := range legend {
		col, _ := color(p)
		if p == "other" {
			col = trendColors[len(trendColors)-1]
		}
		c.Legend = append(c.Legend, trendLegend{X: trendLeft + i*140, Y: trendTop + trendPlot + trendBottom + 6, Color: col, Name: shortName(p, 16)})
	}
	c.Height = trendTop + trendPlot + trendBottom + 24
	c.LabelY = trendTop + trendPlot + 18
	return c
}

func shortName(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// gpusText says what GPUs a running task holds, as a person reads it:
// whole GPUs as a count, a MIG instance by its profile, a share of a GPU
// as the share ("2", "1g.10gb", "0.25", "1 + 3g.71gb").
func gpusText(t store.OpenTask) string {
	whole := t.GPUCount - int64(len(t.GPUs))
	var parts []string
	for _, g := range t.GPUs {
		switch {
		case g.Profile != "":
			parts = append(parts, g.Profile)
		case g.Share > 0 && g.Share < 1:
			parts = append(parts, strconv.FormatFloat(g.Share, 'f', -1, 64))
		default:
			whole++
		}
	}
	if whole > 0 || len(parts) == 0 {
		parts = append([]string{strconv.FormatInt(max(whole, 0), 10)}, parts...)
	}
	return strings.Join(parts, " + ")
}
