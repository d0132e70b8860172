package main

// Black-box tests of late node reports (NODE.md 11 "Late reports are
// adjustments", MONITOR.md 20.13 and 20.14), on both stores, with figures
// computed by hand.

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// lateObsPrices prices an H200 GPU-hour at 3 CNY.
const lateObsPrices = `{"currency":"CNY","default":2.0,"models":{"NVIDIA H200":3.0}}`

// lateAdjustments are a month report's adjustments (JSON).
type lateAdjustments struct {
	Adjustments []struct {
		AdjustmentOf string  `json:"adjustment_of"`
		Project      string  `json:"project"`
		GPUHours     float64 `json:"gpu_hours"`
		Cost         float64 `json:"cost"`
		Tasks        []struct {
			Change   string  `json:"change"`
			Owner    string  `json:"owner"`
			GPUHours float64 `json:"gpu_hours"`
			Cost     float64 `json:"cost"`
		} `json:"tasks"`
	} `json:"adjustments"`
}

func monthReport(t *testing.T, s *server, month string) answer {
	t.Helper()
	a := s.do(t, get("/v1/report?by=project&month="+month, "a-secret"))
	expect(t, a, 200, "")
	return a
}

func adjustmentsOf(t *testing.T, a answer) lateAdjustments {
	t.Helper()
	var r lateAdjustments
	if err := json.Unmarshal(a.Body, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestLateNodeReportAdjusts (F7): search_obs's pod declares 0.1 of an H200
// for 10 h in the month before last (M2), with no node report: M2 closes
// billing it 0.1 × 10 = 1 GPU-hour, 3 CNY. Then gpu-node-1's report of
// those 10 h arrives (the agent spools for 168 h): the pod used the whole
// GPU, 10 observed GPU-hours, 30 CNY. Before, M2's live figures moved and
// no month billed the 9 GPU-hours; now M2's statement stays byte for byte,
// and the next open month (M1) carries an observed_after_close adjustment
// of 10 − 1 = 9 GPU-hours and 30 − 3 = 27 CNY; when M1 closes its
// statement freezes it, and the current month does not count it again.
// M1's statement records the report's time as its report_cut (20.14).
func TestLateNodeReportAdjusts(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		dir := t.TempDir()
		prices := filepath.Join(dir, "prices.json")
		writeFile(t, prices, lateObsPrices)
		s := startServer(t, dsn, "--tokens", trustTokens(t), "--prices", prices)
		now := time.Now().UTC()
		cur := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
		m1, m2 := cur.AddDate(0, -1, 0), cur.AddDate(0, -2, 0)
		M1, M2 := m1.Format("2006-01"), m2.Format("2006-01")
		start := m2.Unix() + 24*3600
		end := start + 10*3600
		reg := fmt.Sprintf(`{"schema_version":1,"task_id":"obs-1","task_name":"train","project":"search_obs","owner":"ann@example.com",
			"start_time":%d,"hostname":"train-0","k8s_pod_uid":"pod-obs","k8s_node":"gpu-node-1","labels":{},"gpu_count":1,
			"gpus":[{"index":0,"uuid":"GPU-obs","name":"NVIDIA H200","memory_total_bytes":1,"share":0.1}]}`, start)
		expect(t, s.do(t, request{Method: "POST", Path: "/v1/task/register", Body: reg, Token: "s-secret",
			Header: map[string]string{"Idempotency-Key": "obs-1", "User-Agent": "paddle-entrypoint/test"}}), 201, "")
		done := fmt.Sprintf(`{"schema_version":1,"task_id":"obs-1","start_time":%d,"end_time":%d,"duration_seconds":36000,
			"exit_code":0,"gpu_count":1,"gpu_seconds":3600,"gpus":[{"uuid":"GPU-obs","samples":360,"util_mean":90,"util_p95":98,
			"memory_used_peak_bytes":1000,"idle_share":0}]}`, start, end)
		expect(t, s.do(t, post("/v1/task/complete", done, "s-secret")), 200, "")
		if a := s.do(t, post("/v1/statements/"+M2+"/close", "", "a-secret")); a.Status != 201 {
			t.Fatalf("close %s: %d %s", M2, a.Status, a.Body)
		}
		closed := monthReport(t, s, M2).Body
		checkFigures(t, "M2 as closed", rowOf(t, closed, "search_obs"), map[string]float64{"gpu_hours": 1, "cost": 3})

		pod := trustUser{uuid: "GPU-obs", runtime: "containerd", containerID: "c-obs", podUID: "pod-obs", ns: "team-s", pod: "train-0"}
		expect(t, s.do(t, post("/v1/nodes/report", trustReport("gpu-node-1", end, 36000, pod), "n-secret")), 201, "")

		if got := monthReport(t, s, M2).Body; string(got) != string(closed) {
			t.Errorf("M2's report moved after the close:\n%s\nwant\n%s", got, closed)
		}
		adj := adjustmentsOf(t, monthReport(t, s, M1))
		if len(adj.Adjustments) != 1 {
			t.Fatalf("M1's adjustments: %+v, want one of %s", adj.Adjustments, M2)
		}
		a := adj.Adjustments[0]
		if a.AdjustmentOf != M2 || a.Project != "search_obs" || a.GPUHours != 9 || a.Cost != 27 ||
			len(a.Tasks) != 1 || a.Tasks[0].Change != "observed_after_close" || a.Tasks[0].GPUHours != 9 || a.Tasks[0].Cost != 27 {
			t.Errorf("M1's adjustment: %+v, want of %s, search_obs, 9 GPU-hours, 27 CNY, observed_after_close", a, M2)
		}
		// Budgets and the month's own total exclude it: M1 bills nothing.
		checkFigures(t, "M1's total", adjustmentsTotal(t, monthReport(t, s, M1).Body), map[string]float64{"gpu_hours": 0})

		if a := s.do(t, post("/v1/statements/"+M1+"/close", "", "a-secret")); a.Status != 201 {
			t.Fatalf("close %s: %d %s", M1, a.Status, a.Body)
		}
		frozen := adjustmentsOf(t, monthReport(t, s, M1))
		if len(frozen.Adjustments) != 1 || frozen.Adjustments[0].GPUHours != 9 || frozen.Adjustments[0].Cost != 27 {
			t.Errorf("M1's statement: adjustments %+v, want the 9 GPU-hours of %s", frozen.Adjustments, M2)
		}
		if again := adjustmentsOf(t, monthReport(t, s, cur.Format("2006-01"))); len(again.Adjustments) != 0 {
			t.Errorf("the current month counts %s's late report again: %+v", M2, again.Adjustments)
		}
		// 20.14: each statement records the last node report time it
		// includes: none at M2's close, the late report's at M1's.
		cuts := map[string]any{}
		for _, line := range strings.Split(strings.TrimSpace(mustRun(t, "statements", "--db", dsn, "--json")), "\n") {
			var st struct {
				Month string         `json:"month"`
				Body  map[string]any `json:"body"`
			}
			if err := json.Unmarshal([]byte(line), &st); err != nil {
				t.Fatalf("statements --json: %v: %s", err, line)
			}
			cuts[st.Month] = st.Body["report_cut"]
		}
		if cuts[M2] != nil || cuts[M1] != rfc(end) {
			t.Errorf("report_cut: %s %v, %s %v; want none, then %s", M2, cuts[M2], M1, cuts[M1], rfc(end))
		}
	})
}

