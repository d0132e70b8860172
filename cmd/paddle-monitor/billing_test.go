package main

// Black-box tests of billing from observations (docs/cost.md, "Two
// bases"): the report of a fleet whose node reports observed what its
// tasks declared otherwise, figures computed by hand, on both stores,
// from the command line and over HTTP.

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// billingTask registers a Kubernetes task of project on gpu-node-1 (or,
// with pod "", on the host other-node outside Kubernetes) started at
// start, with one GPU entry; end > 0 completes it then.
func billingTask(t *testing.T, s *server, id, project, pod, gpu string, start, end int64) {
	t.Helper()
	labelledTask(t, s, id, project, pod, gpu, "{}", start, end)
}

// labelledTask is billingTask with the registration's labels (a JSON
// object).
func labelledTask(t *testing.T, s *server, id, project, pod, gpu, labels string, start, end int64) {
	t.Helper()
	where := `"hostname":"other-node"`
	if pod != "" {
		where = fmt.Sprintf(`"hostname":%q,"k8s_pod_uid":%q,"k8s_node":"gpu-node-1"`, id+"-0", pod)
	}
	reg := fmt.Sprintf(`{"schema_version":1,"task_id":%q,"task_name":"train","project":%q,"owner":"ann@example.com",
		"start_time":%d,%s,"labels":%s,"gpu_count":1,"gpus":[%s]}`, id, project, start, where, labels, gpu)
	expect(t, s.do(t, registerReq(reg, "a-secret")), 201, "")
	if end > 0 {
		done := fmt.Sprintf(`{"schema_version":1,"task_id":%q,"start_time":%d,"end_time":%d,"duration_seconds":%d,"exit_code":0,"gpu_count":1}`, id, start, end, end-start)
		expect(t, s.do(t, post("/v1/task/complete", done, "a-secret")), 200, "")
	}
}

// wholeGPU is a registration's entry of a whole H200 held at share.
func wholeGPU(uuid string, share float64) string {
	return fmt.Sprintf(`{"index":0,"uuid":%q,"name":"NVIDIA H200","memory_total_bytes":150754820096,"share":%g}`, uuid, share)
}

// billingInstance is a report's whole GPU used for the report's whole
// span by one user (presence 1) of pod in namespace, busy or not, with
// energy joules (< 0: null).
func billingInstance(uuid, pod, namespace string, busy float64, energy float64) string {
	e := "null"
	if energy >= 0 {
		e = fmt.Sprintf("%g", energy)
	}
	return fmt.Sprintf(`{"uuid":%q,"gpu_instance_id":null,"name":"NVIDIA H200","samples":60,"busy_share":%g,"busy_basis":"utilization",
		"occupied_share":1,"energy_joules":%s,"users":[{"runtime":"containerd","container_id":"c-%s","pod_uid":%q,"namespace":%q,
		"pod":"p","container":"paddle","allocated_share":1,"seen_share":1,"busy_share":%g}]}`, uuid, busy, e, pod, pod, namespace, busy)
}

