package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
)

// TestRunDelivery: the monitor is down at first (503): reports are
// spooled, then delivered oldest first when it is back; one report it
// refuses (400) goes to the dead bucket without blocking the rest; SIGTERM
// closes the interval at that instant; a restart tiles on from the spool
// with no hole; PADDLE_NODE_FINAL=1 marks the last report final. Every
// report the node made arrives once, in order, tiling time.
func TestRunDelivery(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	pid := startIn(t, "")
	writeState(t, state, fmt.Sprintf("proc 0 compute %d 1000 30", pid), "util 0 60")
	token := filepath.Join(dir, "token")
	os.WriteFile(token, []byte("node-secret-1\n"), 0o600)
	var up atomic.Bool
	var refuse atomic.Int64 // the time of the report answered 400
	rcv := newReceiver(t, func(r wire.NodeReport) int {
		if !up.Load() {
			return 503
		}
		if refuse.Load() == 0 {
			refuse.Store(r.Time) // the first report after the outage
		}
		if r.Time == refuse.Load() {
			return 400
		}
		return 201
	})
	listen := freeAddr(t)
	env := nodeEnv(state, "PADDLE_MONITOR_URL="+rcv.URL, "PADDLE_NODE_TOKEN_FILE="+token,
		"PADDLE_NODE_REPORT_SPOOL="+filepath.Join(dir, "spool", "reports.db"),
		"PADDLE_NODE_INTERVAL=5s", "PADDLE_NODE_SAMPLE=1s", "PADDLE_NODE_LISTEN="+listen)
	p := startNode(t, env)
	// Down for three interval ends: three reports wait in the spool.
	waitFor(t, 30*time.Second, "three spooled reports", func() bool {
		return strings.Contains(metricsTextSafe(listen), "paddle_node_reports_pending 3")
	})
	up.Store(true)
	waitFor(t, 30*time.Second, "the spool delivered", func() bool { return len(rcv.reports()) >= 2 })
	time.Sleep(1500 * time.Millisecond)
	p.signal(t, syscall.SIGTERM)
	if code := p.wait(t, 15*time.Second); code != 0 {
		t.Fatalf("exit %d after SIGTERM\n%s", code, p.stderr.String())
	}
	stopped := len(rcv.reports())
	// Restart within an interval, then stop it for good.
	p = startNode(t, append(env, "PADDLE_NODE_FINAL=1"))
	waitFor(t, 20*time.Second, "a report after the restart", func() bool { return len(rcv.reports()) > stopped })
	time.Sleep(1500 * time.Millisecond)
	p.signal(t, syscall.SIGTERM)
	if code := p.wait(t, 15*time.Second); code != 0 {
		t.Fatalf("exit %d after the second SIGTERM\n%s", code, p.stderr.String())
	}

	got := rcv.reports()
	rcv.mu.Lock()
	refused := append([]wire.NodeReport(nil), rcv.refused...)
	auth := append([]string(nil), rcv.auth...)
	rcv.mu.Unlock()
	if len(refused) != 1 {
		t.Fatalf("refused %d reports, want the one answered 400 once (dead, not retried)", len(refused))
	}
	all := append(append([]wire.NodeReport(nil), got...), refused...)
	slices.SortFunc(all, func(a, b wire.NodeReport) int { return int(a.Time - b.Time) })
	for i, r := range got {
		if i > 0 && r.Time <= got[i-1].Time {
			t.Errorf("report %d (time %d) arrived after %d: not oldest first", i, r.Time, got[i-1].Time)
		}
		if auth[i] != "Bearer node-secret-1" {
			t.Errorf("Authorization %q", auth[i])
		}
	}
	partial := 0
	for i, r := range all {
		if i > 0 && r.Time-r.IntervalSeconds != all[i-1].Time {
			t.Errorf("report %d covers [%d, %d): a hole or an overlap after %d", i, r.Time-r.IntervalSeconds, r.Time, all[i-1].Time)
		}
		if r.Time%5 != 0 {
			partial++
			if r.IntervalSeconds >= 5 {
				t.Errorf("partial report at %d spans %d s", r.Time, r.IntervalSeconds)
			}
		}
		if r.IntervalSeconds <= 0 || r.IntervalSeconds > 5 || r.Samples > int(r.IntervalSeconds)+1 {
			t.Errorf("report %d: interval %d s with %d samples", r.Time, r.IntervalSeconds, r.Samples)
		}
		if r.Final != (i == len(all)-1) {
			t.Errorf("report %d: final %v", r.Time, r.Final)
		}
		if r.Samples > 0 && (len(r.Instances) != 1 || len(r.Instances[0].Users) != 1 || r.Instances[0].Users[0].UID == nil) {
			t.Errorf("report %d: instances %+v", r.Time, r.Instances)
		}
	}
	if partial == 0 {
		t.Errorf("no partial report at SIGTERM among %d", len(all))
	}
	if len(all) < 6 {
		t.Errorf("%d reports, want at least 6 (3 spooled, 1 after, 2 around the restart)", len(all))
	}
}

// metricsTextSafe is /metrics, or "" while the agent does not answer.
func metricsTextSafe(addr string) string {
	resp, err := httpGet("http://" + addr + "/metrics")
	if err != nil {
		return ""
	}
	return resp
}

