package monitor_test

import (
	"bytes"
	"context"
	"errors"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
	"github.com/paddle-entrypoint/paddle-entrypoint/test/harness"
)

type fakeOpen struct {
	tasks []store.OpenTask
	err   error
	since int64
}

func (f *fakeOpen) OpenTasks(_ context.Context, since int64, _ int) ([]store.OpenTask, error) {
	f.since = since
	return f.tasks, f.err
}

// The exposition of open tasks, byte for byte: HELP and TYPE on every
// family, one paddle_task_info per task, one paddle_task_gpu_info per
// GPU the store returns as claimed (a UUID listed twice by one task: one
// series). Two tasks claiming one GPU are both served: the store ends the
// claims that end (across token scopes a live task keeps its claim), and
// the recording rules reduce two claims to one.
func TestTaskCollector(t *testing.T) {
	src := &fakeOpen{tasks: []store.OpenTask{
		{TaskID: "a1", TaskName: "train", Project: "search", Owner: "ann@example.com", Priority: "high", Env: "prod",
			Pipeline: "ranker", Step: "train", Hostname: "node1", K8sPodUID: "3f1c2a9e-5b7d-4e0f-9a1b-2c3d4e5f6a7b", StartTime: 100,
			GPUs: []store.OpenGPU{{UUID: "GPU-aaaa", Model: "Tesla T4", Share: 1}, {UUID: "GPU-bbbb", Model: "Tesla T4", Share: 1}}},
		{TaskID: "b2", TaskName: "eval", Project: "vision", Owner: "bob", Hostname: "node1", StartTime: 200,
			GPUs: []store.OpenGPU{{UUID: "GPU-bbbb", Model: "Tesla T4", Share: 1}, {UUID: "GPU-bbbb", Model: "Tesla T4", Share: 1}}},
		{TaskID: "c3", TaskName: "cpu-step", Project: "nlp", Owner: "cho", StartTime: 300},
	}}
	now := time.Unix(1000000, 0)
	c := monitor.NewTaskCollector(src, time.Hour, func() time.Time { return now })
	want := `# HELP paddle_monitor_task_scrape_error 1 if reading the open tasks from the database failed during this scrape (paddle_task_* series are then missing), else 0.
# TYPE paddle_monitor_task_scrape_error gauge
paddle_monitor_task_scrape_error 0
# HELP paddle_task_gpu_info A GPU or MIG instance an open task runs on (value 1); a MIG instance has its parent's UUID with GPU_I_ID and GPU_I_PROFILE, as dcgm-exporter labels it. Join GPU metrics on UUID and GPU_I_ID: DCGM_FI_DEV_GPU_UTIL * on(UUID, GPU_I_ID) group_left(project, owner) paddle_task_gpu_info.
# TYPE paddle_task_gpu_info gauge
paddle_task_gpu_info{GPU_I_ID="",GPU_I_PROFILE="",UUID="GPU-aaaa",gpu_model="Tesla T4",hostname="node1",owner="ann@example.com",project="search",task_id="a1"} 1
paddle_task_gpu_info{GPU_I_ID="",GPU_I_PROFILE="",UUID="GPU-bbbb",gpu_model="Tesla T4",hostname="node1",owner="ann@example.com",project="search",task_id="a1"} 1
paddle_task_gpu_info{GPU_I_ID="",GPU_I_PROFILE="",UUID="GPU-bbbb",gpu_model="Tesla T4",hostname="node1",owner="bob",project="vision",task_id="b2"} 1
# HELP paddle_task_gpu_share The fraction of the physical GPU an open task holds on this GPU (instance): 1 for a whole GPU, slices / total slices for a MIG instance, the platform's share for a time-sliced or MPS GPU.
# TYPE paddle_task_gpu_share gauge
paddle_task_gpu_share{GPU_I_ID="",UUID="GPU-aaaa",owner="ann@example.com",project="search",task_id="a1"} 1
paddle_task_gpu_share{GPU_I_ID="",UUID="GPU-bbbb",owner="ann@example.com",project="search",task_id="a1"} 1
paddle_task_gpu_share{GPU_I_ID="",UUID="GPU-bbbb",owner="bob",project="vision",task_id="b2"} 1
# HELP paddle_task_info A task registered with paddle-monitor and not completed (value 1); its labels identify the task (k8s_pod_uid joins kube-state-metrics' pod series).
# TYPE paddle_task_info gauge
paddle_task_info{env="prod",hostname="node1",k8s_pod_uid="3f1c2a9e-5b7d-4e0f-9a1b-2c3d4e5f6a7b",owner="ann@example.com",pipeline="ranker",priority="high",project="search",step="train",task_id="a1",task_name="train"} 1
paddle_task_info{env="",hostname="",k8s_pod_uid="",owner="cho",pipeline="",priority="",project="nlp",step="",task_id="c3",task_name="cpu-step"} 1
paddle_task_info{env="",hostname="node1",k8s_pod_uid="",owner="bob",pipeline="",priority="",project="vision",step="",task_id="b2",task_name="eval"} 1
`
	// The idle and time series have their own test (TestTaskCollectorIdle).
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "paddle_monitor_task_scrape_error", "paddle_task_gpu_info", "paddle_task_info"); err != nil {
		t.Error(err)
	}
	if src.since != now.Add(-time.Hour).Unix() {
		t.Errorf("asked for tasks seen since %d, want now - ttl = %d", src.since, now.Add(-time.Hour).Unix())
	}
	problems, err := testutil.CollectAndLint(c)
	if err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %+v", err, problems)
	}

	// A store that fails: the scrape still answers, and says so.
	src.err = errors.New("database is locked")
	want = `# HELP paddle_monitor_task_scrape_error 1 if reading the open tasks from the database failed during this scrape (paddle_task_* series are then missing), else 0.
# TYPE paddle_monitor_task_scrape_error gauge
paddle_monitor_task_scrape_error 1
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

func scrape(t *testing.T, m *fixtureMonitor) string {
	t.Helper()
	rec := get(t, m.handler, "/metrics", "")
	if rec.Code != 200 {
		t.Fatalf("GET /metrics: %d %s", rec.Code, rec.Body)
	}
	return rec.Body.String()
}

func taskLines(body string) []string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, "paddle_task_") {
			out = append(out, l)
		}
	}
	return out
}

// /metrics over the fixture posted through the API: the open tasks seen
// within --open-ttl (168h before Nov 26: t04 and t05; not t06 nor t11),
// completed tasks never; a newer task on t04's GPU ends t04's claim on it.
// The served bytes pass `promtool check metrics`.
func TestMetricsFixture(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		m := newFixtureMonitor(t, dsn, nil, "", nil)
		body := scrape(t, m)
		want := []string{
			`paddle_task_gpu_info{GPU_I_ID="",GPU_I_PROFILE="",UUID="GPU-4444aaaa-0000-0000-0000-000000000001",gpu_model="NVIDIA H100 80GB HBM3",hostname="node4",owner="cho",project="vision",task_id="t04-open-heartbeat"} 1`,
			`paddle_task_gpu_info{GPU_I_ID="",GPU_I_PROFILE="",UUID="GPU-5555aaaa-0000-0000-0000-000000000001",gpu_model="Tesla T4",hostname="node5",owner="cho",project="vision",task_id="t05-open-silent"} 1`,
			`paddle_task_gpu_info{GPU_I_ID="",GPU_I_PROFILE="",UUID="GPU-5555aaaa-0000-0000-0000-000000000002",gpu_model="Tesla T4",hostname="node5",owner="cho",project="vision",task_id="t05-open-silent"} 1`,
			`paddle_task_gpu_share{GPU_I_ID="",UUID="GPU-4444aaaa-0000-0000-0000-000000000001",owner="cho",project="vision",task_id="t04-open-heartbeat"} 1`,
			`paddle_task_gpu_share{GPU_I_ID="",UUID="GPU-5555aaaa-0000-0000-0000-000000000001",owner="cho",project="vision",task_id="t05-open-silent"} 1`,
			`paddle_task_gpu_share{GPU_I_ID="",UUID="GPU-5555aaaa-0000-0000-0000-000000000002",owner="cho",project="vision",task_id="t05-open-silent"} 1`,
			`paddle_task_info{env="",hostname="node4",k8s_pod_uid="",owner="cho",pipeline="",priority="",project="vision",step="",task_id="t04-open-heartbeat",task_name="finetune-vit"} 1`,
			`paddle_task_info{env="",hostname="node5",k8s_pod_uid="",owner="cho",pipeline="",priority="",project="vision",step="",task_id="t05-open-silent",task_name="finetune-vit"} 1`,
			`paddle_task_start_time_seconds{owner="cho",project="vision",task_id="t04-open-heartbeat"} 1.7635968e+09`,
			`paddle_task_start_time_seconds{owner="cho",project="vision",task_id="t05-open-silent"} 1.764072e+09`,
		}
		if got := taskLines(body); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("task series:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		promtoolCheckMetrics(t, body)

		// t14 starts on t04's GPU: one GPU runs one task.
		rec := httptestPost(t, m, "/v1/task/register", `{"schema_version":1,"task_id":"t14-takes-the-h100","task_name":"finetune-vit","project":"vision","owner":"dan","gpu_count":1,"start_time":1764072000,"hostname":"node4","gpus":[{"index":0,"uuid":"GPU-4444aaaa-0000-0000-0000-000000000001","name":"NVIDIA H100 80GB HBM3","memory_total_bytes":85899345920}]}`)
		if rec != 201 {
			t.Fatalf("register t14: %d", rec)
		}
		body = scrape(t, m)
		if n := strings.Count(body, `paddle_task_gpu_info{GPU_I_ID="",GPU_I_PROFILE="",UUID="GPU-4444aaaa-0000-0000-0000-000000000001"`); n != 1 ||
			!strings.Contains(body, `paddle_task_gpu_info{GPU_I_ID="",GPU_I_PROFILE="",UUID="GPU-4444aaaa-0000-0000-0000-000000000001",gpu_model="NVIDIA H100 80GB HBM3",hostname="node4",owner="dan",project="vision",task_id="t14-takes-the-h100"} 1`) {
			t.Errorf("after t14 on t04's GPU:\n%s", strings.Join(taskLines(body), "\n"))
		}
		if !strings.Contains(body, `task_id="t04-open-heartbeat",task_name="finetune-vit"} 1`) {
			t.Error("t04 left paddle_task_info when it lost its GPU; it is still open")
		}
		// A completion removes the task's series at the next scrape.
		if rec := httptestPost(t, m, "/v1/task/complete", `{"schema_version":1,"task_id":"t05-open-silent","start_time":1764072000,"end_time":1764075600,"duration_seconds":3600,"exit_code":0,"gpu_count":2,"gpu_seconds":7200,"gpus":[]}`); rec != 200 {
			t.Fatalf("complete t05: %d", rec)
		}
		if body = scrape(t, m); strings.Contains(body, "t05-open-silent") {
			t.Errorf("a completed task is still on /metrics:\n%s", strings.Join(taskLines(body), "\n"))
		}
		promtoolCheckMetrics(t, body)
	})
}

func httptestPost(t *testing.T, m *fixtureMonitor, path, body string) int {
	t.Helper()
	r := httptest.NewRequest("POST", path, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	m.handler.ServeHTTP(rec, r)
	if rec.Code >= 300 {
		t.Logf("POST %s: %d %s", path, rec.Code, rec.Body)
	}
	return rec.Code
}

// promtoolCheckMetrics runs `promtool check metrics` on an exposition;
// without promtool the check is skipped, unless PADDLE_TEST_REQUIRE_TOOLS=1.
func promtoolCheckMetrics(t *testing.T, body string) {
	t.Helper()
	tool, ok := harness.ToolIfAny(t, "promtool")
	if !ok {
		return
	}
	cmd := exec.Command(tool, "check", "metrics")
	cmd.Stdin = strings.NewReader(body)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out.String())
	}
}

// The idle series, byte for byte: utilisation per claimed GPU with
// samples, idle seconds (last_seen − idle_since; 0 while busy) for tasks
// with samples, absent once a task is not heard from for three of its
// intervals; start time for every open task, the estimate when it gave one.
func TestTaskCollectorIdle(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	i := func(v int64) *int64 { return &v }
	now := time.Unix(10000, 0)
	src := &fakeOpen{tasks: []store.OpenTask{
		// Idle since 8000, last seen 9940 (60 s ago, interval 60): 1940 s.
		{TaskID: "idle", TaskName: "train", Project: "search", Owner: "ann@example.com", Hostname: "node1", StartTime: 7000,
			LastSeen: 9940, DurationEst: i(3600), Sampled: true, IdleSince: i(8000), Interval: i(60),
			GPUs: []store.OpenGPU{{UUID: "GPU-aaaa", Model: "Tesla T4", LatestUtilMean: f(0)}, {UUID: "GPU-bbbb", Model: "Tesla T4", LatestUtilMean: f(0.5)}}},
		// Busy: 0.
		{TaskID: "busy", TaskName: "eval", Project: "vision", Owner: "bob", StartTime: 7100, LastSeen: 9990,
			Sampled: true, Interval: i(60), GPUs: []store.OpenGPU{{UUID: "GPU-cccc", Model: "Tesla T4", LatestUtilMean: f(87.5)}}},
		// Idle, but last seen 181 s ago with a 60 s interval: lost, not idle.
		{TaskID: "lost", TaskName: "eval", Project: "vision", Owner: "bob", StartTime: 7200, LastSeen: 9819,
			Sampled: true, IdleSince: i(8000), Interval: i(60), GPUs: []store.OpenGPU{{UUID: "GPU-dddd", Model: "Tesla T4", LatestUtilMean: f(0)}}},
		// Never sampled: no idle series, no utilisation.
		{TaskID: "plain", TaskName: "prep", Project: "nlp", Owner: "cho", StartTime: 7300, LastSeen: 7300,
			GPUs: []store.OpenGPU{{UUID: "GPU-eeee", Model: "Tesla T4"}}},
	}}
	c := monitor.NewTaskCollector(src, time.Hour, func() time.Time { return now })
	want := `# HELP paddle_task_duration_estimate_seconds How long an open task said it would run (its registration's duration_est).