// billingFleet stores, from h: on gpu-node-1 (Kubernetes), one node
// report covering [h, h+10h) in which
//   - p_tiny's task (declared share 0.01, completed at h+10h) held GPU-a
//     whole, with 36 MJ of energy (10 kWh);
//   - p_short's task (completed one second after its start) held GPU-b;
//   - p_exec's task (exec mode: no completion, no heartbeat) held GPU-c,
//     idle all along;
//   - p_mixed's task (share 0.5, completed at h+12h) held GPU-d whole;
//   - an unregistered pod of namespace team-b held GPU-e;
//   - p_mig's task held the 3g.71gb instance 1 of GPU-f (3 of 7 slices);
//
// and p_never's task (on gpu-node-1, in no report) ran [h, h+1h), and
// p_decl's on other-node, which sends no reports, [h, h+3h).
func billingFleet(t *testing.T, s *server, h int64) {
	t.Helper()
	billingTask(t, s, "t-tiny", "p_tiny", "pod-a", wholeGPU("GPU-a", 0.01), h, h+36000)
	billingTask(t, s, "t-short", "p_short", "pod-b", wholeGPU("GPU-b", 1), h, h+1)
	billingTask(t, s, "t-exec", "p_exec", "pod-c", wholeGPU("GPU-c", 1), h, 0)
	billingTask(t, s, "t-mixed", "p_mixed", "pod-d", wholeGPU("GPU-d", 0.5), h, h+12*3600)
	mig := `{"index":0,"uuid":"GPU-f","name":"NVIDIA H200","memory_total_bytes":76000000000,
		"mig":{"uuid":"MIG-f-1","gpu_instance_id":1,"compute_instance_id":0,"profile":"3g.71gb","slices":3,"total_slices":7}}`
	billingTask(t, s, "t-mig", "p_mig", "pod-f", mig, h, h+36000)
	billingTask(t, s, "t-never", "p_never", "pod-g", wholeGPU("GPU-g", 1), h, h+3600)
	billingTask(t, s, "t-decl", "p_decl", "", wholeGPU("GPU-x", 1), h, h+3*3600)
	instances := []string{
		billingInstance("GPU-a", "pod-a", "team-a", 1, 36e6),
		billingInstance("GPU-b", "pod-b", "team-a", 1, -1),
		billingInstance("GPU-c", "pod-c", "team-a", 0, -1),
		billingInstance("GPU-d", "pod-d", "team-a", 1, -1),
		billingInstance("GPU-e", "pod-e", "team-b", 1, -1),
		`{"uuid":"GPU-f","gpu_instance_id":1,"profile":"3g.71gb","slices":3,"total_slices":7,"name":"NVIDIA H200","samples":60,
		  "busy_share":1,"busy_basis":"processes","occupied_share":1,"energy_joules":null,
		  "users":[{"runtime":"containerd","container_id":"c-pod-f","pod_uid":"pod-f","namespace":"team-a","pod":"p","container":"paddle",
		   "allocated_share":1,"seen_share":1,"busy_share":1}]}`,
	}
	rep := fmt.Sprintf(`{"schema_version":1,"node":"gpu-node-1","time":%d,"interval_seconds":36000,"samples":60,
		"gpus":[],"instances":[%s]}`, h+36000, strings.Join(instances, ","))
	expect(t, s.do(t, post("/v1/nodes/report", rep, "n-secret")), 201, "")
}

// billingByHand are the figures of billingFleet over [h, h+12h) by
// project (H200 10 an hour, its 3g.71gb instance 5 an instance-hour;
// namespace team-b charged to ads_x):
//   - p_tiny declared 0.01 × 10 h = 0.1 but was observed whole for 10 h:
//     billed 10 (100), observed; its GPU's 36 MJ are 10 kWh;
//   - p_short completed 1 s after its start, observed 10 h: billed 10,
//     declared 10 (its counted end is its last attributed instant,
//     section 20.3);
//   - p_exec observed 10 h, idle all along: billed 10, idle 10 (its
//     declared 10 h: the report that tied it was the last it was seen);
//   - p_mixed declared 0.5 × 12 h = 6; the reports covered 10 h of its
//     12, observed whole: billed 10 + 0.5 × 2 = 11 (110), mixed;
//   - p_mig declared and observed 3/7 × 10 h = 4.285714, 10
//     instance-hours (50);
//   - p_never, on a covered node but in no report: its node's reports
//     covered its hour and attributed it nothing, so it pays nothing
//     (section 20.2; listed as never observed);
//   - p_decl, on a node without reports: its declared 3 h;
//   - ads_x: 10 undeclared hours, a row of its own with no task.
//
// Total billed 10 + 10 + 10 + 11 + 30/7 + 0 + 3 + 10 = 58.285714 (590);
// declared 0.1 + 10 + 10 + 6 + 30/7 + 1 + 3 = 34.385714; observed
// 40 + 30/7 = 44.285714; undeclared 10.
var billingByHand = map[string]map[string]any{
	"p_tiny":  {"gpu_hours": 10.0, "cost": 100.0, "declared_gpu_hours": 0.1, "observed_gpu_hours": 10.0, "billing_basis": "observed", "energy_kwh": 10.0, "tasks": 1.0},
	"p_short": {"gpu_hours": 10.0, "cost": 100.0, "declared_gpu_hours": 10.0, "observed_gpu_hours": 10.0, "billing_basis": "observed", "idle_gpu_hours": 0.0},
	"p_exec":  {"gpu_hours": 10.0, "cost": 100.0, "declared_gpu_hours": 10.0, "observed_gpu_hours": 10.0, "billing_basis": "observed", "idle_gpu_hours": 10.0, "open_tasks": 1.0},
	"p_mixed": {"gpu_hours": 11.0, "cost": 110.0, "declared_gpu_hours": 6.0, "observed_gpu_hours": 10.0, "billing_basis": "mixed"},
	"p_mig":   {"gpu_hours": 30.0 / 7, "cost": 50.0, "declared_gpu_hours": 30.0 / 7, "observed_gpu_hours": 30.0 / 7, "billing_basis": "observed"},
	"p_never": {"gpu_hours": 0.0, "cost": 0.0, "declared_gpu_hours": 1.0, "observed_gpu_hours": 0.0, "billing_basis": "observed"},
	"p_decl":  {"gpu_hours": 3.0, "cost": 30.0, "declared_gpu_hours": 3.0, "observed_gpu_hours": 0.0, "billing_basis": "declared"},
	"ads_x":   {"gpu_hours": 10.0, "cost": 100.0, "undeclared_gpu_hours": 10.0, "observed_gpu_hours": 0.0, "billing_basis": "observed", "tasks": 0.0},
	"":        {"gpu_hours": 58.285714, "cost": 590.0, "declared_gpu_hours": 34.385714, "observed_gpu_hours": 40 + 30.0/7, "undeclared_gpu_hours": 10.0, "billing_basis": "mixed", "tasks": 7.0},
}