// TestFinalMark: `paddle-node final` (a preStop hook, a process apart
// from the agent) makes the report sent at the next SIGTERM final. The
// fake NVML's state changes while the agent runs: the later report shows
// the process's new utilisation.
func TestFinalMark(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	pid := startIn(t, "")
	writeState(t, state, fmt.Sprintf("proc 0 compute %d 100 30", pid))
	rcv := newReceiver(t, nil)
	env := nodeEnv(state, "PADDLE_MONITOR_URL="+rcv.URL, "PADDLE_NODE_REPORT_SPOOL="+filepath.Join(dir, "r.db"),
		"PADDLE_NODE_INTERVAL=5s", "PADDLE_NODE_SAMPLE=1s")
	p := startNode(t, env)
	waitFor(t, 20*time.Second, "a report", func() bool { return len(rcv.reports()) > 0 })
	writeState(t, state, fmt.Sprintf("proc 0 compute %d 100 70", pid))
	if code, _, errs := runNode(t, env, "final"); code != 0 {
		t.Fatalf("final: exit %d\n%s", code, errs)
	}
	time.Sleep(1200 * time.Millisecond)
	p.signal(t, syscall.SIGTERM)
	if code := p.wait(t, 15*time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
	got := rcv.reports()
	last := got[len(got)-1]
	if !last.Final || slices.ContainsFunc(got[:len(got)-1], func(r wire.NodeReport) bool { return r.Final }) {
		var finals []bool
		for _, r := range got {
			finals = append(finals, r.Final)
		}
		t.Errorf("final flags of the reports in order: %v, want only the last", finals)
	}
	sm := func(r wire.NodeReport) float64 {
		if len(r.Instances) != 1 || len(r.Instances[0].Users) != 1 || r.Instances[0].Users[0].SMUtilMean == nil {
			return -1
		}
		return *r.Instances[0].Users[0].SMUtilMean
	}
	if first := sm(got[0]); first != 30 || sm(last) <= 30 || sm(last) > 70 {
		t.Errorf("SM utilisation %v in the first report, %v in the last; want 30, then up to 70 after the change", first, sm(last))
	}
	if _, err := os.Stat(filepath.Join(dir, "final")); err == nil {
		t.Errorf("the mark is left for the next start")
	}
}

// TestSIGTERMMonitorDown: SIGTERM while the monitor is down: the partial
// report is spooled, the agent tries for what is left of its 10 s and
// exits 0; the next start delivers every report of the first run, oldest
// first, tiling time up to the partial one, then its own.
func TestSIGTERMMonitorDown(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	writeState(t, state, "util 0 10")
	var up atomic.Bool
	rcv := newReceiver(t, func(wire.NodeReport) int {
		if up.Load() {
			return 201
		}
		return 503
	})
	listen := freeAddr(t)
	env := nodeEnv(state, "PADDLE_MONITOR_URL="+rcv.URL, "PADDLE_NODE_REPORT_SPOOL="+filepath.Join(dir, "r.db"),
		"PADDLE_NODE_INTERVAL=5s", "PADDLE_NODE_SAMPLE=1s", "PADDLE_NODE_LISTEN="+listen)
	p := startNode(t, env)
	waitFor(t, 20*time.Second, "a spooled report", func() bool {
		return metricValue(metricsTextSafe(listen), "paddle_node_reports_pending") >= 1
	})
	time.Sleep(1500 * time.Millisecond)
	p.signal(t, syscall.SIGTERM)
	if code := p.wait(t, 20*time.Second); code != 0 {
		t.Fatalf("exit %d\n%s", code, p.stderr.String())
	}
	if n := len(rcv.reports()); n != 0 {
		t.Fatalf("%d reports stored while the monitor was down", n)
	}
	up.Store(true)
	p = startNode(t, env)
	waitFor(t, 20*time.Second, "the spooled reports and one of the new run", func() bool { return len(rcv.reports()) >= 3 })
	got := rcv.reports()
	first := slices.IndexFunc(got, func(r wire.NodeReport) bool { return r.Time%5 != 0 }) // the partial one ends the first run
	if first < 1 {
		t.Fatalf("no partial report after a full one: %v", spans(got))
	}
	for i := 1; i <= first; i++ {
		if got[i].Time-got[i].IntervalSeconds != got[i-1].Time {
			t.Errorf("the first run's reports do not tile: %v", spans(got))
		}
	}
	// The restart came more than an interval after the partial report
	// (the first run spent its 10 s on the monitor): the next run starts
	// at its own start, after it.
	if next := got[first+1]; next.Time-next.IntervalSeconds < got[first].Time {
		t.Errorf("the second run's first report overlaps the first run's: %v", spans(got))
	}
	if t.Failed() {
		t.Logf("the agent's log:\n%s", p.stderr.String())
	}
}

// spans lists reports as [start, end) for a failure's message.
func spans(rs []wire.NodeReport) []string {
	var out []string
	for _, r := range rs {
		out = append(out, fmt.Sprintf("[%d,%d)", r.Time-r.IntervalSeconds, r.Time))
	}
	return out
}
