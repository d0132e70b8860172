package main

// What a task declares about its GPUs, checked (docs/monitor.md, GPU
// shares and MIG): the bounds of a MIG entry and of a whole GPU's share,
// and a MIG entry stored at its slices' share whatever its share says.

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// migEntry is a MIG entry of GPU-h's instance gi with the fields given
// raw: memory, share ("" for none), profile, slices and total_slices.
func migEntry(gi int, memory int64, share, profile string, slices, total int) string {
	e := fmt.Sprintf(`{"index":0,"uuid":"GPU-h","name":"NVIDIA H200","memory_total_bytes":%d`, memory)
	if share != "" {
		e += `,"share":` + share
	}
	return e + fmt.Sprintf(`,"mig":{"uuid":"MIG-h-%d","gpu_instance_id":%d,"compute_instance_id":0,"profile":%q,"slices":%d,"total_slices":%d}}`,
		gi, gi, profile, slices, total)
}

// The reproductions: a whole GPU declared as a MIG instance of 64 slices
// (1/64 of its hours), a whole GPU at share 0.001, an instance whose
// profile is not its slices or whose memory is a whole GPU's: 400 naming
// the field, nothing stored. A MIG entry declaring share 1e-300 is
// accepted, stored and billed at slices / total_slices (1/7 here: 7 h of
// a 1g.18gb instance are 1 GPU-hour), and the difference is logged with
// the task.
func TestDeclaredGPUBounds(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := startServer(t, dsn)
		start := time.Now().Add(-8 * time.Hour).Truncate(time.Hour).Unix()
		const whole, instance = 150754820096, 18 << 30
		for _, c := range []struct {
			name, gpu, want string
		}{
			{"a whole GPU as 1 of 64 slices", migEntry(1, whole, "", "1g.141gb", 1, 64),
				"field gpus[0].mig.total_slices: must be between 1 and 8"},
			{"a whole GPU at 0.001", `{"index":0,"uuid":"GPU-h","name":"NVIDIA H200","memory_total_bytes":150754820096,"share":0.001}`,
				"field gpus[0].share: must be at least 0.01 for a whole GPU"},
			{"a whole GPU at 1e-300", `{"index":0,"uuid":"GPU-h","name":"NVIDIA H200","memory_total_bytes":150754820096,"share":1e-300}`,
				"field gpus[0].share: must be at least 0.01 for a whole GPU"},
			{"a 7-slice instance called 1g", migEntry(1, whole, "", "1g.141gb", 7, 7),
				"field gpus[0].mig.profile: must be the instance's slices and memory, 7g.<GiB>gb"},
			{"a whole GPU's memory in a 1g.18gb instance", migEntry(1, whole, "", "1g.18gb", 1, 7),
				"field gpus[0].memory_total_bytes: must be at most 20293720473 for a MIG instance of profile 1g.18gb"},
			{"no total_slices", `{"index":0,"uuid":"GPU-h","name":"NVIDIA H200","memory_total_bytes":1,"mig":{"uuid":"MIG-h-1","gpu_instance_id":1,"profile":"1g.18gb","slices":1}}`,
				"field gpus[0].mig.total_slices: is required"},
		} {
			t.Run(c.name, func(t *testing.T) {
				expect(t, s.do(t, registerReq(gpuReg("bad", start, c.gpu), "")), 400, c.want)
			})
		}
		if m := s.do(t, get("/v1/tasks", "")).JSON(t); len(m["tasks"].([]any)) != 0 {
			t.Fatalf("refused registrations were stored: %v", m)
		}

		expect(t, s.do(t, registerReq(gpuReg("tiny", start, migEntry(9, instance, "1e-300", "1g.18gb", 1, 7)), "")), 201, "")
		s.waitLog(t, `"msg":"registration: a MIG entry's share is not its slices / total_slices; slices / total_slices is stored","logger":"paddle-monitor","task_id":"tiny","project":"vision","owner":"ann","gpu":0,"share":1e-300,"stored_share":0.14285714285714285,"profile":"1g.18gb"`)
		g := s.do(t, get("/v1/tasks/tiny", "")).JSON(t)["gpus"].([]any)[0].(map[string]any)
		if g["share"] != 1.0/7 {
			t.Errorf("stored share %v, want 1/7", g["share"])
		}
		if got := gpuLines(t, s); !strings.Contains(strings.Join(got, "\n"),
			`paddle_task_gpu_share{GPU_I_ID="9",UUID="GPU-h",owner="ann",project="vision",task_id="tiny"} 0.14285714285714285`) {
			t.Errorf("/metrics:\n%s", strings.Join(got, "\n"))
		}
		end := start + 7*3600
		expect(t, s.do(t, post("/v1/task/complete", fmt.Sprintf(`{"task_id":"tiny","start_time":%d,"end_time":%d,"duration_seconds":25200,"exit_code":0}`, start, end), "")), 200, "")
		from := time.Unix(start, 0).UTC().Format(time.RFC3339)
		to := time.Unix(end+3600, 0).UTC().Format(time.RFC3339)
		rep := s.do(t, get("/v1/report?from="+from+"&to="+to+"&by=project", "")).JSON(t)
		if total := rep["total"].(map[string]any); total["gpu_hours"] != 1.0 {
			t.Errorf("7 h of a 1g.18gb instance of 7 slices: %v GPU-hours, want 1", total["gpu_hours"])
		}
	})
}

