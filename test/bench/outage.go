package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// The outage row: a wave of starts on one node during a monitor outage,
// sharing one spool file as the node's containers do. The first start finds
// the outage; the time to exec of the ones after it is what the outage
// memory (PADDLE_OUTAGE_HOLD) changes. "Before" turns the memory off
// (PADDLE_OUTAGE_HOLD=0: every start spends the budget, as entrypoints
// without it do); "after" is the default hold.

// outageSeries is one wave: its samples are the starts after the first.
type outageSeries struct {
	title   string
	hold    string
	samples []sample
	lost    int // registrations neither delivered nor pending at the end; -1 unknown
}

// outageRows is the outage table's data.
type outageRows struct {
	starts int
	budget time.Duration
	series []outageSeries
}

// measureOutage runs the two waves of starts, each against a monitor that
// accepts connections and never answers (the worst outage: every attempt
// waits for its timeout), with a fresh spool file shared by the wave.
func measureOutage(r *runner, o options, entrypoint string, mon *monitor) (*outageRows, error) {
	if o.outageStarts < 2 {
		return nil, nil
	}
	rows := &outageRows{starts: o.outageStarts, budget: o.budget}
	c := contender{name: progEntrypoint, argv: []string{entrypoint}, labels: filepath.Join(r.dir, "entrypoint.labels")}
	for i, s := range []outageSeries{
		{title: "before: no outage memory (PADDLE_OUTAGE_HOLD=0)", hold: "0"},
		{title: "after: outage memory (PADDLE_OUTAGE_HOLD=60s, the default)", hold: "60s"},
	} {
		spoolPath := filepath.Join(r.spoolDir, fmt.Sprintf("outage-%d.db", i))
		env := append([]string{
			"PATH=" + systemPath,
			"HOME=" + r.dir,
			"PADDLE_MONITOR_URL=" + mon.url(monitorHang),
			"PADDLE_LABELS_FILE=" + c.labels,
			"PADDLE_REGISTER_BUDGET=" + o.budget.String(),
			"PADDLE_GPU_TIMEOUT=" + o.gpuTimeout.String(),
			"PADDLE_SPOOL_PATH=" + spoolPath,
			"PADDLE_OUTAGE_HOLD=" + s.hold,
		}, taskLabels...)
		for n := 1; n <= o.outageStarts; n++ {
			smp, err := r.run(c, env, monitorHang, o.hangCap)
			if err != nil {
				return nil, fmt.Errorf("outage wave %q, start %d: %w", s.hold, n, err)
			}
			if n > 1 {
				s.samples = append(s.samples, smp)
			}
		}
		s.lost = -1
		if p := r.pending(spoolPath); p >= 0 {
			s.lost = o.outageStarts - p
		}
		rows.series = append(rows.series, s)
	}
	return rows, nil
}

// markdown is the outage table, "" when it was not measured.
func (rows *outageRows) markdown() string {
	if rows == nil {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "### Monitor outage: a wave of %d starts on one node\n\n", rows.starts)
	fmt.Fprintf(&b, "CPU step; the monitor accepts connections and never answers; PADDLE_REGISTER_BUDGET=%s; "+
		"the starts run one after another and share one spool file. The first start of each wave finds the outage "+
		"and is not counted; the table shows starts 2 to %d.\n\n", rows.budget, rows.starts)
	b.WriteString("| wave | exec'd | time to exec, median | p10–p90 | max | lost registrations |\n|---|---|--:|--:|--:|--:|\n")
	for _, s := range rows.series {
		ok := started(s.samples)
		cells := []string{s.title, fmt.Sprintf("%d/%d", len(ok), len(s.samples)), "–", "–", "–"}
		if len(ok) > 0 {
			d := durations(ok, func(x sample) time.Duration { return x.toExec })
			cells[2] = ms(median(d))
			cells[3] = ms(percentile(d, 10)) + "–" + ms(percentile(d, 90))
			cells[4] = ms(maxDuration(d))
		}
		lost := "unknown"
		if s.lost >= 0 {
			lost = fmt.Sprint(s.lost)
		}
		cells = append(cells, lost)
		b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
	}
	b.WriteString("\n")
	return b.String()
}
