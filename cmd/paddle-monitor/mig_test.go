package main

// Black-box tests of GPU shares, MIG instances and energy on the built
// paddle-monitor (docs/cost.md, MIG instances and shared GPUs): what the store keeps, which claims
// end, and the /metrics series, on SQLite and PostgreSQL.

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// gpuEntry is one entry of a registration's gpus as the entrypoint sends
// it: a whole GPU (gi < 0) or a MIG instance of the parent uuid; share < 0
// leaves share out.
func gpuEntry(uuid string, gi int, profile string, slices int, share float64) string {
	memory := int64(150754820096) // the H200's, or its instance's (the profile's GiB)
	var n, gib int64
	if _, err := fmt.Sscanf(profile, "%dg.%dgb", &n, &gib); err == nil && gi >= 0 {
		memory = gib << 30
	}
	e := fmt.Sprintf(`{"index":0,"uuid":%q,"name":"NVIDIA H200","memory_total_bytes":%d`, uuid, memory)
	if share >= 0 {
		e += fmt.Sprintf(`,"share":%g`, share)
	}
	if gi >= 0 {
		e += fmt.Sprintf(`,"mig":{"uuid":"MIG-%s-%d","gpu_instance_id":%d,"compute_instance_id":0,"profile":%q,"slices":%d,"total_slices":7}`,
			uuid, gi, gi, profile, slices)
	}
	return e + "}"
}

// gpuReg is a registration of task id, started at start, on the GPU entries.
func gpuReg(id string, start int64, gpus ...string) string {
	return fmt.Sprintf(`{"schema_version":1,"task_id":%q,"task_name":"train","project":"vision","owner":"ann","gpu_count":%d,
		"start_time":%d,"hostname":"node-1","labels":{},"gpus":[%s]}`, id, len(gpus), start, strings.Join(gpus, ","))
}

// gpuLines are the /metrics lines of paddle_task_gpu_info and
// paddle_task_gpu_share, sorted.
func gpuLines(t *testing.T, s *server) []string {
	t.Helper()
	body := string(s.do(t, get("/metrics", "")).Body)
	promtoolCheck(t, body)
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, "paddle_task_gpu_") {
			out = append(out, l)
		}
	}
	sort.Strings(out)
	return out
}

// claimEnded is the claim_ended of the task's GPU at position i (nil: open).
func claimEnded(t *testing.T, s *server, token, id string, i int) any {
	t.Helper()
	gpus := s.do(t, get("/v1/tasks/"+id, token)).JSON(t)["gpus"].([]any)
	return gpus[i].(map[string]any)["claim_ended"]
}

// Claims are per (UUID, GPU instance): seven tasks on seven MIG instances
// of one GPU all keep theirs; a task on an instance already claimed ends
// the older claim; time-sliced tasks never end each other's, a share-1
// task ends them all and a shared one ends a share-1 claim; a MIG claim
// ends a whole-GPU claim on its parent and the other way round. /metrics
// shows the survivors with GPU_I_ID, GPU_I_PROFILE and their share. The
// same without a tokens file (every task in one scope) and with a token of
// the project's own (the store's scoped claim checks: docs/monitor.md,
// Teams sharing one monitor).
func TestGPUInstanceClaims(t *testing.T) {
	for _, scoped := range []bool{false, true} {
		name := "open"
		if scoped {
			name = "scoped"
		}
		t.Run(name, func(t *testing.T) { testGPUInstanceClaims(t, scoped) })
	}
}

