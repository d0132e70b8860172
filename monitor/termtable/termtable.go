// Package termtable lays out tables for a terminal: a report's or a
// ledger's rows, described once by their columns.
//
// Guarantees: with a width limit (Options.Width, 120 by default) and no
// explicit choice of columns, every line of the table fits the limit when
// the key columns alone do: a key cell longer than Options.MaxKey runes is
// shortened with "…", and the default columns that still do not fit are
// left out from the right, their names returned so the caller can say so.
// Columns named with Options.Columns, or all of them with Options.Wide,
// are never left out. Cells are laid out by rune count; the bytes written
// do not depend on anything but the table and the options.
package termtable

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Defaults of Options.
const (
	DefaultWidth  = 120
	DefaultMaxKey = 32
	gap           = 2 // spaces between columns
)

// ErrUnknownColumn marks a column name Options.Columns asked for that the
// table does not have.
var ErrUnknownColumn = errors.New("unknown column")

// Column describes one column of rows of type R.
type Column[R any] struct {
	// Name is the header, the name the JSON form of the row uses.
	Name string
	// Key columns come first, left-aligned, always shown; their cells are
	// shortened to Options.MaxKey runes with "…".
	Key bool
	// Priority places a figure column among the default ones: 1 first,
	// then 2, …; the highest is left out first when a line is too long.
	// 0: shown only with Options.Wide or when named.
	Priority int
	// Cell formats the row's value for the table.
	Cell func(R) string
}

// Options choose what is shown.
type Options struct {
	// Width is the longest line wanted (0: DefaultWidth; <0: no limit).
	Width int
	// MaxKey is the longest key cell in runes (0: DefaultMaxKey).
	MaxKey int
	// Wide shows every column, in the declared order, none left out.
	Wide bool
	// Columns names the figure columns to show, in this order (key
	// columns are always shown, first); none is left out.
	Columns []string
}

// Layout is what Write showed.
type Layout struct {
	// Dropped names the default columns left out to fit Width, in the
	// declared order.
	Dropped []string
}

// Select returns the columns shown with opt before any is left out for
// width: the key columns, then the named ones, every one (Wide), or the
// default ones by priority. A name that is not a column is an error
// wrapping ErrUnknownColumn that names it and the allowed ones.
func Select[R any](cols []Column[R], opt Options) ([]Column[R], error) {
	var out []Column[R]
	for _, c := range cols {
		if c.Key {
			out = append(out, c)
		}
	}
	switch {
	case len(opt.Columns) > 0:
		for _, name := range opt.Columns {
			i := slices.IndexFunc(cols, func(c Column[R]) bool { return c.Name == name })
			if i < 0 {
				return nil, fmt.Errorf("%w %q: allowed: %s", ErrUnknownColumn, name, strings.Join(Names(cols), ", "))
			}
			if !cols[i].Key && !slices.ContainsFunc(out, func(c Column[R]) bool { return c.Name == name }) {
				out = append(out, cols[i])
			}
		}
	case opt.Wide:
		for _, c := range cols {
			if !c.Key {
				out = append(out, c)
			}
		}
	default:
		var figs []Column[R]
		for _, c := range cols {
			if !c.Key && c.Priority > 0 {
				figs = append(figs, c)
			}
		}
		slices.SortStableFunc(figs, func(a, b Column[R]) int { return a.Priority - b.Priority })
		out = append(out, figs...)
	}
	return out, nil
}

// Names returns the columns' names, in the declared order.
func Names[R any](cols []Column[R]) []string {
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.Name
	}
	return names
}

// Write writes the header and one line per row of the columns opt
// selects (see Select), figures right-aligned, keys left-aligned, each
// line without trailing spaces.
func Write[R any](w io.Writer, cols []Column[R], rows []R, opt Options) (Layout, error) {
	shown, err := Select(cols, opt)
	if err != nil {
		return Layout{}, err
	}
	maxKey := opt.MaxKey
	if maxKey <= 0 {
		maxKey = DefaultMaxKey
	}
	cells := make([][]string, len(rows)+1)
	widths := make([]int, len(shown))
	for j, c := range shown {
		cells[0] = append(cells[0], c.Name)
		widths[j] = utf8.RuneCountInString(c.Name)
	}
	for i, r := range rows {
		for j, c := range shown {
			v := c.Cell(r)
			if c.Key {
				v = Shorten(v, maxKey)
			}
			cells[i+1] = append(cells[i+1], v)
			widths[j] = max(widths[j], utf8.RuneCountInString(v))
		}
	}
	n := len(shown)
	var lay Layout
	if limit := width(opt.Width); limit > 0 && len(opt.Columns) == 0 && !opt.Wide {
		for n > 0 && !shown[n-1].Key && lineWidth(widths[:n]) > limit {
			n--
		}
		for _, c := range cols {
			if slices.ContainsFunc(shown[n:], func(d Column[R]) bool { return d.Name == c.Name }) {
				lay.Dropped = append(lay.Dropped, c.Name)
			}
		}
	}
	var b strings.Builder
	for _, line := range cells {
		b.Reset()
		for j := range n {
			if j > 0 {
				b.WriteString(strings.Repeat(" ", gap))
			}
			pad := strings.Repeat(" ", widths[j]-utf8.RuneCountInString(line[j]))
			if shown[j].Key {
				b.WriteString(line[j])
				if j < n-1 {
					b.WriteString(pad)
				}
			} else {
				b.WriteString(pad + line[j])
			}
		}
		b.WriteByte('\n')
		if _, err := io.WriteString(w, strings.TrimRight(b.String(), " \n")+"\n"); err != nil {
			return lay, err
		}
	}
	return lay, nil
}

func width(w int) int {
	if w == 0 {
		return DefaultWidth
	}
	return max(w, 0)
}

func lineWidth(widths []int) int {
	total := 0
	for i, w := range widths {
		if i > 0 {
			total += gap
		}
		total += w
	}
	return total
}

// Shorten returns s cut to at most n runes, the last of them "…" when
// it was cut.
func Shorten(s string, n int) string {
	if n <= 0 || utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// Money writes an amount with 2 decimals.
func Money(x float64) string { return strconv.FormatFloat(x, 'f', 2, 64) }

// Hours writes a figure with 3 significant digits (all the integer digits
// of one of 1000 or more): 0.0500, 1.25, 12.3, 123, 4567.
func Hours(x float64) string {
	if x == 0 || math.IsNaN(x) || math.IsInf(x, 0) {
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	// Rounded to 3 significant digits first, so 9.996 is 10.0, not 10.00.
	v, _ := strconv.ParseFloat(strconv.FormatFloat(x, 'g', 3, 64), 64)
	if math.Abs(v) >= 100 {
		return strconv.FormatFloat(x, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'f', 2-int(math.Floor(math.Log10(math.Abs(v)))), 64)
}

// Percent writes a share (0.371) as a percentage with one decimal
// ("37.1 %"); above 999 % it is ">999 %".
func Percent(share float64) string {
	if share*100 > 999 {
		return ">999 %"
	}
	return strconv.FormatFloat(share*100, 'f', 1, 64) + " %"
}
