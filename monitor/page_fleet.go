package monitor

import (
	"context"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/access"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/ledger"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/termtable"
)

// pageFleetMax bounds the page's lists of undeclared use and
// discrepancies (the API lists them all).
const pageFleetMax = 20

// pageDiscrepancies is how many discrepancies the page shows: the ten with
// the most money at stake (MONITOR.md section 17).
const pageDiscrepancies = 10

// pageFleet is the page's "Fleet" section: for an admin, capacity and its
// five states per GPU model (a stacked bar each, with the figures); for a
// team, its undeclared GPU-hours; for both, undeclared use and
// discrepancies.
type pageFleet struct {
	Admin       bool
	Models      []pageFleetModel
	ChartHeight int
	// Undeclared is the team's undeclared GPU-hours (a team's page).
	Undeclared    float64
	Users         []pageFleetUser
	Discrepancies []ledger.TaskDiscrepancy
	States        []pageFleetState // the legend
	// LabelX is where the models' labels end and ChartWidth the chart's
	// width: the label column is as wide as the longest model's name, so
	// that no label is clipped ("NVIDIA H200 3g.71gb" did not fit 162).
	LabelX, ChartWidth int
	Currency           string
}

type pageFleetModel struct {
	Model    string
	LabelX   int
	Y        int
	Capacity string
	Segments []pageFleetSegment
	Figures  string
}

type pageFleetSegment struct {
	State, Value, Color string
	X, Y, Width         int
}

// pageFleetUser is a user of "Undeclared use": Who is its pod, Slurm
// job, host user or container.
type pageFleetUser struct {
	Node, State, Project, Namespace, Who string
	GPUHours                             float64
	Cost                                 *float64 // at the instance's price
}

type pageFleetState struct{ State, Color string }

// fleetColors are the states' colours, in the order of ledger.States.
var fleetColors = []string{"#3b7dd8", "#e0a030", "#c0392b", "#9aa5b1", "#d5dbe1"}

// fleet computes the section for the window, or nil when the monitor has
// no ledger or no node report counts in the window (the page is then as
// without node reports).
func (h *reports) fleet(ctx context.Context, win facts.Window, scope *access.Scope, now time.Time) (*pageFleet, error) {
	l, d, err := h.acc.Fleet(ctx, win, scope, now)
	if err != nil || l == nil {
		return nil, err
	}
	f := &pageFleet{Admin: scope == nil, Undeclared: l.Total.States[1]}
	for i, s := range ledger.States {
		f.States = append(f.States, pageFleetState{s, fleetColors[i]})
	}
	widest := 0.0
	f.LabelX, f.Currency = 162, l.Currency
	for _, r := range l.Rows {
		if r.Capacity != nil {
			widest = max(widest, *r.Capacity)
			// About 8 px a character at the page's font.
			f.LabelX = max(f.LabelX, 8*utf8.RuneCountInString(r.Key)+8)
		}
	}
	f.ChartWidth = f.LabelX + 8 + 420 + 170
	for i, r := range l.Rows {
		if r.Capacity == nil {
			continue
		}
		m := pageFleetModel{Model: r.Key, LabelX: f.LabelX, Y: i * 34, Capacity: significant(*r.Capacity) + " GPU-h"}
		if m.Model == "" {
			m.Model = "(unknown model)"
		}
		x := float64(f.LabelX + 8)
		for j, s := range ledger.States {
			w := 0.0
			if widest > 0 {
				w = 420 * r.States[j] / widest
			}
			m.Segments = append(m.Segments, pageFleetSegment{State: s, Value: significant(r.States[j]) + " GPU-h", Color: fleetColors[j],
				X: int(x + 0.5), Y: m.Y, Width: int(x+w+0.5) - int(x+0.5)})
			x += w
			if j > 0 {
				m.Figures += ", "
			}
			m.Figures += s + " " + significant(r.States[j])
			if c := r.StateCosts[j]; c != nil {
				// Money beside GPU-hours, the ledger's cost of the state.
				m.Figures += " (" + strings.TrimSpace(termtable.Money(*c)+" "+l.Currency) + ")"
			}
		}
		f.Models = append(f.Models, m)
	}
	f.ChartHeight = len(f.Models)*34 + 4
	for _, u := range d.Users[:min(len(d.Users), pageFleetMax)] {
		who := u.ContainerID
		switch {
		case u.Pod != "":
			who = u.Pod
		case u.SlurmJob != "":
			who = "Slurm job " + u.SlurmJob
		case u.UID != nil:
			who = "UID " + strconv.FormatInt(*u.UID, 10) + " " + u.Cgroup
		}
		f.Users = append(f.Users, pageFleetUser{Node: u.Node, State: u.State, Project: u.Project, Namespace: u.Namespace, Who: who, GPUHours: u.GPUHours, Cost: u.MoneyAtStake})
	}
	f.Discrepancies = d.Tasks[:min(len(d.Tasks), pageDiscrepancies)]
	return f, nil
}