# TYPE paddle_task_duration_estimate_seconds gauge
paddle_task_duration_estimate_seconds{owner="ann@example.com",project="search",task_id="idle"} 3600
# HELP paddle_task_gpu_utilization_percent Mean utilisation (percent) of a GPU an open task runs on, over the interval of the task's latest heartbeat with samples.
# TYPE paddle_task_gpu_utilization_percent gauge
paddle_task_gpu_utilization_percent{GPU_I_ID="",UUID="GPU-aaaa",owner="ann@example.com",project="search",task_id="idle"} 0
paddle_task_gpu_utilization_percent{GPU_I_ID="",UUID="GPU-bbbb",owner="ann@example.com",project="search",task_id="idle"} 0.5
paddle_task_gpu_utilization_percent{GPU_I_ID="",UUID="GPU-cccc",owner="bob",project="vision",task_id="busy"} 87.5
paddle_task_gpu_utilization_percent{GPU_I_ID="",UUID="GPU-dddd",owner="bob",project="vision",task_id="lost"} 0
# HELP paddle_task_idle_seconds How long every sampled GPU of an open task has been below 1 % (last heartbeat minus idle_since); 0 while busy. Absent for a task not heard from for three heartbeat intervals (lost, not idle).
# TYPE paddle_task_idle_seconds gauge
paddle_task_idle_seconds{hostname="",owner="bob",project="vision",task_id="busy",task_name="eval"} 0
paddle_task_idle_seconds{hostname="node1",owner="ann@example.com",project="search",task_id="idle",task_name="train"} 1940
# HELP paddle_task_start_time_seconds When an open task started (Unix seconds, its registration's start_time).
# TYPE paddle_task_start_time_seconds gauge
paddle_task_start_time_seconds{owner="ann@example.com",project="search",task_id="idle"} 7000
paddle_task_start_time_seconds{owner="bob",project="vision",task_id="busy"} 7100
paddle_task_start_time_seconds{owner="bob",project="vision",task_id="lost"} 7200
paddle_task_start_time_seconds{owner="cho",project="nlp",task_id="plain"} 7300
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "paddle_task_duration_estimate_seconds",
		"paddle_task_gpu_utilization_percent", "paddle_task_idle_seconds", "paddle_task_start_time_seconds"); err != nil {
		t.Error(err)
	}
	problems, err := testutil.CollectAndLint(c)
	if err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %+v", err, problems)
	}
}
