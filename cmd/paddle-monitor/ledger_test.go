package main

// Black-box tests of the ledger (docs/cost.md, "The ledger"): figures
// computed by hand from two reports, on both stores, from the command line
// and over HTTP, for an admin, a team and a node token.

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// ledgerFleet stores, for the window [h, h+2h): a registered task
// (search_x, pod UID pod-1) on gpu-node-1, and one report covering the
// window's first hour: GPU-a whole, fully occupied by pod-1 (presence 1)
// and an unregistered pod of namespace team-b (presence 0.5); GPU-b in
// MIG mode with one 3g instance (3 of 7 slices) half occupied by a host
// user. The second hour nothing covers.
func ledgerFleet(t *testing.T, s *server, h int64) {
	t.Helper()
	reg := fmt.Sprintf(`{"schema_version":1,"task_id":"t-pod","task_name":"train","project":"search_x","owner":"ann@example.com",
		"start_time":%d,"hostname":"train-0","k8s_pod_uid":"pod-1","k8s_node":"gpu-node-1","labels":{},"gpu_count":1,
		"gpus":[{"index":0,"uuid":"GPU-a","name":"NVIDIA H200","memory_total_bytes":1,"share":1}]}`, h-100)
	expect(t, s.do(t, request{Method: "POST", Path: "/v1/task/register", Body: reg, Token: "a-secret",
		Header: map[string]string{"Idempotency-Key": "t-pod", "User-Agent": "paddle-entrypoint/test"}}), 201, "")
	report := fmt.Sprintf(`{"schema_version":1,"node":"gpu-node-1","time":%d,"interval_seconds":3600,"samples":60,
		"gpus":[{"uuid":"GPU-a","energy_joules":null},{"uuid":"GPU-b","energy_joules":null}],
		"instances":[
		 {"uuid":"GPU-a","gpu_instance_id":null,"name":"NVIDIA H200","samples":60,"busy_share":1,"busy_basis":"utilization","occupied_share":1,
		  "users":[
		   {"runtime":"containerd","container_id":"c1","pod_uid":"pod-1","namespace":"team-a","pod":"train-0","container":"paddle",
		    "allocated_share":1,"seen_share":1,"busy_share":1},
		   {"runtime":"containerd","container_id":"c2","pod_uid":"pod-unknown","namespace":"team-b","pod":"sneaky","container":"x",
		    "allocated_share":0.5,"seen_share":0,"busy_share":0}]},
		 {"uuid":"GPU-b","gpu_instance_id":1,"profile":"3g.71gb","slices":3,"total_slices":7,"name":"NVIDIA H200","samples":60,
		  "busy_share":0.5,"busy_basis":"processes","occupied_share":0.5,
		  "users":[{"runtime":"","cgroup":"/user.slice/user-1000.slice","uid":1000,"allocated_share":0,"seen_share":1,"busy_share":1}]}
		]}`, h+3600)
	expect(t, s.do(t, post("/v1/nodes/report", report, "n-secret")), 201, "")
}

// The figures by hand (GPU-hours): capacity 2 GPUs × 2 h = 4; GPU-a's
// hour split 1 : 0.5 between pod-1 (attributed 2/3) and the team-b pod
// (undeclared 1/3); GPU-b's hour: the instance weighs 3/7, half occupied
// by the host user (unattributed 3/14), the rest unallocated (1 − 3/7 +
// 3/14 = 11/14); the second hour of both GPUs is unobserved (2).
// Costs (H200 10/h, the 3g.71gb instance 5 per instance-hour):
// attributed 6.67, undeclared 3.33, unattributed 3/14 h = 0.5
// instance-hours → 2.50, unallocated 7.86, unobserved 20.00; capacity
// 40.36.
var ledgerByHand = map[string]float64{
	"capacity_gpu_hours":     4,
	"attributed_gpu_hours":   2.0 / 3,
	"undeclared_gpu_hours":   1.0 / 3,
	"unattributed_gpu_hours": 3.0 / 14,
	"unallocated_gpu_hours":  11.0 / 14,
	"unobserved_gpu_hours":   2,
	"check_gpu_hours":        0,
	"attributed_cost":        6.67,
	"undeclared_cost":        3.33,
	"unattributed_cost":      2.5,
	"unallocated_cost":       7.86,
	"unobserved_cost":        20,
	"capacity_cost":          40.36,
}

// ledgerExampleCSV is `ledger --by state --format csv` of ledgerFleet,
// as docs/cost.md's worked example shows it.
const ledgerExampleCSV = "state,gpu_hours,cost\nattributed,0.666667,6.67\nundeclared,0.333333,3.33\nunattributed,0.214286,2.5\n" +
	"unallocated,0.785714,7.86\nunobserved,2,20\ntotal,4,40.36\n"

