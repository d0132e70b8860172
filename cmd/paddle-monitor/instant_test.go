package main

// Black-box tests of the instant rule (docs/cost.md, "Two bases"): the
// finance trial of one node of four A100s (one in MIG mode) whose reports
// cover only the first 20 minutes of an hour, its figures computed by
// hand, on both stores. Each instant of a declared GPU is billed on the
// observed basis when a report of its node covers it, on the declared
// basis otherwise, never both: before the covered spans were kept as
// intervals, a 100-s task in such an hour paid 100 s observed plus its
// declared 100 s × (1 − 1200/3600) (0.046 GPU-hours).

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// trialModel is the trial's GPU model; its 3g.20gb instance is priced
// per instance-hour.
const trialModel = "NVIDIA A100-SXM4-40GB"

// trialTask registers a Kubernetes task of project on gpu-node-1 with
// pod UID pod and one GPU entry, running [start, end).
func trialTask(t *testing.T, s *server, id, project, pod, gpu string, start, end int64) {
	t.Helper()
	reg := fmt.Sprintf(`{"schema_version":1,"task_id":%q,"task_name":"train","project":%q,"owner":"ann@example.com",
		"start_time":%d,"hostname":%q,"k8s_pod_uid":%q,"k8s_node":"gpu-node-1","labels":{},"gpu_count":1,"gpus":[%s]}`,
		id, project, start, id+"-0", pod, gpu)
	expect(t, s.do(t, registerReq(reg, "a-secret")), 201, "")
	done := fmt.Sprintf(`{"schema_version":1,"task_id":%q,"start_time":%d,"end_time":%d,"duration_seconds":%d,"exit_code":0,"gpu_count":1}`,
		id, start, end, end-start)
	expect(t, s.do(t, post("/v1/task/complete", done, "a-secret")), 200, "")
}

func trialWhole(uuid string, share float64) string {
	return fmt.Sprintf(`{"index":0,"uuid":%q,"name":%q,"memory_total_bytes":42949672960,"share":%g}`, uuid, trialModel, share)
}

// trialUser is a node report's user of pod with presence p.
func trialUser(pod string, p float64) string {
	return fmt.Sprintf(`{"runtime":"containerd","container_id":"c-%s","pod_uid":%q,"namespace":"team-a","pod":"p","container":"paddle",
		"allocated_share":%g,"seen_share":%g,"busy_share":1}`, pod, pod, p, p)
}

// trialReport is gpu-node-1's report of [end-interval, end): GPU-1 held by
// users1 (none: idle), GPU-2 shared by pod-sa and pod-sb, GPU-3 held by
// pod-u whole, GPU-4 in MIG mode with its 3g.20gb instance 1 held by
// pod-m.
func trialReport(end, interval int64, final bool, users1 ...string) string {
	occupied := 1
	if len(users1) == 0 {
		occupied = 0
	}
	whole := func(uuid string, occ int, users ...string) string {
		return fmt.Sprintf(`{"uuid":%q,"gpu_instance_id":null,"name":%q,"samples":60,"busy_share":1,"busy_basis":"utilization",
			"occupied_share":%d,"energy_joules":null,"users":[%s]}`, uuid, trialModel, occ, strings.Join(users, ","))
	}
	ins := []string{
		whole("GPU-1", occupied, users1...),
		whole("GPU-2", 1, trialUser("pod-sa", 0.5), trialUser("pod-sb", 0.5)),
		whole("GPU-3", 1, trialUser("pod-u", 1)),
		fmt.Sprintf(`{"uuid":"GPU-4","gpu_instance_id":1,"profile":"3g.20gb","slices":3,"total_slices":7,"name":%q,"samples":60,
		  "busy_share":1,"busy_basis":"processes","occupied_share":1,"energy_joules":null,"users":[%s]}`, trialModel, trialUser("pod-m", 1)),
	}
	return fmt.Sprintf(`{"schema_version":1,"node":"gpu-node-1","time":%d,"interval_seconds":%d,"samples":60,"final":%t,
		"gpus":[],"instances":[%s]}`, end, interval, final, strings.Join(ins, ","))
}

