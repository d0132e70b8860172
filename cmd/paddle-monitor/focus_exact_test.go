package main

// The FOCUS export reconciles to the ledger GPU-second by GPU-second
// (MONITOR.md 20.15, 20.18): declared use on a ledger GPU for part of a
// day is taken from the platform's unobserved rows only for the instants
// the ledger counts that GPU unobserved, never for a GPU outside the
// ledger, never below zero; and a correction keeps the closed month's
// days (20.17). Figures by hand, on both stores.

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

func TestFocusReconcilesPerGPUSecond(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		dir := t.TempDir()
		prices := filepath.Join(dir, "prices.json")
		writeFile(t, prices, `{"currency":"CNY","models":{"NVIDIA H200":10}}`)
		flags := []string{"--prices", prices, "--focus-provider", "acme-gpu"}
		s := startServer(t, dsn, append([]string{"--tokens", nodeTokens(t)}, flags...)...)

		// October, closed; then a late registration of it over two days:
		// GPU-y (no node holds it) 4 h from October 20, 22:00 — 2 h (20)
		// on the 20th, 2 h (20) on the 21st.
		oct := time.Date(2025, 10, 5, 0, 0, 0, 0, time.UTC).Unix()
		billingTask(t, s, "t-oct", "search_a", "", wholeGPU("GPU-y", 1), oct, oct+3600)
		expect(t, s.do(t, post("/v1/statements/2025-10/close", `{"reason":"October billed"}`, "a-secret")), 201, "")
		late := time.Date(2025, 10, 20, 22, 0, 0, 0, time.UTC).Unix()
		billingTask(t, s, "t-late", "search_a", "", wholeGPU("GPU-y", 1), late, late+4*3600)

		// November 10 (h): gpu-node-1 reports [h, h+10h) with GPU-e used
		// by an unregistered pod (unattributed: no namespace mapping) and
		// GPU-d observed without a user (unallocated). Its GPUs' capacity
		// runs from h to the last report's end + --node-retire (168 h):
		// November 17, 10:00; unobserved after h+10h.
		h := time.Date(2025, 11, 10, 0, 0, 0, 0, time.UTC).Unix()
		d17 := time.Date(2025, 11, 17, 0, 0, 0, 0, time.UTC).Unix()
		// Declared, all on the declared basis (H200 10 an hour):
		//   t-span: GPU-e from other-node, [h+8h, h+12h): 40. Observed
		//     [h+8h, h+10h) (unobserved cost 0: 20 over capacity);
		//     unobserved [h+10h, h+12h): 2 GPU-h, 20 absorbed.
		//   t-z: GPU-z (no node holds it) from a pod of gpu-node-1,
		//     [h+12h, h+13h): 10, outside the ledger (the old export took
		//     it from the platform: its node is on the ledger).
		//   t-p, t-q: both GPU-d from other-node, [h+20h, h+21h): 10 each;
		//     GPU-d unobserved: 1 GPU-h, 10 absorbed, 10 over capacity.
		//   t-edge: GPU-e from other-node, November 17 [09:00, 12:00): 30;
		//     unobserved [09:00, 10:00): 1 GPU-h, 10 absorbed; after
		//     10:00 outside the ledger's capacity: 20.
		billingTask(t, s, "t-span", "search_span", "", wholeGPU("GPU-e", 1), h+8*3600, h+12*3600)
		billingTask(t, s, "t-z", "search_z", "pod-z", wholeGPU("GPU-z", 1), h+12*3600, h+13*3600)
		billingTask(t, s, "t-p", "search_p", "", wholeGPU("GPU-d", 1), h+20*3600, h+21*3600)
		billingTask(t, s, "t-q", "search_q", "", wholeGPU("GPU-d", 1), h+20*3600, h+21*3600)
		billingTask(t, s, "t-edge", "search_edge", "", wholeGPU("GPU-e", 1), d17+9*3600, d17+12*3600)
		gpuD := `{"uuid":"GPU-d","gpu_instance_id":null,"name":"NVIDIA H200","samples":60,"busy_share":0,"busy_basis":"utilization",
			"occupied_share":0,"energy_joules":null,"users":[]}`
		rep := fmt.Sprintf(`{"schema_version":1,"node":"gpu-node-1","time":%d,"interval_seconds":36000,"samples":60,
			"gpus":[],"instances":[%s,%s]}`, h+36000, billingInstance("GPU-e", "pod-e", "team-b", 1, -1), gpuD)
		expect(t, s.do(t, post("/v1/nodes/report", rep, "n-secret")), 201, "")

		open := mustRun(t, append([]string{"export", "focus", "--db", dsn, "--month", "2025-11"}, flags...)...)
		rows := checkFocus(t, open, "2025-11")

		// The ledger: 2 GPUs × 178 h = 356 GPU-h, 3560; unattributed 10 h
		// (100), unallocated 10 h (100), unobserved 336 h (3360).
		var led struct {
			Total struct {
				CapacityCost float64 `json:"capacity_cost"`
			} `json:"total"`
		}
		lj := mustRun(t, "ledger", "--db", dsn, "--month", "2025-11", "--prices", prices, "--by", "model", "--format", "json")
		if err := json.Unmarshal([]byte(lj), &led); err != nil || led.Total.CapacityCost != 3560 {
			t.Fatalf("ledger: capacity cost %v, want 3560 (%v)\n%s", led.Total.CapacityCost, err, lj)
		}
		var usage, projects float64
		offsets := map[string]string{}
		unobserved := map[string][2]float64{}
		var corr []focusRow
		for _, r := range rows {
			if r["ChargeClass"] == "Correction" {
				corr = append(corr, r)
				continue
			}
			usage += r.num(t, "BilledCost")
			if r["SubAccountId"] != "platform" {
				projects += r.num(t, "BilledCost")
				continue
			}
			if r["x_LedgerState"] == "unobserved" {
				day := r["ChargePeriodStart"][:10]
				unobserved[day] = [2]float64{r.num(t, "ConsumedQuantity"), r.num(t, "BilledCost")}
				offsets[day] = r["x_DeclaredOffsetGpuHours"]
			}
		}
		// Σ BilledCost = capacity cost 3560 + what no unobserved GPU-second
		// absorbed: 20 + 10 + 10 + 20 = 60 (MONITOR.md 20.15).
		if math.Abs(usage-(led.Total.CapacityCost+60)) > 1e-6 || math.Abs(usage-3620) > 1e-6 {
			t.Errorf("Σ BilledCost %v, want the ledger's capacity cost %v + 60 = 3620", usage, led.Total.CapacityCost)
		}
		// The projects: 40 + 10 + 10 + 10 + 30 = 100.
		if math.Abs(projects-100) > 1e-6 {
			t.Errorf("the projects' Σ BilledCost %v, want 100", projects)
		}
		// The platform's unobserved rows: November 10, 2 GPUs × 14 h = 28
		// GPU-h less 3 absorbed (t-span 2, t-p and t-q 1): 25, 250;
		// November 17, 2 × 10 h less 1 (t-edge): 19, 190; the days between
		// 48 GPU-h, 480, nothing absorbed (null).
		for day, want := range map[string]struct {
			hours, cost float64
			offset      string
		}{
			"2025-11-10": {25, 250, "3"}, "2025-11-17": {19, 190, "1"}, "2025-11-13": {48, 480, ""},
		} {
			got := unobserved[day]
			if got[0] != want.hours || got[1] != want.cost || offsets[day] != want.offset {
				t.Errorf("%s: unobserved %v GPU-h, %v, offset %q; want %v, %v, %q", day, got[0], got[1], offsets[day], want.hours, want.cost, want.offset)
			}
		}
		if len(unobserved) != 8 {
			t.Errorf("unobserved rows on %d days, want 8 (November 10 to 17): %v", len(unobserved), unobserved)
		}
		// The correction: one row per day of October it corrects
		// (MONITOR.md 20.17), billed in November.
		want := map[string]float64{"2025-10-20T00:00:00Z": 20, "2025-10-21T00:00:00Z": 20}
		if len(corr) != 2 {
			t.Fatalf("%d correction rows, want 2 (October 20 and 21):\n%s", len(corr), open)
		}
		for _, r := range corr {
			end := r.at(t, "ChargePeriodStart").AddDate(0, 0, 1).Format(time.RFC3339)
			if r.num(t, "BilledCost") != want[r["ChargePeriodStart"]] || r.num(t, "ConsumedQuantity") != 2 || r["ChargePeriodEnd"] != end ||
				r["BillingPeriodStart"] != "2025-11-01T00:00:00Z" || r["SubAccountId"] != "search_a" || r["InvoiceId"] != "" {
				t.Errorf("correction %v", r)
			}
		}
		// Closed: the correction's InvoiceId is November's statement's.
		expect(t, s.do(t, post("/v1/statements/2025-11/close", `{"reason":"November billed"}`, "a-secret")), 201, "")
		closed := checkFocus(t, string(s.do(t, get("/v1/export/focus?month=2025-11", "a-secret")).Body), "2025-11")
		for _, r := range closed {
			if r["InvoiceId"] != "2025-11-v1" {
				t.Errorf("closed: InvoiceId %q, want 2025-11-v1: %v", r["InvoiceId"], r)
			}
		}
		stopServer(t, s)
	})
}