// The reproduction of a completion that claims less than the monitor saw:
// a task heard from for 10 hours completes claiming it ended 1 second
// after its start, and is billed 10 hours (its counted end is
// max(end_time, last_seen)); a task that completes so after 5 hours and
// keeps sending heartbeats for 5 more is billed 10 hours too (a heartbeat
// of a completed task moves last_seen). On both stores.
func TestCountedEndIsLastSeen(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := startServer(t, dsn)
		start := time.Now().Unix() - 10*3600
		for _, p := range []string{"alive", "after"} {
			body := fmt.Sprintf(`{"schema_version":1,"task_id":%q,"task_name":"train","project":%q,"owner":"ann","gpu_count":1,"start_time":%d,"labels":{},"gpus":[]}`,
				p, p, start)
			expect(t, s.do(t, registerReq(body, "")), 201, "")
		}
		heartbeat := func(id string, hour int) {
			t.Helper()
			expect(t, s.do(t, post("/v1/task/heartbeat", fmt.Sprintf(`{"task_id":%q,"time":%d}`, id, start+int64(hour)*3600), "")), 200, "")
		}
		complete := func(id string) {
			t.Helper()
			expect(t, s.do(t, post("/v1/task/complete", fmt.Sprintf(`{"task_id":%q,"start_time":%d,"end_time":%d,"duration_seconds":1,"exit_code":0}`,
				id, start, start+1), "")), 200, "")
		}
		for h := 1; h <= 10; h++ {
			heartbeat("alive", h)
			if h == 5 {
				complete("after")
			}
			heartbeat("after", h)
		}
		complete("alive")

		for _, id := range []string{"alive", "after"} {
			task := s.do(t, get("/v1/tasks/"+id, "")).JSON(t)
			end := task["completion"].(map[string]any)["end_time"]
			if end != float64(start+1) || task["last_seen"] != float64(start+36000) {
				t.Errorf("%s: end_time %v, last_seen %v; want %d and %d", id, end, task["last_seen"], start+1, start+36000)
			}
		}
		from := time.Unix(start, 0).UTC().Format(time.RFC3339)
		to := time.Unix(start+11*3600, 0).UTC().Format(time.RFC3339)
		r := runMonitor(t, "report", "--db", dsn, "--from", from, "--to", to, "--by", "project", "--format", "csv")
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if r.code != 0 || len(lines) != 3 {
			t.Fatalf("report: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		cols := strings.Split(lines[0], ",")
		hours := -1
		for i, c := range cols {
			if c == "gpu_hours" {
				hours = i
			}
		}
		for _, l := range lines[1:] {
			f := strings.Split(l, ",")
			if want := map[string]string{"after": "10", "alive": "10"}[f[0]]; hours < 0 || f[hours] != want {
				t.Errorf("%s: gpu_hours %q, want %q\n%s", f[0], f[hours], want, r.stdout)
			}
		}
	})
}

// The real entrypoint in a Slurm job: SLURM_JOB_ID is sent as slurm_job
// and the monitor stores it with the task (GET /v1/tasks/{id}), where the
// ledger ties the node's observations of the job to it. On both stores.
func TestEntrypointSlurmJobStored(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := startServer(t, dsn)
		dir := t.TempDir()
		c := execCommand(bin.entrypoint, "/bin/true")
		c.Env = []string{"PATH=/usr/bin:/bin", "PADDLE_MONITOR_URL=" + s.URL,
			"PADDLE_SPOOL_PATH=" + filepath.Join(dir, "spool.db"), "PADDLE_LABELS_FILE=" + filepath.Join(dir, "labels"),
			"PADDLE_PROJECT=search_ranking", "PADDLE_OWNER=ann", "PADDLE_TASK_ID=slurm-1",
			"SLURM_JOB_ID=4242", "SLURM_JOB_NAME=pretrain"}
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("entrypoint: %v\n%s", err, out)
		}
		task := s.do(t, get("/v1/tasks/slurm-1", "")).JSON(t)
		if task["slurm_job"] != "4242" || task["pipeline_run"] != "4242" || task["orchestrator"] != "slurm" {
			t.Errorf("stored: slurm_job %v, pipeline_run %v, orchestrator %v; want 4242, 4242, slurm", task["slurm_job"], task["pipeline_run"], task["orchestrator"])
		}
		expect(t, s.do(t, registerReq(regBody("plain-1", "search_ranking", "ann", 1794700000), "")), 201, "")
		if task := s.do(t, get("/v1/tasks/plain-1", "")).JSON(t); task["slurm_job"] != "" {
			t.Errorf("a registration without slurm_job: %v, want \"\"", task["slurm_job"])
		}
	})
}