// trialFleet stores the trial from h: reports cover [h, h+1200) of the
// hour [h, h+3600) (the last one final: the node went away), and
//   - s1 (p_a) held GPU-1 whole for 100 s, [h+100, h+200);
//   - s2 (p_a) held it [h+200, h+1200);
//   - sa (p_a) and sb (p_b) declared half of GPU-2 each, [h, h+1200),
//     and the node saw them share it equally;
//   - under (p_b) declared 0.1 of GPU-3 and the node saw it use all of it;
//   - mig (p_mig) held GPU-4's 3g.20gb instance (3 of 7 slices).
func trialFleet(t *testing.T, s *server, h int64) {
	t.Helper()
	trialTask(t, s, "s1", "p_a", "pod-s1", trialWhole("GPU-1", 1), h+100, h+200)
	trialTask(t, s, "s2", "p_a", "pod-s2", trialWhole("GPU-1", 1), h+200, h+1200)
	trialTask(t, s, "sa", "p_a", "pod-sa", trialWhole("GPU-2", 0.5), h, h+1200)
	trialTask(t, s, "sb", "p_b", "pod-sb", trialWhole("GPU-2", 0.5), h, h+1200)
	trialTask(t, s, "under", "p_b", "pod-u", trialWhole("GPU-3", 0.1), h, h+1200)
	mig := fmt.Sprintf(`{"index":3,"uuid":"GPU-4","name":%q,"memory_total_bytes":20000000000,
		"mig":{"uuid":"MIG-4-1","gpu_instance_id":1,"compute_instance_id":0,"profile":"3g.20gb","slices":3,"total_slices":7}}`, trialModel)
	trialTask(t, s, "mig", "p_mig", "pod-m", mig, h, h+1200)
	// A CPU-only task on the node: no GPU-hours, and no discrepancy.
	cpu := fmt.Sprintf(`{"schema_version":1,"task_id":"cpu","task_name":"etl","project":"p_a","owner":"ann@example.com",
		"start_time":%d,"hostname":"cpu-0","k8s_pod_uid":"pod-cpu","k8s_node":"gpu-node-1","labels":{},"gpu_count":0,"gpus":[]}`, h)
	expect(t, s.do(t, registerReq(cpu, "a-secret")), 201, "")
	done := fmt.Sprintf(`{"schema_version":1,"task_id":"cpu","start_time":%d,"end_time":%d,"duration_seconds":1200,"exit_code":0,"gpu_count":0}`,
		h, h+1200)
	expect(t, s.do(t, post("/v1/task/complete", done, "a-secret")), 200, "")
	for _, r := range []string{
		trialReport(h+100, 100, false),
		trialReport(h+200, 100, false, trialUser("pod-s1", 1)),
		trialReport(h+1200, 1000, true, trialUser("pod-s2", 1)),
	} {
		expect(t, s.do(t, post("/v1/nodes/report", r, "n-secret")), 201, "")
	}
}

// trialByHand are the trial's billed GPU-hours and costs by task (A100
// 10 an hour, its 3g.20gb instance 7 an instance-hour): each task paid
// what the node saw it use, nothing declared (every instant of its
// counted interval was covered).
var trialByHand = map[string][2]float64{
	"s1":    {100.0 / 3600, 10 * 100.0 / 3600},          // 0.027778
	"s2":    {1000.0 / 3600, 10 * 1000.0 / 3600},        // 0.277778
	"sa":    {600.0 / 3600, 10 * 600.0 / 3600},          // half of what the node saw
	"sb":    {600.0 / 3600, 10 * 600.0 / 3600},          // the other half
	"under": {1200.0 / 3600, 10 * 1200.0 / 3600},        // declared 0.1, used 1
	"mig":   {3.0 / 7 * 1200 / 3600, 7 * 1200.0 / 3600}, // 1/3 instance-hour
}

// trialExampleCSV are the columns project, gpu_hours, cost and the
// billing columns of the trial's `report --format csv`, as docs/cost.md's
// worked example of a partly covered hour shows them: p_b is sb's half of
// GPU-2 (600 s) and under's whole GPU-3 (1200 s), 0.5 GPU-hours, though
// they declared 0.2; p_a s1 + s2 + sa = 1700 s; p_mig a third of an
// instance-hour at 7.
const trialExampleCSV = `project,gpu_hours,cost,declared_gpu_hours,observed_gpu_hours,undeclared_gpu_hours,billing_basis
p_b,0.5,5,0.2,0.5,0,observed
p_a,0.472222,4.722222,0.472222,0.472222,0,observed
p_mig,0.142857,2.333333,0.142857,0.142857,0,observed
`