// rowOf is the report row of project (JSON body).
func rowOf(t *testing.T, body []byte, project string) map[string]any {
	t.Helper()
	var r struct {
		Rows []map[string]any `json:"rows"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatal(err)
	}
	for _, row := range r.Rows {
		if row["key"].(map[string]any)["project"] == project {
			return row
		}
	}
	t.Fatalf("no row of %s in %s", project, body)
	return nil
}

func adjustmentsTotal(t *testing.T, body []byte) map[string]any {
	t.Helper()
	var r struct {
		Total map[string]any `json:"total"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatal(err)
	}
	return r.Total
}

// TestTooOldNodeReport (MONITOR.md 20.14): October 2025 is closed and
// trimmed by --retain 30d (November, open, stops the cutoff at November's
// start); a node report of 15 October is answered 200 too_old and not
// stored (no latest report of the node on /metrics); a report of November,
// open, is stored. Before, the October report was stored (201) into days
// whose tasks were deleted.
func TestTooOldNodeReport(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db string) {
		oct := time.Date(2025, 10, 10, 0, 0, 0, 0, time.UTC).Unix()
		s := startServer(t, db)
		expect(t, s.do(t, registerReq(regBody("october", "nlp", "ann@example.com", oct), "")), 201, "")
		s.do(t, post("/v1/task/complete", completeBody("october", 0, oct+3600), ""))
		stopServer(t, s)
		mustRun(t, "close", "--db", db, "--month", "2025-10", "--as", "Ana Finance")
		s = startServer(t, db, "--retain", "30d")
		s.waitLog(t, `"msg":"retention"`)

		pod := trustUser{uuid: "GPU-old", runtime: "containerd", containerID: "c-old", podUID: "pod-old", ns: "team-a", pod: "train-0"}
		octReport := time.Date(2025, 10, 15, 1, 0, 0, 0, time.UTC).Unix()
		a := s.do(t, post("/v1/nodes/report", trustReport("gpu-node-1", octReport, 3600, pod), "x"))
		expect(t, a, 200, "")
		if a.JSON(t)["status"] != "too_old" {
			t.Fatalf("a report of trimmed October: %s, want status too_old", a.Body)
		}
		metrics := string(s.do(t, request{Method: "GET", Path: "/metrics", NoSpecCheck: true}).Body)
		if strings.Contains(metrics, `paddle_node_report_age_seconds{node="gpu-node-1"}`) {
			t.Errorf("the too_old report was stored:\n%s", grepLines(metrics, "gpu-node-1"))
		}
		novReport := time.Date(2025, 11, 15, 1, 0, 0, 0, time.UTC).Unix()
		a = s.do(t, post("/v1/nodes/report", trustReport("gpu-node-1", novReport, 3600, pod), "x"))
		expect(t, a, 201, "")
	})
}