// discrepancies lists the GPU instances whose claims declared shares
// adding up to more than 1 at one instant: three tasks at 0.5, 0.5 and
// 0.25 on one time-sliced GPU are 1.25 from the third's start; a task that
// took a whole GPU after another whole-GPU task that never completed ended
// that one's claim, so that GPU is not listed. On both stores.
func TestDiscrepanciesOvercommitted(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := startServer(t, dsn)
		T := time.Now().Add(-5 * time.Hour).Truncate(time.Hour).Unix()
		for _, x := range []struct {
			id    string
			uuid  string
			share float64
			start int64
			end   int64 // 0: never completes
		}{
			{"a", "GPU-s", 0.5, T, T + 4*3600}, {"b", "GPU-s", 0.5, T + 3600, T + 5*3600}, {"c", "GPU-s", 0.25, T + 2*3600, T + 3*3600},
			{"w1", "GPU-w", 1, T, 0}, {"w2", "GPU-w", 1, T + 3600, T + 2*3600},
		} {
			expect(t, s.do(t, registerReq(gpuReg(x.id, x.start, gpuEntry(x.uuid, -1, "", 0, x.share)), "")), 201, "")
			expect(t, s.do(t, post("/v1/task/heartbeat", fmt.Sprintf(`{"task_id":%q,"time":%d}`, x.id, x.start+1800), "")), 200, "")
			if x.end > 0 {
				expect(t, s.do(t, post("/v1/task/complete", fmt.Sprintf(`{"task_id":%q,"start_time":%d,"end_time":%d,"duration_seconds":%d,"exit_code":0}`,
					x.id, x.start, x.end, x.end-x.start), "")), 200, "")
			}
		}
		from, to := time.Unix(T, 0).UTC().Format(time.RFC3339), time.Unix(T+5*3600, 0).UTC().Format(time.RFC3339)
		prices := filepath.Join(t.TempDir(), "prices.json")
		writeFile(t, prices, `{"currency":"CNY","models":{"NVIDIA H200":10}}`)
		r := runMonitor(t, "discrepancies", "--db", dsn, "--prices", prices, "--from", from, "--to", to)
		if r.code != 0 {
			t.Fatalf("discrepancies: exit %d\n%s", r.code, r.stderr)
		}
		var d struct {
			Overcommitted []struct {
				UUID          string   `json:"uuid"`
				GPUInstanceID *int64   `json:"gpu_instance_id"`
				Time          string   `json:"time"`
				Share         float64  `json:"share"`
				Excess        float64  `json:"excess_gpu_hours"`
				Stake         *float64 `json:"money_at_stake"`
				Tasks         []struct {
					TaskID string `json:"task_id"`
				} `json:"tasks"`
			} `json:"overcommitted"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &d); err != nil {
			t.Fatalf("%v\n%s", err, r.stdout)
		}
		at := time.Unix(T+2*3600, 0).UTC().Format(time.RFC3339)
		if len(d.Overcommitted) != 1 {
			t.Fatalf("overcommitted: %+v; want GPU-s only\n%s", d.Overcommitted, r.stdout)
		}
		o := d.Overcommitted[0]
		if o.UUID != "GPU-s" || o.GPUInstanceID != nil || o.Time != at || o.Share != 1.25 || len(o.Tasks) != 3 ||
			o.Tasks[0].TaskID != "a" || o.Tasks[1].TaskID != "b" || o.Tasks[2].TaskID != "c" {
			t.Errorf("overcommitted: %+v; want GPU-s at %s, 1.25 of a, b and c", o, at)
		}
		// 0.25 of GPU-s declared above 1 for the hour c ran (MONITOR.md
		// 20.22): 0.25 GPU-hours, 2.50 at 10 an hour.
		if o.Excess != 0.25 || o.Stake == nil || *o.Stake != 2.5 {
			t.Errorf("overcommitted GPU-s: excess %v GPU-hours, money at stake %v; want 0.25 and 2.50", o.Excess, o.Stake)
		}
		// The API's answer (checked against docs/openapi.yaml): the excess
		// without prices, its money null.
		a := s.do(t, get("/v1/discrepancies?from="+from+"&to="+to, ""))
		expect(t, a, 200, "")
		if !strings.Contains(string(a.Body), `"excess_gpu_hours":0.25,"money_at_stake":null`) {
			t.Errorf("GET /v1/discrepancies: %s", a.Body)
		}
		c := runMonitor(t, "discrepancies", "--db", dsn, "--prices", prices, "--from", from, "--to", to, "--format", "csv")
		if !strings.Contains(c.stdout, "\novercommitted,a b c,,,,,,,,0.25,2.50,GPU-s declared 1.25 of itself from "+at+"\n") {
			t.Errorf("discrepancies --format csv:\n%s", c.stdout)
		}
	})
}
