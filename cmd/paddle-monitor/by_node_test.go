package main

// Black-box tests of the report by node (MONITOR.md 20.9) on both stores:
// billingFleet's figures by the node each task ran on, in every format and
// on GET /v1/report; the observed part of each node's row is the ledger's
// attributed + undeclared use of that node, and the report by model (MIG
// instances by model and profile) agrees with the ledger's by model once a
// model's profiles are summed.

import (
	"encoding/csv"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// byNodeByHand are billingFleet's figures over [h, h+12h) by node (see
// billingByHand): gpu-node-1 holds every task but p_decl's, 10 (p_tiny) +
// 10 (p_short) + 10 (p_exec) + 11 (p_mixed: 10 observed, 0.5 × 2 h
// declared where no report covered it) + 30/7 (p_mig) + 0 (p_never) + 10
// (team-b's undeclared pod, charged to ads_x) = 55.285714 GPU-hours, 560
// CNY; observed 40 + 30/7 = 44.285714, undeclared 10; other-node (no
// reports) p_decl's declared 3 h, 30 CNY.
var byNodeByHand = map[string]map[string]any{
	"gpu-node-1": {"gpu_hours": 55.285714, "cost": 560.0, "observed_gpu_hours": 44.285714, "undeclared_gpu_hours": 10.0,
		"billing_basis": "mixed", "tasks": 6.0},
	"other-node": {"gpu_hours": 3.0, "cost": 30.0, "observed_gpu_hours": 0.0, "undeclared_gpu_hours": 0.0,
		"billing_basis": "declared", "tasks": 1.0},
	"": {"gpu_hours": 58.285714, "cost": 590.0},
}

// byNodeCSV is `report --by node --format csv`'s node, gpu_hours, cost
// and billing columns: gpu-node-1 declared billingByHand's 34.385714 less
// p_decl's 3 on other-node.
const byNodeCSV = `node,gpu_hours,cost,declared_gpu_hours,observed_gpu_hours,undeclared_gpu_hours,billing_basis
gpu-node-1,55.285714,560,31.385714,44.285714,10,mixed
other-node,3,30,3,0,0,declared
`

func TestReportByNode(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		dir := t.TempDir()
		prices := filepath.Join(dir, "prices.json")
		writeFile(t, prices, `{"currency":"CNY","models":{"NVIDIA H200":10,"NVIDIA H200 3g.71gb":5}}`)
		ns := filepath.Join(dir, "namespaces.json")
		writeFile(t, ns, `{"team-b":"ads_x"}`)
		s := startServer(t, dsn, "--tokens", nodeTokens(t), "--prices", prices, "--namespace-projects", ns)
		h := time.Now().Unix()/3600*3600 - 20*3600
		billingFleet(t, s, h)
		from, to := time.Unix(h, 0).UTC().Format(time.RFC3339), time.Unix(h+12*3600, 0).UTC().Format(time.RFC3339)
		win := []string{"--db", dsn, "--prices", prices, "--namespace-projects", ns, "--from", from, "--to", to}
		args := append([]string{"report", "--by", "node"}, win...)

		// JSON: the rows by hand, the total the sum of the rows.
		r := runMonitor(t, append(args, "--format", "json")...)
		if r.code != 0 {
			t.Fatalf("report --by node: exit %d: %s", r.code, r.stderr)
		}
		rep := decodeReport(t, r.stdout)
		rows := rowsBy(t, rep, "node")
		if len(rows) != len(byNodeByHand)-1 {
			t.Errorf("%d rows by node, want %d: %s", len(rows), len(byNodeByHand)-1, r.stdout)
		}
		for node, want := range byNodeByHand {
			got := rows[node]
			if node == "" {
				got = rep["total"].(map[string]any)
			}
			checkBilling(t, "node "+node, got, want)
		}
		checkTotalIsSum(t, "--by node", rep)

		// GET /v1/report?by=node: the same bytes' JSON.
		a := s.do(t, get("/v1/report?by=node&from="+from+"&to="+to, "a-secret"))
		expect(t, a, 200, "")
		if !sameJSON(a.Body, []byte(r.stdout)) {
			t.Errorf("GET /v1/report?by=node and the command differ:\n%s\n%s", a.Body, r.stdout)
		}

		// CSV.
		c := runMonitor(t, append(args, "--format", "csv")...)
		if c.code != 0 {
			t.Fatalf("report --by node --format csv: exit %d: %s", c.code, c.stderr)
		}
		if got := csvColumns(t, c.stdout, strings.Split(strings.SplitN(byNodeCSV, "\n", 2)[0], ",")); got != byNodeCSV {
			t.Errorf("report --by node --format csv:\n%s\nwant\n%s", got, byNodeCSV)
		}

		// The table: a line per node, largest first.
		tb := runMonitor(t, args...)
		if tb.code != 0 {
			t.Fatalf("report --by node: exit %d: %s", tb.code, tb.stderr)
		}
		i, j := strings.Index(tb.stdout, "gpu-node-1"), strings.Index(tb.stdout, "other-node")
		if i < 0 || j < i || !strings.Contains(tb.stdout, "55.3") {
			t.Errorf("report --by node's table:\n%s", tb.stdout)
		}

		// A node's observed and undeclared hours are the ledger's
		// attributed and undeclared hours of that node.
		l := runMonitor(t, "ledger", "--by", "node", "--format", "json", "--db", dsn, "--prices", prices, "--namespace-projects", ns,
			"--from", from, "--to", to)
		if l.code != 0 {
			t.Fatalf("ledger --by node: exit %d: %s", l.code, l.stderr)
		}
		for node, m := range rowsBy(t, decodeReport(t, l.stdout), "node") {
			got := rows[node]
			if got == nil {
				t.Errorf("the ledger's node %s is no row of the report by node", node)
				continue
			}
			for _, k := range []string{"observed", "undeclared"} {
				lk := k + "_gpu_hours"
				if k == "observed" {
					lk = "attributed_gpu_hours"
				}
				if g, w := got[k+"_gpu_hours"].(float64), m[lk].(float64); math.Abs(g-w) > 1e-6 {
					t.Errorf("node %s: the report's %s GPU-hours %v, the ledger's %s %v", node, k, g, lk, w)
				}
			}
		}

		// By model: the report's MIG rows (model and profile) summed per
		// model are the ledger's model rows: NVIDIA H200 attributed 40 +
		// 30/7 (its 3g.71gb instance) and undeclared 10.
		rm := runMonitor(t, append([]string{"report", "--by", "model", "--format", "json"}, win...)...)
		lm := runMonitor(t, "ledger", "--by", "model", "--format", "json", "--db", dsn, "--prices", prices, "--namespace-projects", ns,
			"--from", from, "--to", to)
		if rm.code != 0 || lm.code != 0 {
			t.Fatalf("report/ledger --by model: exit %d %d: %s %s", rm.code, lm.code, rm.stderr, lm.stderr)
		}
		perModel := map[string][2]float64{}
		for key, m := range rowsBy(t, decodeReport(t, rm.stdout), "model") {
			model := strings.TrimSuffix(key, " 3g.71gb")
			v := perModel[model]
			v[0] += m["observed_gpu_hours"].(float64)
			v[1] += m["undeclared_gpu_hours"].(float64)
			perModel[model] = v
		}
		ledgerModels := rowsBy(t, decodeReport(t, lm.stdout), "model")
		if len(ledgerModels) != 1 {
			t.Errorf("ledger --by model: %d rows, want 1 (NVIDIA H200): %s", len(ledgerModels), lm.stdout)
		}
		for model, m := range ledgerModels {
			want := [2]float64{m["attributed_gpu_hours"].(float64), m["undeclared_gpu_hours"].(float64)}
			if got := perModel[model]; math.Abs(got[0]-want[0]) > 1e-6 || math.Abs(got[1]-want[1]) > 1e-6 {
				t.Errorf("model %s: the report's observed and undeclared GPU-hours, profiles summed, %v; the ledger's %v", model, got, want)
			}
			if model == "NVIDIA H200" && (math.Abs(want[0]-(40+30.0/7)) > 1e-6 || want[1] != 10) {
				t.Errorf("the ledger's NVIDIA H200: attributed %v, undeclared %v, want 44.285714 and 10", want[0], want[1])
			}
		}

		// A node name is the node's whatever the case a registration
		// spells it in (the monitor keeps node names lower-case): a task
		// on k8s_node GPU-Node-2 (no reports) is the row gpu-node-2, its
		// declared hour.
		reg := fmt.Sprintf(`{"schema_version":1,"task_id":"t-case","task_name":"train","project":"p_case","owner":"ann@example.com",
			"start_time":%d,"hostname":"t-case-0","k8s_pod_uid":"pod-case","k8s_node":"GPU-Node-2","labels":{},"gpu_count":1,"gpus":[%s]}`,
			h, wholeGPU("GPU-z", 1))
		expect(t, s.do(t, registerReq(reg, "a-secret")), 201, "")
		done := fmt.Sprintf(`{"schema_version":1,"task_id":"t-case","start_time":%d,"end_time":%d,"duration_seconds":3600,"exit_code":0,"gpu_count":1}`,
			h, h+3600)
		expect(t, s.do(t, post("/v1/task/complete", done, "a-secret")), 200, "")
		r = runMonitor(t, append(args, "--format", "json")...)
		if g := rowsBy(t, decodeReport(t, r.stdout), "node")["gpu-node-2"]; g == nil || g["gpu_hours"] != 1.0 {
			t.Errorf("the row of GPU-Node-2's task: %v\n%s", g, r.stdout)
		}
	})
}

// rowsBy are a report's (or a ledger's) JSON rows by the value of key.
func rowsBy(t *testing.T, rep map[string]any, key string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, row := range rep["rows"].([]any) {
		m := row.(map[string]any)
		out[m["key"].(map[string]any)[key].(string)] = m
	}
	return out
}

// csvColumns projects a CSV on cols, in that order.
func csvColumns(t *testing.T, s string, cols []string) string {
	t.Helper()
	recs, err := csv.NewReader(strings.NewReader(s)).ReadAll()
	if err != nil || len(recs) == 0 {
		t.Fatalf("CSV: %v:\n%s", err, s)
	}
	idx := make([]int, len(cols))
	for i, c := range cols {
		idx[i] = -1
		for j, h := range recs[0] {
			if h == c {
				idx[i] = j
			}
		}
		if idx[i] < 0 {
			t.Fatalf("CSV has no column %s: %s", c, recs[0])
		}
	}
	var b strings.Builder
	w := csv.NewWriter(&b)
	for _, rec := range recs {
		out := make([]string, len(cols))
		for i, j := range idx {
			out[i] = rec[j]
		}
		_ = w.Write(out)
	}
	w.Flush()
	return b.String()
}
