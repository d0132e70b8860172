package main

// Black-box tests of the fleet's series on /metrics (docs/monitor.md,
// "Metrics"; docs/cost.md, "The ledger") on both stores.

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// TestFleetMetrics: after ledgerFleet's registration and report, a
// scrape serves the current month's ledger by state and model (the
// figures of ledgerByHand in GPU-seconds: attributed 2/3 h = 2400,
// undeclared 1/3 h = 1200, unattributed 3/14 h = 771.43, unallocated
// 11/14 h = 2828.57; unobserved each GPU's capacity after the report's
// end until the scrape), the report's three users with their states and
// the node's report age, promtool-clean. A final report of another node
// leaves none of its series; `node retire` removes the node's.
func TestFleetMetrics(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		dir := t.TempDir()
		ns := filepath.Join(dir, "namespaces.json")
		writeFile(t, ns, `{"team-b":"ads_x","kube-*":"platform"}`)
		s := startServer(t, dsn, "--tokens", nodeTokens(t), "--namespace-projects", ns)
		now := time.Now()
		month := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC).Unix()
		h := max(now.Unix()/3600*3600-3*3600, month)
		ledgerFleet(t, s, h)
		final := fmt.Sprintf(`{"schema_version":1,"node":"gpu-node-2","time":%d,"interval_seconds":600,"samples":6,"final":true,
			"gpus":[{"uuid":"GPU-z","energy_joules":null}],
			"instances":[{"uuid":"GPU-z","gpu_instance_id":null,"name":"Tesla T4","samples":6,"busy_share":0,"busy_basis":"utilization",
			"occupied_share":1,"users":[{"runtime":"containerd","container_id":"c3","pod_uid":"pod-3","namespace":"team-c","pod":"p",
			"container":"c","allocated_share":1,"seen_share":1,"busy_share":0}]}]}`, h+3600)
		// gpu-node-2's own report: a node token names one node (NODE.md
		// 12.10), so the admin's token sends it here.
		expect(t, s.do(t, post("/v1/nodes/report", final, "a-secret")), 201, "")

		before := time.Now().Unix()
		a := s.do(t, get("/metrics", ""))
		after := time.Now().Unix()
		if a.Status != 200 {
			t.Fatalf("/metrics: %d %s", a.Status, a.Body)
		}
		body := string(a.Body)
		promtoolCheck(t, body)

		users := series(body, "paddle_gpu_user_info")
		wantUsers := []string{
			`paddle_gpu_user_info{GPU_I_ID="",UUID="GPU-a",container="paddle",container_id="c1",namespace="team-a",node="gpu-node-1",pod="train-0",project="search_x",runtime="containerd",slurm_job="",state="attributed",task_id="t-pod"} 1`,
			`paddle_gpu_user_info{GPU_I_ID="",UUID="GPU-a",container="x",container_id="c2",namespace="team-b",node="gpu-node-1",pod="sneaky",project="ads_x",runtime="containerd",slurm_job="",state="undeclared",task_id=""} 1`,
			`paddle_gpu_user_info{GPU_I_ID="1",UUID="GPU-b",container="",container_id="",namespace="",node="gpu-node-1",pod="",project="",runtime="",slurm_job="",state="unattributed",task_id=""} 1`,
		}
		if strings.Join(users, "\n") != strings.Join(wantUsers, "\n") {
			t.Errorf("user series:\n%s\nwant\n%s", strings.Join(users, "\n"), strings.Join(wantUsers, "\n"))
		}

		// The ages and the unobserved seconds depend on the scrape's
		// instant: between the clock before and after it.
		ages := series(body, "paddle_node_report_age_seconds")
		if len(ages) != 1 || !strings.HasPrefix(ages[0], `paddle_node_report_age_seconds{node="gpu-node-1"} `) {
			t.Fatalf("age series: %q", ages)
		}
		between(t, "the report's age", value(t, ages[0]), float64(max(0, before-(h+3600))), float64(max(0, after-(h+3600))))
		fleet := map[string]float64{}
		for _, l := range series(body, "paddle_fleet_gpu_seconds") {
			m := regexp.MustCompile(`^paddle_fleet_gpu_seconds\{gpu_model="([^"]*)",state="([^"]*)"\} `).FindStringSubmatch(l)
			if m == nil {
				t.Fatalf("a fleet series: %s", l)
			}
			fleet[m[1]+"/"+m[2]] = value(t, l)
		}
		for k, want := range map[string]float64{"NVIDIA H200/attributed": 2400, "NVIDIA H200/undeclared": 1200,
			"NVIDIA H200/unattributed": 771.43, "NVIDIA H200/unallocated": 2828.57,
			"Tesla T4/attributed": 0, "Tesla T4/undeclared": 0, "Tesla T4/unattributed": 600, "Tesla T4/unallocated": 0, "Tesla T4/unobserved": 0} {
			if got, ok := fleet[k]; !ok || got != want {
				t.Errorf("paddle_fleet_gpu_seconds %s = %v (%v), want %v", k, got, ok, want)
			}
		}
		between(t, "the H200s' unobserved seconds", fleet["NVIDIA H200/unobserved"], float64(2*max(0, before-(h+3600))),
			float64(2*max(0, after-(h+3600))))
		if len(fleet) != 10 {
			t.Errorf("%d fleet series, want 10 (2 models × 5 states): %v", len(fleet), fleet)
		}
		if !strings.Contains(body, "\npaddle_monitor_fleet_scrape_error 0\n") {
			t.Errorf("no paddle_monitor_fleet_scrape_error 0 in\n%s", body)
		}

		// Retired: the node's series leave /metrics.
		if r := runMonitor(t, "node", "retire", "gpu-node-1", "--db", dsn); r.code != 0 {
			t.Fatalf("node retire: exit %d: %s", r.code, r.stderr)
		}
		a = s.do(t, get("/metrics", ""))
		if got := series(string(a.Body), "paddle_gpu_user_info", "paddle_node_report_age_seconds"); len(got) > 0 {
			t.Errorf("a retired node's series: %q", got)
		}
	})
}

// series are the sample lines of the named families in an exposition.
func series(body string, names ...string) []string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		for _, n := range names {
			if strings.HasPrefix(l, n+"{") || strings.HasPrefix(l, n+" ") {
				out = append(out, l)
			}
		}
	}
	return out
}

func value(t *testing.T, line string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
	if err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	return v
}

func between(t *testing.T, what string, v, lo, hi float64) {
	t.Helper()
	if v < lo || v > hi {
		t.Errorf("%s = %v, want in [%v, %v]", what, v, lo, hi)
	}
}
