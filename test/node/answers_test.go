package main

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
)

// attempt is one report attempt a fake monitor saw.
type attempt struct {
	at     time.Time
	report wire.NodeReport
	status int
}

// TestMonitorAnswers (issue 37, docs/node.md "The report"; issue 41): a
// fake monitor on 127.0.0.1 answers the agent's reports in turn:
//   - 503 while the first two reports wait: when it takes them, the agent
//     logs one info line saying delivery resumed, with how many reports
//     and how long it had failed;
//   - 425 with Retry-After: 3 to the third report (ahead of its clock):
//     kept, not a dead letter, and tried again no sooner than 3 s later;
//   - 400 naming time (more than 24 h ahead) to the fourth: a dead letter;
//   - 409 {"status": "stored", "conflicts": [...]} to the fifth: deleted as
//     delivered (never sent again), counted in
//     paddle_node_report_conflicts_total, logged at warning, and /healthz
//     stays 200 with the conflict named in its body.
//
// Every attempt carries sent_at, the agent's clock at that attempt.
func TestMonitorAnswers(t *testing.T) {
	const conflictUUID = "GPU-a1b2c300-8f2d-4c1b-9a3e-1c2d3e4f5a00"
	var mu sync.Mutex
	var attempts []attempt
	var order []int64 // report times, in the order first seen
	var outageFrom time.Time
	answer := func(r wire.NodeReport, now time.Time) (int, string, string) {
		n := slices.Index(order, r.Time)
		if n < 0 {
			order = append(order, r.Time)
			n = len(order) - 1
		}
		tries := 0
		for _, a := range attempts {
			if a.report.Time == r.Time {
				tries++
			}
		}
		switch {
		case n <= 1:
			// Down for 7 s from the first attempt: a second report waits too.
			if outageFrom.IsZero() {
				outageFrom = now
			}
			if now.Sub(outageFrom) < 7*time.Second {
				return 503, "", `{"error":"monitor starting"}`
			}
		case n == 2 && tries == 0:
			return 425, "3", `{"error":"time is 3600 s ahead of the monitor's clock"}`
		case n == 3:
			return 400, "", `{"error":"time: 90000 s ahead of the monitor's clock, more than 24 h"}`
		case n == 4:
			return 409, "", `{"status":"stored","conflicts":[{"uuid":"` + conflictUUID + `","held_by":"gpu-node-9"}]}`
		}
		return 201, "", `{"status":"created"}`
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		b, _ := io.ReadAll(io.LimitReader(zr, wire.MaxNodeReportBytes))
		var r wire.NodeReport
		if err := json.Unmarshal(b, &r); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		now := time.Now()
		mu.Lock()
		st, retry, body := answer(r, now)
		attempts = append(attempts, attempt{at: now, report: r, status: st})
		mu.Unlock()
		if retry != "" {
			w.Header().Set("Retry-After", retry)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(st)
		io.WriteString(w, body)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	writeState(t, state, "util 0 10")
	listen := freeAddr(t)
	env := nodeEnv(state, "PADDLE_MONITOR_URL=http://"+ln.Addr().String(), "PADDLE_NODE_REPORT_SPOOL="+filepath.Join(dir, "r.db"),
		"PADDLE_NODE_INTERVAL=5s", "PADDLE_NODE_SAMPLE=1s", "PADDLE_NODE_LISTEN="+listen)
	p := startNode(t, env)
	seenN := func(n int) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(order) >= n
		}
	}
	waitFor(t, 60*time.Second, "the fifth report (answered 409)", seenN(5))
	time.Sleep(500 * time.Millisecond)
	conflictHealth, cerr := httpGet("http://" + listen + "/healthz")
	conflictMetrics := metricsText(t, listen)
	waitFor(t, 20*time.Second, "the sixth report", seenN(6))
	time.Sleep(500 * time.Millisecond)
	m := metricsText(t, listen)
	health, herr := httpGet("http://" + listen + "/healthz")
	mu.Lock()
	seen := append([]attempt(nil), attempts...)
	times := append([]int64(nil), order...)
	mu.Unlock()
	log := p.stderr.String()
	byTime := func(tm int64) []attempt {
		var out []attempt
		for _, a := range seen {
			if a.report.Time == tm {
				out = append(out, a)
			}
		}
		return out
	}
	for _, a := range seen {
		sent, err := time.Parse(time.RFC3339, a.report.SentAt)
		if err != nil || sent.Sub(a.at) > 2*time.Second || a.at.Sub(sent) > 2*time.Second {
			t.Errorf("report %d attempt at %s: sent_at %q, want the agent's clock at sending", a.report.Time, a.at.Format(time.RFC3339Nano), a.report.SentAt)
		}
	}
	// The outage, then one line when it ends.
	if !strings.Contains(log, "report delivery resumed") || !strings.Contains(log, "reports=2") || !strings.Contains(log, "failing_for=") {
		t.Errorf("no info line for the resumed delivery (2 reports, how long)")
	}
	if strings.Count(log, "report delivery resumed") != 2 { // after the outage, and after the 425
		t.Errorf("%d resumed lines, want 2 (after the 503s, after the 425)", strings.Count(log, "report delivery resumed"))
	}
	// 425: kept, then tried again after its Retry-After.
	third := byTime(times[2])
	if len(third) != 2 || third[0].status != 425 || third[1].status != 201 || third[1].at.Sub(third[0].at) < 2900*time.Millisecond {
		var s []string
		for _, a := range third {
			s = append(s, fmt.Sprintf("%d at %s", a.status, a.at.Format("15:04:05.000")))
		}
		t.Errorf("the report answered 425 (Retry-After: 3): attempts %v, want 425 then 201 at least 3 s later", s)
	}
	// 400: one attempt, a dead letter.
	if n := len(byTime(times[3])); n != 1 || metricValue(m, "paddle_node_reports_dead") != 1 {
		t.Errorf("the report answered 400: %d attempts, paddle_node_reports_dead %v; want 1 and 1", n, metricValue(m, "paddle_node_reports_dead"))
	}
	// 409: one attempt, deleted as delivered, counted, logged, named.
	if n := len(byTime(times[4])); n != 1 {
		t.Errorf("the report answered 409: %d attempts, want 1 (delivered)", n)
	}
	if v := metricValue(conflictMetrics, "paddle_node_report_conflicts_total"); v != 1 {
		t.Errorf("paddle_node_report_conflicts_total %v after the 409, want 1", v)
	}
	if !strings.Contains(log, "level=WARN") || !strings.Contains(log, "GPU UUID conflicts") || !strings.Contains(log, conflictUUID+" held by gpu-node-9") {
		t.Errorf("the conflict is not logged at warning")
	}
	// /healthz: 200 throughout (httpGet reads any status; the body says
	// which), naming the conflict while the monitor answers 409.
	if cerr != nil || !strings.HasPrefix(conflictHealth, "ok\n") || !strings.Contains(conflictHealth, conflictUUID+" held by gpu-node-9") {
		t.Errorf("/healthz after the 409: %q, %v; want ok naming %s", conflictHealth, cerr, conflictUUID)
	}
	if herr != nil || health != "ok\n" {
		t.Errorf("/healthz after a 201: %q, %v; want ok and no conflict", health, herr)
	}
	if v := metricValue(m, "paddle_node_reports_pending"); v != 0 {
		t.Errorf("paddle_node_reports_pending %v, want 0", v)
	}
	if t.Failed() {
		t.Logf("the agent's log:\n%s", log)
	}
}
