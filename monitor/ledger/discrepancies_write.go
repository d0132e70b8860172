package ledger

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/csvout"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/termtable"
)

// Entry is one line of the discrepancies as finance reads them: a task
// whose declaration differs from what its node saw, or a use nobody
// declared (undeclared: charged to a project by namespace; unattributed:
// nobody to charge), each with its money at stake.
type Entry struct {
	Kind         string // task, undeclared, unattributed or overcommitted
	TaskID       string
	Project      string
	Owner        string
	Node         string
	Namespace    string
	Pod          string
	Declared     *float64
	Observed     *float64
	GPUHours     float64 // declared − observed for a task, the use's for a user
	MoneyAtStake *float64
	Differences  string
}

// Entries are d's tasks and users in one list, by money at stake, then by
// GPU-hours (MONITOR.md 20.22), the same order for the table and the CSV.
func (d *Discrepancies) Entries() []Entry {
	out := make([]Entry, 0, len(d.Tasks)+len(d.Users)+len(d.Overcommitted))
	for _, t := range d.Tasks {
		decl, obs := t.Declared, t.Observed
		out = append(out, Entry{Kind: "task", TaskID: t.TaskID, Project: t.Project, Owner: t.Owner, Node: t.Node,
			Declared: &decl, Observed: &obs, GPUHours: round(decl - obs), MoneyAtStake: t.MoneyAtStake,
			Differences: strings.Join(t.Differences, "; ")})
	}
	for _, u := range d.Users {
		out = append(out, Entry{Kind: u.State, Project: u.Project, Node: u.Node, Namespace: u.Namespace, Pod: u.Pod,
			GPUHours: u.GPUHours, MoneyAtStake: u.MoneyAtStake})
	}
	for _, o := range d.Overcommitted {
		ids := make([]string, len(o.Tasks))
		for i, t := range o.Tasks {
			ids[i] = t.TaskID
		}
		gpu := o.UUID
		if o.GPUInstanceID != nil {
			gpu += fmt.Sprintf(" instance %d", *o.GPUInstanceID)
		}
		out = append(out, Entry{Kind: "overcommitted", TaskID: strings.Join(ids, " "), GPUHours: o.ExcessGPUHours,
			MoneyAtStake: o.MoneyAtStake, Differences: fmt.Sprintf("%s declared %s of itself from %s", gpu,
				strconv.FormatFloat(o.Share, 'f', -1, 64), o.Time.UTC().Format(time.RFC3339))})
	}
	// Stable: each list is already in its order, ties keep it.
	sort.SliceStable(out, func(i, j int) bool { return before(out[i], out[j]) })
	return out
}

func before(a, b Entry) bool {
	if ma, mb := money(a.MoneyAtStake), money(b.MoneyAtStake); ma != mb {
		return ma > mb
	}
	ha, hb := a.GPUHours, b.GPUHours
	if ha < 0 {
		ha = -ha
	}
	if hb < 0 {
		hb = -hb
	}
	return ha > hb
}

// WriteDiscrepancies writes d in format: table, csv or json.
func WriteDiscrepancies(w io.Writer, d *Discrepancies, format string) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(d)
	case "csv":
		return writeDiscrepanciesCSV(w, d)
	case "", "table":
		return writeDiscrepanciesTable(w, d)
	}
	return fmt.Errorf("%w: format %q is not one of table, csv, json", ErrBadQuery, format)
}

// discrepancyColumns are the CSV's columns, also the table's headers.
var discrepancyColumns = []string{"kind", "task_id", "project", "owner", "node", "namespace", "pod",
	"declared_gpu_hours", "observed_gpu_hours", "gpu_hours", "money_at_stake", "differences"}

func (e Entry) cells() []string {
	return []string{e.Kind, e.TaskID, e.Project, e.Owner, e.Node, e.Namespace, e.Pod,
		optHours(e.Declared), optHours(e.Observed), hours(e.GPUHours), optMoney(e.MoneyAtStake), e.Differences}
}

func writeDiscrepanciesCSV(w io.Writer, d *Discrepancies) error {
	cw := csvout.NewWriter(w)
	if err := cw.Write(discrepancyColumns); err != nil {
		return err
	}
	for _, e := range d.Entries() {
		if err := cw.Write(e.cells()); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

func writeDiscrepanciesTable(w io.Writer, d *Discrepancies) error {
	if _, err := fmt.Fprintf(w, "Discrepancies %s – %s, largest money at stake first\n\n",
		d.From.UTC().Format(time.RFC3339), d.To.UTC().Format(time.RFC3339)); err != nil {
		return err
	}
	cols := make([]termtable.Column[Entry], len(discrepancyColumns))
	for i, name := range discrepancyColumns {
		cols[i] = termtable.Column[Entry]{Name: name, Key: i == 0, Priority: i, Cell: func(e Entry) string { return e.cells()[i] }}
	}
	_, err := termtable.Write(w, cols, d.Entries(), termtable.Options{Wide: true})
	if err == nil && (len(d.Untied) > 0 || len(d.GPUConflicts) > 0) {
		_, err = fmt.Fprintf(w, "\nAlso: %d untied declarations, %d GPU conflicts (--format json lists them)\n",
			len(d.Untied), len(d.GPUConflicts))
	}
	return err
}

func hours(v float64) string { return strconv.FormatFloat(round(v), 'f', -1, 64) }

func optHours(v *float64) string {
	if v == nil {
		return ""
	}
	return hours(*v)
}

func optMoney(v *float64) string {
	if v == nil {
		return ""
	}
	return strconv.FormatFloat(*v, 'f', 2, 64)
}