// TestDocsTrialExample: docs/cost.md's worked example of a partly covered
// hour shows what TestInstantRuleTrial checks.
func TestDocsTrialExample(t *testing.T) {
	for _, b := range codeBlocks(t, "../../docs/cost.md") {
		if b.lang == "csv" && strings.HasPrefix(b.text, "project,gpu_hours,cost,declared_gpu_hours,") && strings.Contains(b.text, "p_mig,0.142857") {
			if b.text != trialExampleCSV {
				t.Errorf("docs/cost.md:%d shows\n%s\nthe report prints\n%s", b.line, b.text, trialExampleCSV)
			}
			return
		}
	}
	t.Fatal("docs/cost.md has no worked example of a partly covered hour (a csv block with p_mig,0.142857)")
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-6 }

func TestInstantRuleTrial(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		dir := t.TempDir()
		prices := filepath.Join(dir, "prices.json")
		writeFile(t, prices, fmt.Sprintf(`{"currency":"CNY","models":{%q:10,%q:7}}`, trialModel, trialModel+" 3g.20gb"))
		budgets := filepath.Join(dir, "budgets.json")
		writeFile(t, budgets, `{"currency":"CNY","budgets":[{"project":"p_a","monthly_gpu_hours":10},{"project":"p_b","monthly_cost":100}]}`)
		// One exact node per node token (NODE.md 11): gpu-node-2's reports
		// come with a token of their own.
		tokens := tokensFile(t, t.TempDir(), `{"name":"nodes","sha256":"`+hashHex("n-secret")+`","nodes":["gpu-node-1"]}`,
			`{"name":"nodes-2","sha256":"`+hashHex("n2-secret")+`","nodes":["gpu-node-2"]}`)
		s := startServer(t, dsn, "--tokens", tokens, "--prices", prices, "--budgets", budgets)
		h := time.Now().Unix()/3600*3600 - 2*3600
		trialFleet(t, s, h)
		month := time.Unix(h, 0).UTC().Format("2006-01")
		common := []string{"--db", dsn, "--prices", prices, "--month", month, "--format", "json"}

		// By task (each task has a host name of its own): its bill by hand.
		r := runMonitor(t, append([]string{"report", "--by", "hostname"}, common...)...)
		if r.code != 0 {
			t.Fatalf("report: exit %d: %s", r.code, r.stderr)
		}
		rep := decodeReport(t, r.stdout)
		seen := 0
		for _, row := range rep["rows"].([]any) {
			m := row.(map[string]any)
			id := strings.TrimSuffix(m["key"].(map[string]any)["hostname"].(string), "-0")
			want, ok := trialByHand[id]
			if id == "cpu" {
				if g := m["gpu_hours"].(float64); g != 0 {
					t.Errorf("the CPU-only task billed %v GPU-hours", g)
				}
				continue
			}
			if !ok {
				t.Errorf("a row of task %q", id)
				continue
			}
			seen++
			if g, c := m["gpu_hours"].(float64), m["cost"].(float64); !near(g, want[0]) || math.Abs(c-want[1]) > 0.006 {
				t.Errorf("task %s billed %v GPU-hours (%v), want %.6f (%.2f)", id, g, c, want[0], want[1])
			}
			if m["billing_basis"] != "observed" {
				t.Errorf("task %s billed on the %v basis, want observed", id, m["billing_basis"])
			}
		}
		if seen != len(trialByHand) {
			t.Errorf("%d task rows, want %d: %s", seen, len(trialByHand), r.stdout)
		}
		total := 0.0
		for _, w := range trialByHand {
			total += w[0]
		}
		billed := rep["total"].(map[string]any)["gpu_hours"].(float64)
		if !near(billed, total) {
			t.Errorf("billed %v GPU-hours in all, want %.6f", billed, total)
		}

		// The bill is the ledger's attributed use, per project, and never
		// above its capacity (4 GPUs × 1200 s).
		l := runMonitor(t, append([]string{"ledger", "--by", "project"}, common...)...)
		if l.code != 0 {
			t.Fatalf("ledger: exit %d: %s", l.code, l.stderr)
		}
		attributed := map[string]float64{}
		for _, row := range decodeReport(t, l.stdout)["rows"].([]any) {
			m := row.(map[string]any)
			attributed[m["key"].(map[string]any)["project"].(string)] = m["attributed_gpu_hours"].(float64)
		}
		r = runMonitor(t, append([]string{"report", "--budgets", budgets}, common...)...)
		byProject := decodeReport(t, r.stdout)
		for _, row := range byProject["rows"].([]any) {
			m := row.(map[string]any)
			p := m["key"].(map[string]any)["project"].(string)
			if g := m["gpu_hours"].(float64); !near(g, attributed[p]) {
				t.Errorf("project %s billed %v GPU-hours, the ledger attributed it %v", p, g, attributed[p])
			}
			// Budgets are used on the same figures.
			if b, ok := m["budget"].(map[string]any); ok {
				used := m["gpu_hours"].(float64)
				if b["kind"] == "cost" {
					used = m["cost"].(float64)
				}
				if !near(b["used"].(float64), used) {
					t.Errorf("project %s: budget used %v, billed %v", p, b["used"], used)
				}
			} else if p != "p_mig" {
				t.Errorf("project %s has no budget: %v", p, m)
			}
		}
		// By project as CSV, as docs/cost.md's worked example shows it.
		csvOut := runMonitor(t, "report", "--db", dsn, "--prices", prices, "--month", month, "--format", "csv")
		if got := billingColumnsOf(t, csvOut.stdout); got != trialExampleCSV {
			t.Errorf("the trial's CSV billing columns:\n%s\nwant\n%s", got, trialExampleCSV)
		}

		// Discrepancies: the CPU-only task is not "never observed".
		disc := s.do(t, get("/v1/discrepancies?month="+month, "a-secret"))
		expect(t, disc, 200, "")
		if strings.Contains(string(disc.Body), `"task_id":"cpu"`) {
			t.Errorf("a CPU-only task is a discrepancy: %s", disc.Body)
		}
		c := runMonitor(t, append([]string{"ledger", "--by", "model"}, common...)...)
		capacity := decodeReport(t, c.stdout)["total"].(map[string]any)["capacity_gpu_hours"].(float64)
		if !near(capacity, 4*1200.0/3600) {
			t.Errorf("capacity %v GPU-hours, want %.6f", capacity, 4*1200.0/3600)
		}
		if billed > capacity+1e-6 {
			t.Errorf("billed %v GPU-hours on a fleet of %v", billed, capacity)
		}

		// A finished task's line moves only with data about its own GPUs
		// and time: idle reports of the same node later in the hour (GPU-1
		// idle, the others busy with nobody's pods) and of another node
		// leave s1's and s2's chargeback lines byte-identical.
		lines := func() map[string]string {
			r := runMonitor(t, "report", "--db", dsn, "--prices", prices, "--month", month, "--by", "task", "--format", "csv")
			if r.code != 0 {
				t.Fatalf("report --by task: exit %d: %s", r.code, r.stderr)
			}
			out := map[string]string{}
			for _, l := range strings.Split(r.stdout, "\n") {
				if id, _, ok := strings.Cut(l, ","); ok {
					out[id] = l
				}
			}
			return out
		}
		before := lines()
		later := strings.ReplaceAll(trialReport(h+2400, 1200, false), "pod-", "other-pod-")
		expect(t, s.do(t, post("/v1/nodes/report", later, "n-secret")), 201, "")
		other := strings.Replace(trialReport(h+1800, 1800, false, trialUser("pod-x", 1)), `"gpu-node-1"`, `"gpu-node-2"`, 1)
		other = strings.ReplaceAll(strings.ReplaceAll(other, `"GPU-`, `"GPU-n2-`), "pod-", "n2-pod-")
		expect(t, s.do(t, post("/v1/nodes/report", other, "n2-secret")), 201, "")
		after := lines()
		for _, id := range []string{"s1", "s2", "sa", "sb", "under", "mig"} {
			if before[id] == "" || before[id] != after[id] {
				t.Errorf("task %s's line moved with other GPUs' reports:\n%s\n%s", id, before[id], after[id])
			}
		}
	})
}