// checkBilling compares a row (or the total) with figures by hand: numbers
// within 1e-6, text exactly.
func checkBilling(t *testing.T, where string, got map[string]any, want map[string]any) {
	t.Helper()
	for k, v := range want {
		switch v := v.(type) {
		case float64:
			g, ok := got[k].(float64)
			if !ok || math.Abs(g-v) > 1e-6 {
				t.Errorf("%s: %s = %v, want %v", where, k, got[k], v)
			}
		default:
			if got[k] != v {
				t.Errorf("%s: %s = %v, want %v", where, k, got[k], v)
			}
		}
	}
}

func TestBillingFromObservations(t *testing.T) {
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
		args := []string{"report", "--db", dsn, "--prices", prices, "--namespace-projects", ns, "--from", from, "--to", to}

		r := runMonitor(t, append(args, "--format", "json")...)
		if r.code != 0 {
			t.Fatalf("report: exit %d: %s", r.code, r.stderr)
		}
		rep := decodeReport(t, r.stdout)
		rows := map[string]map[string]any{}
		for _, row := range rep["rows"].([]any) {
			m := row.(map[string]any)
			rows[m["key"].(map[string]any)["project"].(string)] = m
		}
		if len(rows) != len(billingByHand)-1 {
			t.Errorf("%d rows, want %d: %s", len(rows), len(billingByHand)-1, r.stdout)
		}
		for project, want := range billingByHand {
			got := rows[project]
			if project == "" {
				got = rep["total"].(map[string]any)
			}
			checkBilling(t, "project "+project, got, want)
		}

		// Over HTTP the same.
		a := s.do(t, get("/v1/report?from="+from+"&to="+to, "a-secret"))
		expect(t, a, 200, "")
		if !sameJSON(a.Body, []byte(r.stdout)) {
			t.Errorf("GET /v1/report and the command differ:\n%s\n%s", a.Body, r.stdout)
		}

		// The page of the month that holds h (the report covers part of
		// it) has the billing columns of each project.
		page := s.do(t, request{Method: "GET", Path: "/?month=" + time.Unix(h, 0).UTC().Format("2006-01"), Token: "a-secret", NoSpecCheck: true})
		if page.Status != 200 {
			t.Fatalf("page: %d", page.Status)
		}
		for _, want := range []string{"<th class=\"key\">Billed on</th>", "<td class=\"key\">declared</td>", "<td class=\"key\">observed</td>"} {
			if !strings.Contains(string(page.Body), want) {
				t.Errorf("the page has no %s", want)
			}
		}

		// The CSV's billing columns.
		r = runMonitor(t, append(args, "--format", "csv")...)
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if !strings.HasSuffix(lines[0], ",declared_gpu_hours,observed_gpu_hours,undeclared_gpu_hours,billing_basis") {
			t.Errorf("CSV header: %s", lines[0])
		}
		if got := billingColumnsOf(t, r.stdout); got != billingExampleCSV {
			t.Errorf("the CSV's billing columns:\n%s\nwant\n%s", got, billingExampleCSV)
		}
		found := false
		for _, l := range lines[1:] {
			if strings.HasPrefix(l, "p_mixed,") {
				found = true
				if !strings.HasSuffix(l, ",6,10,0,mixed") {
					t.Errorf("CSV p_mixed: %s", l)
				}
			}
		}
		if !found {
			t.Errorf("no p_mixed line in the CSV:\n%s", r.stdout)
		}

		// The table says the basis of the total under the table (hours
		// with 3 significant digits, as the table writes them).
		r = runMonitor(t, args...)
		if !strings.Contains(r.stdout, "billed on the mixed basis: 34.4 GPU-hours declared, 44.3 observed (attributed), 10.0 undeclared charged to projects") {
			t.Errorf("table:\n%s", r.stdout)
		}

		// Every --by: the total is the sum of the rows.
		for _, by := range facts.Keys {
			r := runMonitor(t, append(args, "--format", "json", "--by", by)...)
			if r.code != 0 {
				t.Fatalf("report --by %s: exit %d: %s", by, r.code, r.stderr)
			}
			checkTotalIsSum(t, "--by "+by, decodeReport(t, r.stdout))
		}

		// The task on the covered node that no user was tied to pays
		// nothing, and discrepancies lists it as never observed.
		a = s.do(t, get("/v1/discrepancies?from="+from+"&to="+to, "a-secret"))
		expect(t, a, 200, "")
		var d struct {
			Tasks []struct {
				TaskID      string   `json:"task_id"`
				Differences []string `json:"differences"`
				Stake       *float64 `json:"money_at_stake"`
			} `json:"tasks"`
		}
		if err := json.Unmarshal(a.Body, &d); err != nil {
			t.Fatal(err)
		}
		never := false
		for i, task := range d.Tasks {
			if task.TaskID == "t-never" && slices.Contains(task.Differences, "never observed") {
				never = true
				// Its declared hour at 10, against nothing observed.
				if task.Stake == nil || *task.Stake != 10 {
					t.Errorf("t-never's money at stake %v, want 10", task.Stake)
				}
			}
			// Sorted by the money at stake, largest first.
			if i > 0 && task.Stake != nil && d.Tasks[i-1].Stake != nil && math.Abs(*task.Stake) > math.Abs(*d.Tasks[i-1].Stake) {
				t.Errorf("discrepancies not sorted by money at stake: %s", a.Body)
			}
		}
		if !never {
			t.Errorf("discrepancies do not list t-never as never observed: %s", a.Body)
		}
		checkDiscrepancyFormats(t, s, dsn, prices, ns, from, to)

		// Without --namespace-projects the undeclared hours are no one's.
		r = runMonitor(t, "report", "--db", dsn, "--prices", prices, "--from", from, "--to", to, "--format", "json")
		checkBilling(t, "total without namespaces", decodeReport(t, r.stdout)["total"].(map[string]any),
			map[string]any{"gpu_hours": 48.285714, "cost": 490.0, "undeclared_gpu_hours": 0.0})
	})
}