func testGPUInstanceClaims(t *testing.T, scoped bool) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		var s *server
		token := ""
		if scoped {
			token = "v-secret"
			s = startServer(t, dsn, "--tokens", tokensFile(t, t.TempDir(),
				`{"name":"vision","sha256":"`+hashHex(token)+`","projects":["vision"]}`))
		} else {
			s = startServer(t, dsn)
		}
		ended := func(id string) any {
			t.Helper()
			return claimEnded(t, s, token, id, 0)
		}
		t0 := time.Now().Add(-time.Hour).Unix()
		reg := func(body string) {
			t.Helper()
			expect(t, s.do(t, registerReq(body, token)), 201, "")
		}
		// Seven 1g.18gb instances of GPU-p (GPU instance ids 7 to 13, as
		// NVML numbers them on an H200), one task each; no share sent:
		// 1/7 from the slices.
		for i := 0; i < 7; i++ {
			reg(gpuReg(fmt.Sprintf("mig-%d", i), t0+int64(i), gpuEntry("GPU-p", 7+i, "1g.18gb", 1, -1)))
		}
		var want []string
		for i := 0; i < 7; i++ {
			want = append(want,
				fmt.Sprintf(`paddle_task_gpu_info{GPU_I_ID="%d",GPU_I_PROFILE="1g.18gb",UUID="GPU-p",gpu_model="NVIDIA H200",hostname="node-1",owner="ann",project="vision",task_id="mig-%d"} 1`, 7+i, i),
				fmt.Sprintf(`paddle_task_gpu_share{GPU_I_ID="%d",UUID="GPU-p",owner="ann",project="vision",task_id="mig-%d"} 0.14285714285714285`, 7+i, i))
		}
		sort.Strings(want)
		if got := gpuLines(t, s); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("seven MIG tasks on one GPU:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		task := s.do(t, get("/v1/tasks/mig-3", token)).JSON(t)
		g := task["gpus"].([]any)[0].(map[string]any)
		if mig, _ := g["mig"].(map[string]any); g["uuid"] != "GPU-p" || g["share"] != 1.0/7 || g["claim_ended"] != nil || mig == nil ||
			mig["uuid"] != "MIG-GPU-p-10" || mig["gpu_instance_id"] != 10.0 || mig["compute_instance_id"] != 0.0 ||
			mig["profile"] != "1g.18gb" || mig["slices"] != 1.0 || mig["total_slices"] != 7.0 {
			t.Errorf("mig-3's GPU: %v", g)
		}

		// A newer task on mig-0's instance (7) ends its claim; the other
		// six stand. A late registration (from a spool) on instance 8,
		// older than mig-1, starts with its claim already ended by mig-1.
		reg(gpuReg("mig-0-next", t0+100, gpuEntry("GPU-p", 7, "1g.18gb", 1, -1)))
		reg(gpuReg("mig-1-late", t0-100, gpuEntry("GPU-p", 8, "1g.18gb", 1, -1)))
		if c := ended("mig-0"); c != float64(t0+100) {
			t.Errorf("mig-0's claim ended %v, want %d (the next task on instance 7)", c, t0+100)
		}
		if c := ended("mig-1-late"); c != float64(t0+1) {
			t.Errorf("the late task's claim ended %v, want %d (mig-1's start)", c, t0+1)
		}
		for i := 1; i < 7; i++ {
			if c := ended(fmt.Sprintf("mig-%d", i)); c != nil {
				t.Errorf("mig-%d lost its claim (%v) to a task on another instance", i, c)
			}
		}

		// Time-sliced: four tasks at share 0.25 on GPU-ts keep their
		// claims; a share-1 task ends them all; a shared task after it
		// ends the share-1 claim.
		for i := 0; i < 4; i++ {
			reg(gpuReg(fmt.Sprintf("ts-%d", i), t0+int64(i), gpuEntry("GPU-ts", -1, "", 0, 0.25)))
		}
		lines := gpuLines(t, s)
		for i := 0; i < 4; i++ {
			w := fmt.Sprintf(`paddle_task_gpu_share{GPU_I_ID="",UUID="GPU-ts",owner="ann",project="vision",task_id="ts-%d"} 0.25`, i)
			if !contains(lines, w) {
				t.Errorf("time-sliced ts-%d is not on /metrics (%s):\n%s", i, w, strings.Join(lines, "\n"))
			}
		}
		reg(gpuReg("ts-whole", t0+10, gpuEntry("GPU-ts", -1, "", 0, 1)))
		for i := 0; i < 4; i++ {
			if c := ended(fmt.Sprintf("ts-%d", i)); c != float64(t0+10) {
				t.Errorf("ts-%d's claim ended %v, want %d (a share-1 task took the GPU)", i, c, t0+10)
			}
		}
		reg(gpuReg("ts-after", t0+20, gpuEntry("GPU-ts", -1, "", 0, 0.5)))
		if c := ended("ts-whole"); c != float64(t0+20) {
			t.Errorf("ts-whole's claim ended %v, want %d (a shared task ends a share-1 claim)", c, t0+20)
		}

		// Re-partitioning: a whole-GPU task on GPU-r, then a MIG task on
		// it ends the whole-GPU claim; a whole GPU (shared, even) after
		// that ends the MIG claim.
		reg(gpuReg("r-whole", t0, gpuEntry("GPU-r", -1, "", 0, -1)))
		reg(gpuReg("r-mig", t0+1, gpuEntry("GPU-r", 1, "3g.71gb", 3, -1)))
		reg(gpuReg("r-shared", t0+2, gpuEntry("GPU-r", -1, "", 0, 0.5)))
		if c := ended("r-whole"); c != float64(t0+1) {
			t.Errorf("r-whole's claim ended %v, want %d (a MIG task on its GPU)", c, t0+1)
		}
		if c := ended("r-mig"); c != float64(t0+2) {
			t.Errorf("r-mig's claim ended %v, want %d (a whole-GPU task on its parent)", c, t0+2)
		}

		lines = gpuLines(t, s)
		for _, w := range []string{
			`paddle_task_gpu_info{GPU_I_ID="",GPU_I_PROFILE="",UUID="GPU-r",gpu_model="NVIDIA H200",hostname="node-1",owner="ann",project="vision",task_id="r-shared"} 1`,
			`paddle_task_gpu_share{GPU_I_ID="",UUID="GPU-r",owner="ann",project="vision",task_id="r-shared"} 0.5`,
			`paddle_task_gpu_share{GPU_I_ID="",UUID="GPU-ts",owner="ann",project="vision",task_id="ts-after"} 0.5`,
			`paddle_task_gpu_share{GPU_I_ID="7",UUID="GPU-p",owner="ann",project="vision",task_id="mig-0-next"} 0.14285714285714285`,
		} {
			if !contains(lines, w) {
				t.Errorf("/metrics lacks %s", w)
			}
		}
		for _, gone := range []string{`task_id="mig-0"}`, `task_id="mig-1-late"}`, `task_id="ts-0"}`, `task_id="ts-whole"}`, `task_id="r-whole"}`, `task_id="r-mig"}`} {
			for _, l := range lines {
				if strings.Contains(l, gone) {
					t.Errorf("an ended claim is on /metrics: %s", l)
				}
			}
		}
		// 7 on GPU-p (mig-0-next for mig-0), ts-after, r-shared: each with
		// its share series.
		if len(lines) != 2*9 {
			t.Errorf("%d GPU series, want 18:\n%s", len(lines), strings.Join(lines, "\n"))
		}
	})
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// A heartbeat's and a completion's MIG entries are matched by mig_uuid
// (two instances of one parent share its UUID); the completion's energy is
// kept; the task shows them.
func TestCompletionMIGEnergy(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := startServer(t, dsn)
		t0 := time.Now().Add(-time.Hour).Unix()
		expect(t, s.do(t, registerReq(gpuReg("two-instances", t0,
			gpuEntry("GPU-q", 1, "3g.71gb", 3, -1), gpuEntry("GPU-q", 2, "3g.71gb", 3, -1), gpuEntry("GPU-w", -1, "", 0, 0.25)), "")), 201, "")
		// A heartbeat's MIG entry is matched by mig_uuid too: instance 2's
		// sample lands on instance 2 alone.
		expect(t, s.do(t, post("/v1/task/heartbeat", fmt.Sprintf(`{"task_id":"two-instances","time":%d,"interval_seconds":60,
			"gpus":[{"uuid":"GPU-q","mig_uuid":"MIG-GPU-q-2","samples":6,"util_mean":5}]}`, t0+60), "")), 200, "")
		var latest []string
		for _, x := range s.do(t, get("/v1/tasks/two-instances", "")).JSON(t)["gpus"].([]any) {
			latest = append(latest, fmt.Sprint(x.(map[string]any)["latest_util_mean"]))
		}
		if strings.Join(latest, ",") != "<nil>,5,<nil>" {
			t.Errorf("latest_util_mean by GPU after a heartbeat of instance 2: %v, want [<nil> 5 <nil>]", latest)
		}
		expect(t, s.do(t, post("/v1/task/complete", fmt.Sprintf(`{"schema_version":1,"task_id":"two-instances","start_time":%d,
			"end_time":%d,"duration_seconds":3600,"exit_code":0,"gpu_count":3,"gpu_seconds":10800,"gpus":[
			{"uuid":"GPU-q","mig_uuid":"MIG-GPU-q-2","share":0.428571,"samples":0,"util_mean":null,"energy_joules":1500000,"energy_estimated":true},
			{"uuid":"GPU-q","mig_uuid":"MIG-GPU-q-1","share":0.428571,"samples":0,"util_mean":null,"energy_joules":1200000.5,"energy_estimated":true},
			{"uuid":"GPU-w","share":0.25,"samples":10,"util_mean":40,"energy_joules":null}]}`, t0, t0+3600), "")), 200, "")
		task := s.do(t, get("/v1/tasks/two-instances", "")).JSON(t)
		// GPU-seconds at the shares: (3/7 + 3/7 + 0.25) × 3600.
		if gs, _ := task["efficiency"].(map[string]any)["gpu_seconds"].(float64); math.Abs(gs-(6.0/7+0.25)*3600) > 1e-6 {
			t.Errorf("efficiency.gpu_seconds %v, want %v", gs, (6.0/7+0.25)*3600)
		}
		gpus := task["gpus"].([]any)
		var got []string
		for _, x := range gpus {
			g := x.(map[string]any)
			mig := ""
			if m, ok := g["mig"].(map[string]any); ok {
				mig = m["uuid"].(string)
			}
			got = append(got, fmt.Sprintf("%s/%s share=%v energy=%v estimated=%v util=%v", g["uuid"], mig, g["share"], g["energy_joules"], g["energy_estimated"], g["util_mean"]))
		}
		want := []string{
			"GPU-q/MIG-GPU-q-1 share=0.42857142857142855 energy=1.2000005e+06 estimated=true util=<nil>",
			"GPU-q/MIG-GPU-q-2 share=0.42857142857142855 energy=1.5e+06 estimated=true util=<nil>",
			"GPU-w/ share=0.25 energy=<nil> estimated=<nil> util=40",
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("the task's GPUs:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
}

// Bad shares, MIG objects and energy are 400s naming the field; nothing is
// stored.
func TestGPUShareBadInput(t *testing.T) {
	s := startServer(t, storetest.SQLiteDSN(t))
	const comp = `{"task_id":"x","end_time":1,"duration_seconds":1,"exit_code":0,"gpus":[%s]}`
	for _, tc := range []struct {
		name    string
		r       request
		errPart string
	}{
		{"share 0", registerReq(gpuReg("b1", 1794700000, gpuEntry("GPU-a", -1, "", 0, 0)), ""), "field gpus[0].share: must be a number greater than 0 and at most 1"},
		{"share 1.5", registerReq(gpuReg("b2", 1794700000, gpuEntry("GPU-a", -1, "", 0, 1.5)), ""), "field gpus[0].share: must be between 0 and 1"},
		{"share a string", registerReq(gpuReg("b3", 1794700000, `{"index":0,"uuid":"GPU-a","name":"x","memory_total_bytes":1,"share":"0.5"}`), ""), "field gpus[0].share: must be a number"},
		{"mig not an object", registerReq(gpuReg("b4", 1794700000, `{"index":0,"uuid":"GPU-a","name":"x","memory_total_bytes":1,"mig":"MIG-1"}`), ""), "field gpus[0].mig: must be an object"},
		{"mig without gpu_instance_id", registerReq(gpuReg("b5", 1794700000, `{"index":0,"uuid":"GPU-a","name":"x","memory_total_bytes":1,"mig":{"uuid":"MIG-1"}}`), ""), "field gpus[0].mig.gpu_instance_id: is required"},
		{"mig without uuid", registerReq(gpuReg("b6", 1794700000, `{"index":0,"uuid":"GPU-a","name":"x","memory_total_bytes":1,"mig":{"gpu_instance_id":1}}`), ""), "field gpus[0].mig.uuid: is required"},
		{"mig slices over total", registerReq(gpuReg("b7", 1794700000, `{"index":0,"uuid":"GPU-a","name":"x","memory_total_bytes":1,"mig":{"uuid":"MIG-1","gpu_instance_id":1,"slices":8,"total_slices":7}}`), ""), "field gpus[0].mig.slices: must be at most total_slices (7)"},
		{"mig gpu_instance_id negative", registerReq(gpuReg("b8", 1794700000, `{"index":0,"uuid":"GPU-a","name":"x","memory_total_bytes":1,"mig":{"uuid":"MIG-1","gpu_instance_id":-1}}`), ""), "field gpus[0].mig.gpu_instance_id: must be between 0 and"},
		{"mig profile control", registerReq(gpuReg("b9", 1794700000, `{"index":0,"uuid":"GPU-a","name":"x","memory_total_bytes":1,"mig":{"uuid":"MIG-1","gpu_instance_id":1,"profile":"1g\u0007"}}`), ""), "field gpus[0].mig.profile: must be text"},
		{"energy negative", post("/v1/task/complete", fmt.Sprintf(comp, `{"uuid":"u","samples":1,"energy_joules":-1}`), ""), "field gpus[0].energy_joules: must be between 0 and"},
		{"energy a string", post("/v1/task/complete", fmt.Sprintf(comp, `{"uuid":"u","samples":1,"energy_joules":"5"}`), ""), "field gpus[0].energy_joules: must be a number"},
		{"energy_estimated not a bool", post("/v1/task/complete", fmt.Sprintf(comp, `{"uuid":"u","samples":1,"energy_estimated":"yes"}`), ""), "field gpus[0].energy_estimated: must be true or false"},
		{"completion share 0", post("/v1/task/complete", fmt.Sprintf(comp, `{"uuid":"u","samples":1,"share":0}`), ""), "field gpus[0].share: must be a number greater than 0"},
		{"mig_uuid control", post("/v1/task/complete", fmt.Sprintf(comp, `{"uuid":"u","mig_uuid":"MIG\u0001","samples":1}`), ""), "field gpus[0].mig_uuid: must be text"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			expect(t, s.do(t, tc.r), 400, tc.errPart)
		})
	}
	if m := s.do(t, get("/v1/tasks", "")).JSON(t); len(m["tasks"].([]any)) != 0 {
		t.Errorf("refused registrations were stored: %v", m)
	}
}