// TestStatementUndeclared: a closed month bills the undeclared use the live
// report bills (the close gets --namespace-projects and stores it): before,
// the statement dropped it (1 GPU-hour against 2). A close with other
// inputs than the serving monitor recorded is refused.
func TestStatementUndeclared(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		dir := t.TempDir()
		prices := filepath.Join(dir, "prices.json")
		writeFile(t, prices, `{"currency":"CNY","models":{"NVIDIA H200":10}}`)
		ns := filepath.Join(dir, "namespaces.json")
		writeFile(t, ns, `{"team-b":"ads_x"}`)
		s := startServer(t, dsn, "--tokens", nodeTokens(t), "--prices", prices, "--namespace-projects", ns)
		h := time.Date(2025, 10, 10, 0, 0, 0, 0, time.UTC).Unix()
		// p_tiny's task held GPU-a an hour; an unregistered pod of team-b
		// (ads_x) held GPU-e the same hour.
		billingTask(t, s, "t-tiny", "p_tiny", "pod-a", wholeGPU("GPU-a", 1), h, h+3600)
		rep := fmt.Sprintf(`{"schema_version":1,"node":"gpu-node-1","time":%d,"interval_seconds":3600,"samples":60,
			"gpus":[],"instances":[%s,%s]}`, h+3600, billingInstance("GPU-a", "pod-a", "team-a", 1, -1),
			billingInstance("GPU-e", "pod-e", "team-b", 1, -1))
		expect(t, s.do(t, post("/v1/nodes/report", rep, "n-secret")), 201, "")
		args := []string{"--db", dsn, "--prices", prices, "--namespace-projects", ns, "--month", "2025-10"}
		live := runMonitor(t, append([]string{"report", "--format", "json"}, args...)...)
		if live.code != 0 {
			t.Fatalf("report: exit %d: %s", live.code, live.stderr)
		}
		if got := decodeReport(t, live.stdout)["total"].(map[string]any)["gpu_hours"]; got != 2.0 {
			t.Fatalf("the live report bills %v GPU-hours, want 2:\n%s", got, live.stdout)
		}
		// A close with other inputs than the serving monitor's is refused,
		// naming the difference (closing without --namespace-projects
		// dropped the undeclared hour).
		r := runMonitor(t, "close", "--as", "finance", "--db", dsn, "--prices", prices, "--month", "2025-10")
		if r.code != 2 || !strings.Contains(r.stderr, "--namespace-projects differ from the serving monitor's") {
			t.Errorf("close without --namespace-projects: exit %d, %s", r.code, r.stderr)
		}
		if r := runMonitor(t, append([]string{"close", "--as", "finance"}, args...)...); r.code != 0 {
			t.Fatalf("close: exit %d: %s", r.code, r.stderr)
		}
		closed := runMonitor(t, append([]string{"report", "--format", "json"}, args...)...)
		got := decodeReport(t, closed.stdout)
		if got["closed"] == nil {
			t.Errorf("the closed month's report is not the statement:\n%s", closed.stdout)
		}
		if g := got["total"].(map[string]any)["gpu_hours"]; g != 2.0 {
			t.Errorf("the statement bills %v GPU-hours, the live report 2:\n%s", g, closed.stdout)
		}
		rows := map[string]float64{}
		for _, row := range got["rows"].([]any) {
			m := row.(map[string]any)
			rows[m["key"].(map[string]any)["project"].(string)] = m["gpu_hours"].(float64)
		}
		if rows["ads_x"] != 1 || rows["p_tiny"] != 1 {
			t.Errorf("the statement's rows: %v, want ads_x 1 and p_tiny 1", rows)
		}
		// The statement stores the mapping it used.
		st := runMonitor(t, "statements", "--db", dsn, "--json")
		if !strings.Contains(st.stdout, `"namespace_projects":{"team-b":"ads_x"}`) {
			t.Errorf("the statement does not store its namespace mapping:\n%s", st.stdout)
		}
	})
}
