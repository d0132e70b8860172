package ledger

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/csvout"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/termtable"
)

// Write writes l in format: table, csv or json.
func Write(w io.Writer, l *Ledger, format string) error {
	switch format {
	case "", "table":
		return WriteTable(w, l, termtable.Options{})
	case "csv":
		return writeCSV(w, l)
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(l)
	}
	return fmt.Errorf("%w: format %q is not one of table, csv, json", ErrBadQuery, format)
}

// MarshalJSON writes the ledger as docs/cost.md shows it.
func (l *Ledger) MarshalJSON() ([]byte, error) {
	var cur any
	if l.Currency != "" || l.priced() {
		cur = l.Currency
	}
	rows := make([]map[string]any, len(l.Rows))
	for i, r := range l.Rows {
		m := l.figures(r.Key, &r.Figures)
		m["key"] = map[string]string{l.By: r.Key}
		rows[i] = m
	}
	return json.Marshal(struct {
		From     time.Time        `json:"from"`
		To       time.Time        `json:"to"`
		By       string           `json:"by"`
		Split    string           `json:"split"`
		Currency any              `json:"currency"`
		Rows     []map[string]any `json:"rows"`
		Total    map[string]any   `json:"total"`
	}{l.From.UTC(), l.To.UTC(), l.By, l.Split, cur, rows, l.figures("", &l.Total)})
}

func (l *Ledger) priced() bool { return l.Total.priced }

// figures are f's JSON fields: for --by state gpu_hours and cost; else
// capacity, the five states and the check, and their costs.
func (l *Ledger) figures(key string, f *Figures) map[string]any {
	m := map[string]any{}
	if l.By == ByState && f != &l.Total {
		for i, s := range States {
			if s == key {
				m["gpu_hours"] = round(f.States[i])
				m["cost"] = costOf(f.StateCosts[i])
			}
		}
		return m
	}
	if l.By == ByState {
		sum := 0.0
		for _, v := range f.States {
			sum += v
		}
		m["gpu_hours"] = round(sum)
		m["cost"] = costOf(f.CapacityCost)
		return m
	}
	m["capacity_gpu_hours"] = optRound(f.Capacity)
	m["check_gpu_hours"] = optRound(f.Check)
	m["capacity_cost"] = costOf(f.CapacityCost)
	for i, s := range States {
		m[s+"_gpu_hours"] = round(f.States[i])
		m[s+"_cost"] = costOf(f.StateCosts[i])
	}
	return m
}

func round(v float64) float64 { return float64(int64(v*1e6+copysign(0.5, v))) / 1e6 }

func copysign(x, s float64) float64 {
	if s < 0 {
		return -x
	}
	return x
}

func optRound(v *float64) any {
	if v == nil {
		return nil
	}
	return round(*v)
}

func costOf(v *float64) any {
	if v == nil {
		return nil
	}
	return float64(int64(*v*100+copysign(0.5, *v))) / 100
}

// columns of the table and CSV.
func (l *Ledger) columns() []string {
	if l.By == ByState {
		c := []string{"state", "gpu_hours"}
		if l.priced() {
			c = append(c, "cost")
		}
		return c
	}
	c := []string{l.By, "capacity_gpu_hours"}
	for _, s := range States {
		c = append(c, s+"_gpu_hours")
	}
	c = append(c, "check_gpu_hours")
	if l.priced() {
		c = append(c, "capacity_cost")
		for _, s := range States {
			c = append(c, s+"_cost")
		}
	}
	return c
}

func (l *Ledger) cells(key string, f *Figures, table bool) []string {
	m := l.figures(key, f)
	cols := l.columns()
	out := []string{key}
	for _, c := range cols[1:] {
		switch v := m[c].(type) {
		case nil:
			if table {
				out = append(out, "-")
			} else {
				out = append(out, "")
			}
		case float64:
			prec := 2
			if !table {
				prec = -1
			}
			out = append(out, strconv.FormatFloat(v, 'f', prec, 64))
		}
	}
	return out
}

func writeCSV(w io.Writer, l *Ledger) error {
	cw := csvout.NewWriter(w)
	cw.Write(l.columns())
	for i := range l.Rows {
		cw.Write(l.cells(l.Rows[i].Key, &l.Rows[i].Figures, false))
	}
	cw.Write(l.cells("total", &l.Total, false))
	cw.Flush()
	return cw.Error()
}

// tableRow is a line of the table: its key and figures.
type tableRow struct {
	key string
	f   *Figures
}

// TableColumns are the table's columns (termtable): the key, then the
// CSV's columns under their JSON names. Shown by default, in this order
// and left out from the right when a line would pass the width: the
// capacity, the five states, the check and the capacity's cost (by
// state: the GPU-hours and the cost); the states' costs with --wide or
// --columns.
func (l *Ledger) TableColumns() []termtable.Column[tableRow] {
	cols := l.columns()
	out := []termtable.Column[tableRow]{{Name: cols[0], Key: true, Cell: func(r tableRow) string { return r.key }}}
	for i, name := range cols[1:] {
		prio := i + 1
		if strings.HasSuffix(name, "_cost") && name != "capacity_cost" {
			prio = 0
		}
		money := name == "cost" || strings.HasSuffix(name, "_cost")
		out = append(out, termtable.Column[tableRow]{Name: name, Priority: prio, Cell: func(r tableRow) string {
			v, ok := l.figures(r.key, r.f)[name].(float64)
			switch {
			case !ok:
				return "-"
			case money:
				return termtable.Money(v)
			}
			return termtable.Hours(v)
		}})
	}
	return out
}

// WriteTable writes l as a table for a terminal that fits opt's width
// (120 columns by default; termtable), hours with 3 significant digits
// and money with 2 decimals, keys longer than 32 characters shortened
// with "…"; a line under it names the columns left out for width.
func WriteTable(w io.Writer, l *Ledger, opt termtable.Options) error {
	if _, err := fmt.Fprintf(w, "Ledger %s – %s by %s (split %s), GPU-hours%s\n\n", l.From.UTC().Format(time.RFC3339),
		l.To.UTC().Format(time.RFC3339), l.By, l.Split, currencyNote(l)); err != nil {
		return err
	}
	rows := make([]tableRow, 0, len(l.Rows)+1)
	for i := range l.Rows {
		key := l.Rows[i].Key
		if key == "" {
			key = "(none)"
		}
		rows = append(rows, tableRow{key, &l.Rows[i].Figures})
	}
	rows = append(rows, tableRow{"TOTAL", &l.Total})
	lay, err := termtable.Write(w, l.TableColumns(), rows, opt)
	if err != nil {
		return fmt.Errorf("%w: columns: %w", ErrBadQuery, err)
	}
	if len(lay.Dropped) > 0 {
		width := opt.Width
		if width == 0 {
			width = termtable.DefaultWidth
		}
		_, err = fmt.Fprintf(w, "Too wide for %d columns, --wide shows: %s\n", width, strings.Join(lay.Dropped, ", "))
	}
	return err
}

func currencyNote(l *Ledger) string {
	if !l.priced() {
		return ""
	}
	return ", costs in " + l.Currency
}