// billingExampleCSV are the columns project, gpu_hours, cost and the
// billing columns of `report --format csv` of billingFleet, as
// docs/cost.md's worked example shows them.
const billingExampleCSV = `project,gpu_hours,cost,declared_gpu_hours,observed_gpu_hours,undeclared_gpu_hours,billing_basis
p_mixed,11,110,6,10,0,mixed
ads_x,10,100,0,0,10,observed
p_exec,10,100,10,10,0,observed
p_short,10,100,10,10,0,observed
p_tiny,10,100,0.1,10,0,observed
p_mig,4.285714,50,4.285714,4.285714,0,observed
p_decl,3,30,3,0,0,declared
p_never,0,0,1,0,0,observed
`

// billingColumnsOf projects a report's CSV on the columns of
// billingExampleCSV.
func billingColumnsOf(t *testing.T, s string) string {
	t.Helper()
	recs, err := csv.NewReader(strings.NewReader(s)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Split(strings.SplitN(billingExampleCSV, "\n", 2)[0], ",")
	idx := make([]int, len(want))
	for i, name := range want {
		idx[i] = slices.Index(recs[0], name)
		if idx[i] < 0 {
			t.Fatalf("no column %s in %v", name, recs[0])
		}
	}
	var b strings.Builder
	for _, rec := range recs {
		cells := make([]string, len(idx))
		for i, j := range idx {
			cells[i] = rec[j]
		}
		b.WriteString(strings.Join(cells, ",") + "\n")
	}
	return b.String()
}

// TestDocsBillingExample: docs/cost.md's worked example of the two bases
// shows what TestBillingFromObservations checks.
func TestDocsBillingExample(t *testing.T) {
	for _, b := range codeBlocks(t, "../../docs/cost.md") {
		if b.lang == "csv" && strings.HasPrefix(b.text, "project,gpu_hours,cost,declared_gpu_hours,") {
			if b.text != billingExampleCSV {
				t.Errorf("docs/cost.md:%d shows\n%s\nthe report prints\n%s", b.line, b.text, billingExampleCSV)
			}
			return
		}
	}
	t.Fatal("docs/cost.md has no worked example of billing (a csv block beginning project,gpu_hours,cost,declared_gpu_hours)")
}

func decodeReport(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("%v: %s", err, s)
	}
	return m
}