func TestLedgerByHand(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		dir := t.TempDir()
		prices := filepath.Join(dir, "prices.json")
		writeFile(t, prices, `{"currency":"CNY","models":{"NVIDIA H200":10,"NVIDIA H200 3g.71gb":5}}`)
		ns := filepath.Join(dir, "namespaces.json")
		writeFile(t, ns, `{"team-b":"ads_x","kube-*":"platform"}`)
		s := startServer(t, dsn, "--tokens", nodeTokens(t), "--prices", prices, "--namespace-projects", ns)
		h := time.Now().Unix()/3600*3600 - 3*3600
		ledgerFleet(t, s, h)
		from, to := time.Unix(h, 0).UTC().Format(time.RFC3339), time.Unix(h+7200, 0).UTC().Format(time.RFC3339)

		r := runMonitor(t, "ledger", "--db", dsn, "--prices", prices, "--namespace-projects", ns, "--from", from, "--to", to, "--format", "json")
		if r.code != 0 {
			t.Fatalf("ledger: exit %d: %s", r.code, r.stderr)
		}
		var cli map[string]any
		if err := json.Unmarshal([]byte(r.stdout), &cli); err != nil {
			t.Fatal(err)
		}
		checkFigures(t, "ledger --by node total", cli["total"].(map[string]any), ledgerByHand)
		rows := cli["rows"].([]any)
		if len(rows) != 1 {
			t.Fatalf("%d rows by node: %s", len(rows), r.stdout)
		}
		checkFigures(t, "row gpu-node-1", rows[0].(map[string]any), ledgerByHand)

		// The same over HTTP (admin).
		a := s.do(t, get("/v1/ledger?from="+from+"&to="+to, "a-secret"))
		expect(t, a, 200, "")
		if !sameJSON(a.Body, []byte(r.stdout)) {
			t.Errorf("GET /v1/ledger and the command differ:\n%s\n%s", a.Body, r.stdout)
		}

		// By project: the undeclared hour is ads_x's, the platform's
		// states are "".
		a = s.do(t, get("/v1/ledger?by=project&from="+from+"&to="+to, "a-secret"))
		expect(t, a, 200, "")
		byProject := map[string]map[string]any{}
		for _, row := range a.JSON(t)["rows"].([]any) {
			m := row.(map[string]any)
			byProject[m["key"].(map[string]any)["project"].(string)] = m
		}
		checkFigures(t, "project search_x", byProject["search_x"], map[string]float64{"attributed_gpu_hours": 2.0 / 3, "undeclared_gpu_hours": 0})
		checkFigures(t, "project ads_x", byProject["ads_x"], map[string]float64{"undeclared_gpu_hours": 1.0 / 3, "attributed_gpu_hours": 0})
		checkFigures(t, `project ""`, byProject[""], map[string]float64{"unattributed_gpu_hours": 3.0 / 14, "unobserved_gpu_hours": 2})
		if byProject["search_x"]["capacity_gpu_hours"] != nil {
			t.Errorf("a project row has a capacity: %v", byProject["search_x"])
		}

		// By state.
		r = runMonitor(t, "ledger", "--db", dsn, "--prices", prices, "--namespace-projects", ns, "--from", from, "--to", to, "--by", "state", "--format", "csv")
		wantCSV := ledgerExampleCSV
		if r.code != 0 || r.stdout != wantCSV {
			t.Errorf("ledger --by state --format csv: exit %d\n%s\nwant\n%s%s", r.code, r.stdout, wantCSV, r.stderr)
		}

		// A team sees its own attributed use only.
		a = s.do(t, get("/v1/ledger?by=project&from="+from+"&to="+to, "s-secret"))
		expect(t, a, 200, "")
		team := a.JSON(t)
		if rows := team["rows"].([]any); len(rows) != 1 || rows[0].(map[string]any)["key"].(map[string]any)["project"] != "search_x" {
			t.Fatalf("the team's rows: %s", a.Body)
		}
		checkFigures(t, "the team's total", team["total"].(map[string]any), map[string]float64{"attributed_gpu_hours": 2.0 / 3,
			"undeclared_gpu_hours": 0, "unobserved_gpu_hours": 0, "unallocated_gpu_hours": 0, "unattributed_gpu_hours": 0})
		if team["total"].(map[string]any)["capacity_gpu_hours"] != nil {
			t.Errorf("a team sees the capacity: %s", a.Body)
		}
		expect(t, s.do(t, get("/v1/ledger", "n-secret")), 403, "node token")
		// A 70-minute window, within --raw-retention, is answered to the
		// second from the raw reports (MONITOR.md 20.8; it was refused as
		// not whole hours): 2 GPUs × 4200 s of capacity, the first hour
		// as above, the last 10 minutes of both GPUs unobserved.
		a = s.do(t, get("/v1/ledger?by=model&from="+from+"&to="+time.Unix(h+4200, 0).UTC().Format(time.RFC3339), "a-secret"))
		expect(t, a, 200, "")
		checkFigures(t, "the 70-minute window", a.JSON(t)["total"].(map[string]any), map[string]float64{
			"capacity_gpu_hours": 2 * 4200.0 / 3600, "attributed_gpu_hours": 2.0 / 3, "undeclared_gpu_hours": 1.0 / 3,
			"unattributed_gpu_hours": 3.0 / 14, "unallocated_gpu_hours": 11.0 / 14, "unobserved_gpu_hours": 2 * 600.0 / 3600,
			"check_gpu_hours": 0})
		r70 := runMonitor(t, "ledger", "--db", dsn, "--prices", prices, "--namespace-projects", ns, "--by", "model", "--format", "json", "--from", from, "--to", time.Unix(h+4200, 0).UTC().Format(time.RFC3339))
		if r70.code != 0 || !sameJSON([]byte(r70.stdout), a.Body) {
			t.Errorf("ledger --from --to over 70 minutes: exit %d %s\n%s\nGET:\n%s", r70.code, r70.stderr, r70.stdout, a.Body)
		}
		expect(t, s.do(t, get("/v1/ledger?by=owner", "a-secret")), 400, "by")
		// The split rule is serve's --split for every view (MONITOR.md
		// 20.12): a request asking for one is refused, naming it.
		expect(t, s.do(t, get("/v1/ledger?split=util", "a-secret")), 400, "split: the split rule is the server's --split")
		expect(t, s.do(t, get("/v1/discrepancies?split=equal", "a-secret")), 400, "split: the split rule is the server's --split")

		// Discrepancies: the task declared GPU-a for 2 h, was observed
		// 2/3 h; the two users that are not tied, largest first.
		a = s.do(t, get("/v1/discrepancies?from="+from+"&to="+to, "a-secret"))
		expect(t, a, 200, "")
		var d struct {
			Tasks []struct {
				TaskID      string   `json:"task_id"`
				Declared    float64  `json:"declared_gpu_hours"`
				Observed    float64  `json:"observed_gpu_hours"`
				Differences []string `json:"differences"`
			} `json:"tasks"`
			Users []struct {
				State    string  `json:"state"`
				Project  string  `json:"project"`
				Pod      string  `json:"pod"`
				UID      *int64  `json:"uid"`
				GPUHours float64 `json:"gpu_hours"`
			} `json:"users"`
		}
		if err := json.Unmarshal(a.Body, &d); err != nil {
			t.Fatal(err)
		}
		// The open task is counted to its counted end as the report counts
		// it, its last observation (h + 1 h), not to the window's end: 1
		// declared GPU-hour (it was 2).
		if len(d.Tasks) != 1 || d.Tasks[0].TaskID != "t-pod" || d.Tasks[0].Declared != 1 || d.Tasks[0].Observed != 0.666667 {
			t.Errorf("discrepant tasks: %s", a.Body)
		}
		if len(d.Users) != 2 || d.Users[0].State != "undeclared" || d.Users[0].Project != "ads_x" || d.Users[0].Pod != "sneaky" ||
			d.Users[0].GPUHours != 0.333333 || d.Users[1].State != "unattributed" || d.Users[1].UID == nil || d.Users[1].GPUHours != 0.214286 {
			t.Errorf("users: %s", a.Body)
		}
		r = runMonitor(t, "discrepancies", "--db", dsn, "--prices", prices, "--namespace-projects", ns, "--from", from, "--to", to)
		if r.code != 0 || !sameJSON([]byte(r.stdout), a.Body) {
			t.Errorf("discrepancies: exit %d, %s\nvs GET: %s%s", r.code, r.stdout, a.Body, r.stderr)
		}
	})
}

func checkFigures(t *testing.T, where string, got map[string]any, want map[string]float64) {
	t.Helper()
	if got == nil {
		t.Fatalf("%s: no such row", where)
	}
	for k, v := range want {
		g, ok := got[k].(float64)
		if !ok || math.Abs(g-v) > 5e-6 {
			t.Errorf("%s: %s = %v, want %v", where, k, got[k], v)
		}
	}
}

func sameJSON(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return fmt.Sprint(x) == fmt.Sprint(y) && strings.TrimSpace(string(a)) != ""
}

// TestDocsLedgerExample: docs/cost.md's worked example shows what
// TestLedgerByHand checks.
func TestDocsLedgerExample(t *testing.T) {
	for _, b := range codeBlocks(t, "../../docs/cost.md") {
		if b.lang == "csv" && strings.HasPrefix(b.text, "state,gpu_hours,cost\n") {
			if want := ledgerExampleCSV; b.text != want {
				t.Errorf("docs/cost.md:%d shows\n%s\nthe ledger prints\n%s", b.line, b.text, want)
			}
			return
		}
	}
	t.Fatal("docs/cost.md has no worked example of the ledger (a csv block beginning state,gpu_hours,cost)")
}
