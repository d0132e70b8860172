package main

// Black-box test of MONITOR.md 20.2's exception on both stores: on the
// observed basis a task pays what was attributed to it, except that where
// a GPU it declared had use nobody could be tied to (unattributed) it pays
// its declared figure for it, up to that use; the ledger keeps that use
// unattributed and discrepancies list both.

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// By hand: t-u declared GPU-u whole for the hour [h, h+1h); gpu-node-1's
// report of that hour saw GPU-u used the whole hour by a pod of namespace
// team-z that no registration names (pod-zz). The pod is unattributed, so
// t-u pays its declared 1 GPU-hour (10 CNY), not the nothing attributed
// to it (before: 0 GPU-hours, and the hour billed to nobody). With
// --namespace-projects mapping team-z to p_z, the pod's hour is undeclared,
// charged to p_z, and t-u pays nothing.
func TestUnattributedUseOfADeclaredGPU(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		dir := t.TempDir()
		prices := filepath.Join(dir, "prices.json")
		writeFile(t, prices, `{"currency":"CNY","models":{"NVIDIA H200":10}}`)
		ns := filepath.Join(dir, "namespaces.json")
		writeFile(t, ns, `{"team-z":"p_z"}`)
		s := startServer(t, dsn, "--tokens", nodeTokens(t), "--prices", prices)
		h := time.Date(2025, 10, 10, 0, 0, 0, 0, time.UTC).Unix()
		billingTask(t, s, "t-u", "p_u", "pod-t", wholeGPU("GPU-u", 1), h, h+3600)
		rep := fmt.Sprintf(`{"schema_version":1,"node":"gpu-node-1","time":%d,"interval_seconds":3600,"samples":60,
			"gpus":[],"instances":[%s]}`, h+3600, billingInstance("GPU-u", "pod-zz", "team-z", 1, -1))
		expect(t, s.do(t, post("/v1/nodes/report", rep, "n-secret")), 201, "")
		win := []string{"--db", dsn, "--prices", prices, "--month", "2025-10", "--format", "json"}

		r := runMonitor(t, append([]string{"report"}, win...)...)
		if r.code != 0 {
			t.Fatalf("report: exit %d: %s", r.code, r.stderr)
		}
		rows := rowsBy(t, decodeReport(t, r.stdout), "project")
		checkBilling(t, "p_u", rows["p_u"], map[string]any{"gpu_hours": 1.0, "cost": 10.0, "declared_gpu_hours": 1.0,
			"observed_gpu_hours": 1.0, "billing_basis": "observed"})
		if len(rows) != 1 {
			t.Errorf("rows %v, want p_u's alone:\n%s", rows, r.stdout)
		}
		// The chargeback line is the same hour.
		cb := runMonitor(t, "report", "--by", "task", "--format", "csv", "--db", dsn, "--prices", prices, "--month", "2025-10")
		if got := csvColumns(t, cb.stdout, []string{"task_id", "gpu_hours", "cost", "billing_basis"}); got != "task_id,gpu_hours,cost,billing_basis\nt-u,1,10,observed\n" {
			t.Errorf("the chargeback:\n%s", got)
		}

		// The ledger keeps the hour unattributed.
		l := runMonitor(t, append([]string{"ledger", "--by", "state"}, win...)...)
		if l.code != 0 {
			t.Fatalf("ledger: exit %d: %s", l.code, l.stderr)
		}
		states := rowsBy(t, decodeReport(t, l.stdout), "state")
		if states["unattributed"]["gpu_hours"] != 1.0 || states["attributed"]["gpu_hours"] != 0.0 {
			t.Errorf("the ledger: unattributed %v, attributed %v GPU-hours, want 1 and 0:\n%s",
				states["unattributed"]["gpu_hours"], states["attributed"]["gpu_hours"], l.stdout)
		}
		// Discrepancies list both: the unattributed hour (10 CNY at the
		// instance's price) and t-u, observed using nothing.
		a := s.do(t, get("/v1/discrepancies?month=2025-10", "a-secret"))
		expect(t, a, 200, "")
		var d struct {
			Tasks []struct {
				TaskID      string   `json:"task_id"`
				Differences []string `json:"differences"`
			} `json:"tasks"`
			Users []struct {
				State    string   `json:"state"`
				GPUHours float64  `json:"gpu_hours"`
				Stake    *float64 `json:"money_at_stake"`
			} `json:"users"`
		}
		if err := json.Unmarshal(a.Body, &d); err != nil {
			t.Fatal(err)
		}
		if len(d.Users) != 1 || d.Users[0].State != "unattributed" || d.Users[0].GPUHours != 1 || d.Users[0].Stake == nil || *d.Users[0].Stake != 10 {
			t.Errorf("discrepancies' users: %s", a.Body)
		}
		if len(d.Tasks) != 1 || d.Tasks[0].TaskID != "t-u" {
			t.Errorf("discrepancies' tasks: %s", a.Body)
		}

		// Mapped to a project, the pod's hour is undeclared, p_z's; t-u
		// pays nothing.
		r = runMonitor(t, append([]string{"report", "--namespace-projects", ns}, win...)...)
		rows = rowsBy(t, decodeReport(t, r.stdout), "project")
		checkBilling(t, "p_u mapped", rows["p_u"], map[string]any{"gpu_hours": 0.0, "observed_gpu_hours": 0.0})
		checkBilling(t, "p_z mapped", rows["p_z"], map[string]any{"gpu_hours": 1.0, "undeclared_gpu_hours": 1.0})
	})
}
