package main

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// TestReadsClipAtNow (F4; NODE.md 12.2, "every read clips at now"): a
// node whose clock runs two minutes fast reports a pod's GPU over
// [t−600, t+120) at t. The report is stored (it is within the 5 minutes a
// clock may be ahead), but its last 120 s are provisional: the ledger's
// capacity and attributed use, and the report's observed bill of the
// pod's task, stop at the instant each is read, over a window reaching
// hours past now, from the API and the CLI, on both stores. Before, each
// counted the whole 720 s (0.2 GPU-hours) at once.
func TestReadsClipAtNow(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := startServer(t, dsn, "--tokens", trustTokens(t))
		now := time.Now().Unix()
		trustReg(t, s, "s-secret", "t-a", "search_a", "pod-a", "gpu-node-1", "train-a", now-600)
		u := trustUser{uuid: "GPU-a", runtime: "containerd", containerID: "c-a", podUID: "pod-a", ns: "team-a", pod: "train-a"}
		expect(t, s.do(t, post("/v1/nodes/report", trustReport("gpu-node-1", now+120, 720, u), "n-secret")), 201, "")
		h := now / 3600 * 3600
		from, to := h-3600, h+3*3600

		// bounds says a figure counted from t−600 to the instant it was
		// read: at least 600 s, and no more than the seconds since then.
		bounds := func(where string, got float64) {
			t.Helper()
			lo, hi := 600.0/3600, float64(time.Now().Unix()+1-(now-600))/3600
			if got < lo-1e-9 || got > hi+1e-9 {
				t.Errorf("%s = %.6f GPU-hours, want between %.6f and %.6f (counted to now, not to the report's %.6f)",
					where, got, lo, hi, 720.0/3600)
			}
		}
		led := ledgerByProject(t, s, from, to)
		attributed := led["search_a"]["attributed_gpu_hours"].(float64)
		bounds("the ledger's attributed", attributed)
		a := s.do(t, get("/v1/ledger?by=model&from="+rfc(from)+"&to="+rfc(to), "a-secret"))
		expect(t, a, 200, "")
		bounds("the ledger's capacity", a.JSON(t)["total"].(map[string]any)["capacity_gpu_hours"].(float64))

		rep := s.do(t, get("/v1/report?from="+rfc(from)+"&to="+rfc(to), "a-secret"))
		expect(t, rep, 200, "")
		billed := -1.0
		for _, row := range rep.JSON(t)["rows"].([]any) {
			m := row.(map[string]any)
			if m["key"].(map[string]any)["project"] == "search_a" {
				billed = m["gpu_hours"].(float64)
				if b := m["billing_basis"]; b != "observed" {
					t.Errorf("search_a billed on the %v basis, want observed", b)
				}
			}
		}
		bounds("the report's search_a", billed)
		// Invariant 1 between two reads a few seconds apart: the report's
		// bill is the ledger's attributed use up to the later instant.
		if d := billed - attributed; d < -1e-9 || d > float64(time.Now().Unix()+1-now)/3600 {
			t.Errorf("the report bills %.6f, the ledger attributes %.6f", billed, attributed)
		}

		// The CLI reads the store to its own clock the same way.
		r := runMonitor(t, "ledger", "--db", dsn, "--by", "project", "--from", rfc(from), "--to", rfc(to), "--format", "json")
		if r.code != 0 {
			t.Fatalf("ledger: exit %d: %s", r.code, r.stderr)
		}
		for _, row := range decodeReport(t, r.stdout)["rows"].([]any) {
			m := row.(map[string]any)
			if m["key"].(map[string]any)["project"] == "search_a" {
				bounds("the CLI ledger's attributed", m["attributed_gpu_hours"].(float64))
			}
		}

		// A window that ends before now is not clipped: [t−600, t−60)
		// counts 540 s exactly, from the raw reports.
		a = s.do(t, get("/v1/ledger?by=project&from="+rfc(now-600)+"&to="+rfc(now-60), "a-secret"))
		expect(t, a, 200, "")
		for _, row := range a.JSON(t)["rows"].([]any) {
			m := row.(map[string]any)
			if m["key"].(map[string]any)["project"] == "search_a" {
				if g := m["attributed_gpu_hours"].(float64); math.Abs(g-540.0/3600) > 1e-6 {
					t.Errorf("the past window's attributed = %.6f, want %.6f", g, 540.0/3600)
				}
			}
		}
	})
}

// TestCountedToLastAttributed (MONITOR.md 20.3): a task is counted to its
// last attributed instant, completed or not, whichever report attributes
// it. p_late's task completes one second after its start h; the node's
// report of [h+1h, h+2h) (another pod only) arrives first, then the
// report of [h, h+1h) that attributes GPU-l to it. Its counted interval
// is [h, h+1h): declared 1 GPU-hour, observed 1 (before, the older
// report moved nothing and it declared 1 s).
func TestCountedToLastAttributed(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := startServer(t, dsn, "--tokens", nodeTokens(t))
		h := time.Now().Unix()/3600*3600 - 5*3600
		billingTask(t, s, "t-late", "p_late", "pod-l", wholeGPU("GPU-l", 1), h, h+1)
		report := func(end int64, instance string) string {
			return fmt.Sprintf(`{"schema_version":1,"node":"gpu-node-1","time":%d,"interval_seconds":3600,"samples":60,
				"gpus":[],"instances":[%s]}`, end, instance)
		}
		expect(t, s.do(t, post("/v1/nodes/report", report(h+7200, billingInstance("GPU-o", "pod-o", "team-o", 1, -1)), "n-secret")), 201, "")
		expect(t, s.do(t, post("/v1/nodes/report", report(h+3600, billingInstance("GPU-l", "pod-l", "team-a", 1, -1)), "n-secret")), 201, "")
		r := runMonitor(t, "report", "--db", dsn, "--by", "project", "--from", rfc(h), "--to", rfc(h+3*3600), "--format", "json")
		if r.code != 0 {
			t.Fatalf("report: exit %d: %s", r.code, r.stderr)
		}
		found := false
		for _, row := range decodeReport(t, r.stdout)["rows"].([]any) {
			m := row.(map[string]any)
			if m["key"].(map[string]any)["project"] == "p_late" {
				found = true
				checkBilling(t, "p_late", m, map[string]any{"gpu_hours": 1.0, "declared_gpu_hours": 1.0, "observed_gpu_hours": 1.0,
					"billing_basis": "observed"})
			}
		}
		if !found {
			t.Fatalf("no p_late row: %s", r.stdout)
		}
	})
}