// checkTotalIsSum checks that the total's billed, declared, observed and
// undeclared GPU-hours and cost are the sums of the rows' (each row
// rounded to the microhour).
func checkTotalIsSum(t *testing.T, where string, rep map[string]any) {
	t.Helper()
	rows := rep["rows"].([]any)
	total := rep["total"].(map[string]any)
	for _, k := range []string{"gpu_hours", "cost", "observed_gpu_hours", "undeclared_gpu_hours"} {
		sum := 0.0
		for _, row := range rows {
			sum += row.(map[string]any)[k].(float64)
		}
		if got := total[k].(float64); math.Abs(got-sum) > 1e-6*float64(len(rows)+1) {
			t.Errorf("%s: total %s = %v, Σ rows = %v", where, k, got, sum)
		}
	}
}

// TestBillingMonthSeries: budgets and the month series are on the billed
// basis. A task that declared a share of 0.01 and held its GPU whole for
// the last whole hour is 3600 GPU-seconds (10 CNY) in
// paddle_project_month_*, and 1 GPU-hour of its 10-hour budget; the
// undeclared hour of namespace team-b is ads_x's.
func TestBillingMonthSeries(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		now := time.Now().UTC()
		h := now.Unix()/3600*3600 - 3600
		if h < facts.Month(now).From.Unix() {
			t.Skip("the month began less than an hour ago: its last whole hour is last month's")
		}
		dir := t.TempDir()
		prices := filepath.Join(dir, "prices.json")
		writeFile(t, prices, `{"currency":"CNY","models":{"NVIDIA H200":10}}`)
		ns := filepath.Join(dir, "namespaces.json")
		writeFile(t, ns, `{"team-b":"ads_x"}`)
		budgets := filepath.Join(dir, "budgets.json")
		writeFile(t, budgets, `{"currency":"CNY","budgets":[{"project":"p_tiny","monthly_gpu_hours":10}]}`)
		s := startServer(t, dsn, "--tokens", nodeTokens(t), "--prices", prices, "--namespace-projects", ns, "--budgets", budgets)
		billingTask(t, s, "t-tiny", "p_tiny", "pod-a", wholeGPU("GPU-a", 0.01), h, h+3600)
		rep := fmt.Sprintf(`{"schema_version":1,"node":"gpu-node-1","time":%d,"interval_seconds":3600,"samples":60,
			"gpus":[],"instances":[%s,%s]}`, h+3600, billingInstance("GPU-a", "pod-a", "team-a", 1, -1),
			billingInstance("GPU-e", "pod-e", "team-b", 1, -1))
		expect(t, s.do(t, post("/v1/nodes/report", rep, "n-secret")), 201, "")

		body := string(s.do(t, request{Method: "GET", Path: "/metrics", Token: "a-secret", NoSpecCheck: true}).Body)
		for _, w := range []string{
			`paddle_project_month_gpu_seconds{project="p_tiny"} 3600`,
			`paddle_project_month_cost{project="p_tiny"} 10`,
			`paddle_project_month_gpu_seconds{project="ads_x"} 3600`,
			`paddle_project_budget_gpu_seconds{project="p_tiny"} 36000`,
		} {
			if !strings.Contains(body, w+"\n") {
				t.Errorf("/metrics has no %s", w)
			}
		}

		r := runMonitor(t, "report", "--db", dsn, "--prices", prices, "--budgets", budgets, "--namespace-projects", ns,
			"--month", now.Format("2006-01"), "--format", "json")
		if r.code != 0 {
			t.Fatalf("report: exit %d: %s", r.code, r.stderr)
		}
		for _, row := range decodeReport(t, r.stdout)["rows"].([]any) {
			m := row.(map[string]any)
			if m["key"].(map[string]any)["project"] != "p_tiny" {
				continue
			}
			b, _ := m["budget"].(map[string]any)
			if b == nil || b["used"] != 1.0 || b["used_share"] != 0.1 {
				t.Errorf("p_tiny's budget: %v", m["budget"])
			}
			return
		}
		t.Errorf("no row p_tiny: %s", r.stdout)
	})
}
