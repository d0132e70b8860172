package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

var updateFocus = flag.Bool("update-focus", false, "rewrite testdata/focus's golden exports (check them by hand first)")

// TestFocusExportBytes: the FOCUS export of a month with shared GPUs, a
// MIG instance, labels (shared by a key's tasks or not, on a task
// attributed use before its start), a task without listed GPUs,
// undeclared use and a closed month's correction is, byte for byte, the
// golden file, on both stores: the open month's export, a team's, and the
// export kept when the month closes. The goldens were written by the
// export before its per-day chargeback was taken out (h-focusperf), so a
// change of how the export reads its facts cannot change a byte.
func TestFocusExportBytes(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		// October closed, then its late registration: November's
		// correction.
		f := startFocusFleet(t, dsn)
		s, flags, t4 := f.s, f.flags, f.t4

		// November 10, gpu-node-1's report of [h, h+10h): GPU-a shared by
		// two labelled tasks, GPU-d declared at share 0.5, a MIG instance
		// of GPU-f, GPU-e held by team-b's pod (undeclared, ads_x); tasks
		// declared on other-node (no reports), two of them on one GPU.
		h := time.Date(2025, 11, 10, 0, 0, 0, 0, time.UTC).Unix()
		labelledTask(t, s, "t-a", "search_a", "pod-a", wholeGPU("GPU-a", 1), `{"team":"search","run":"a"}`, h, h+36000)
		labelledTask(t, s, "t-b", "search_b", "pod-b", wholeGPU("GPU-a", 1), `{"Team":"search"}`, h, h+36000)
		billingTask(t, s, "t-mixed", "search_mixed", "pod-d", wholeGPU("GPU-d", 0.5), h, h+12*3600)
		mig := `{"index":0,"uuid":"GPU-f","name":"NVIDIA H200","memory_total_bytes":76000000000,
			"mig":{"uuid":"MIG-f-1","gpu_instance_id":1,"compute_instance_id":0,"profile":"3g.71gb","slices":3,"total_slices":7}}`
		labelledTask(t, s, "t-mig", "search_mig", "pod-f", mig, `{"stage":"tune"}`, h, h+36000)
		billingTask(t, s, "t-decl", "search_decl", "", t4, h, h+3*3600)
		billingTask(t, s, "t-decl2", "search_decl", "", wholeGPU("GPU-x", 1), h, h+3600)
		billingTask(t, s, "t-dup", "search_dup", "", wholeGPU("GPU-x", 1), h, h+3600)
		user := func(pod, namespace string) string {
			return fmt.Sprintf(`{"runtime":"containerd","container_id":"c-%s","pod_uid":%q,"namespace":%q,"pod":"p","container":"paddle",
				"allocated_share":1,"seen_share":1,"busy_share":1}`, pod, pod, namespace)
		}
		instances := []string{
			`{"uuid":"GPU-a","gpu_instance_id":null,"name":"NVIDIA H200","samples":60,"busy_share":1,"busy_basis":"utilization",
			  "occupied_share":1,"energy_joules":null,"users":[` + user("pod-a", "team-a") + `,` + user("pod-b", "team-a") + `]}`,
			billingInstance("GPU-d", "pod-d", "team-a", 1, -1),
			billingInstance("GPU-e", "pod-e", "team-b", 1, -1),
			`{"uuid":"GPU-f","gpu_instance_id":1,"profile":"3g.71gb","slices":3,"total_slices":7,"name":"NVIDIA H200","samples":60,
			  "busy_share":1,"busy_basis":"processes","occupied_share":1,"energy_joules":null,"users":[` + user("pod-f", "team-a") + `]}`,
		}
		nodeReport(t, s, h+36000, 36000, instances...)

		// November 11 23:00 to 12 01:00, one report: GPU-g held by the
		// pod of a task that started at 00:30 on the 12th (attributed use
		// on the 11th, where its counted interval is not), GPU-e by
		// team-b's pod again.
		m := time.Date(2025, 11, 12, 0, 0, 0, 0, time.UTC).Unix()
		labelledTask(t, s, "t-g", "search_late", "pod-g", wholeGPU("GPU-g", 1), `{"team":"late"}`, m+1800, m+5400)
		nodeReport(t, s, m+3600, 7200, billingInstance("GPU-g", "pod-g", "team-a", 0.5, 7200), billingInstance("GPU-e", "pod-e", "team-b", 1, -1))

		// November 15 on other-node: two T4 tasks of one key whose labels
		// share only team, and a task without listed GPUs.
		d := time.Date(2025, 11, 15, 0, 0, 0, 0, time.UTC).Unix()
		labelledTask(t, s, "t-l1", "search_lab", "", t4, `{"team":"x","run":"1"}`, d, d+2*3600)
		labelledTask(t, s, "t-l2", "search_lab", "", t4, `{"team":"x","run":"2"}`, d+3600, d+3*3600)
		labelledTask(t, s, "t-dev", "search_dev", "", "", `{"team":"dev"}`, d, d+3600)

		export := append([]string{"export", "focus", "--db", dsn, "--month", "2025-11"}, flags...)
		golden(t, "2025-11.csv", mustRun(t, export...))
		team := s.do(t, request{Method: "GET", Path: "/v1/export/focus?month=2025-11", Token: "s-secret"})
		if team.Status != 200 {
			t.Fatalf("a team's export: %d %s", team.Status, team.Body)
		}
		golden(t, "2025-11-search.csv", string(team.Body))
		expect(t, s.do(t, post("/v1/statements/2025-11/close", `{"reason":"November billed"}`, "a-secret")), 201, "")
		kept := s.do(t, request{Method: "GET", Path: "/v1/export/focus?month=2025-11", Token: "a-secret"})
		if kept.Status != 200 {
			t.Fatalf("the kept export: %d %s", kept.Status, kept.Body)
		}
		golden(t, "2025-11-closed.csv", string(kept.Body))
	})
}

// nodeReport stores gpu-node-1's report of the interval seconds up to end
// with instances.
func nodeReport(t *testing.T, s *server, end, interval int64, instances ...string) {
	t.Helper()
	rep := fmt.Sprintf(`{"schema_version":1,"node":"gpu-node-1","time":%d,"interval_seconds":%d,"samples":60,
		"gpus":[],"instances":[%s]}`, end, interval, strings.Join(instances, ","))
	expect(t, s.do(t, post("/v1/nodes/report", rep, "n-secret")), 201, "")
}

// golden compares got with testdata/focus/name (rewritten with
// -update-focus).
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "focus", name)
	if *updateFocus {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the golden file:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}
