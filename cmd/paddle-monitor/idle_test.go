package main

// Black-box tests of idle detection (docs/cost.md, Idle tasks) on the built
// paddle-monitor, on SQLite and PostgreSQL: heartbeats with gpus set each
// GPU's latest utilisation and the task's idle_since, GET
// /v1/tasks?state=idle lists the idle tasks with their cost so far, and
// /metrics shows the idle series.

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
	"github.com/paddle-entrypoint/paddle-entrypoint/test/harness"
)

// twoGPUTask registers a task on two H100s (price 28 each in the fixture's
// prices) that started at start.
func twoGPUTask(id string, start int64) string {
	return fmt.Sprintf(`{"schema_version":1,"task_id":%q,"task_name":"finetune","project":"vision","owner":"cho@example.com",
		"gpu_count":2,"start_time":%d,"hostname":"node-7","duration_est":600,"labels":{},
		"gpus":[{"index":0,"uuid":"GPU-%s-0","name":"NVIDIA H100 80GB HBM3","memory_total_bytes":85520809984,"share":1},{"index":1,"uuid":"GPU-%s-1","name":"NVIDIA H100 80GB HBM3","memory_total_bytes":85520809984,"share":1}]}`,
		id, start, id, id)
}

// idleState is what GET /v1/tasks/{id} says about idleness.
type idleState struct {
	LastSeen  *int64 `json:"last_seen"`
	IdleSince *int64 `json:"idle_since"`
	GPUs      []struct {
		LatestSamples  *int64   `json:"latest_samples"`
		LatestUtilMean *float64 `json:"latest_util_mean"`
	} `json:"gpus"`
}

func (s idleState) String() string {
	str := func(p *int64) string {
		if p == nil {
			return "null"
		}
		return fmt.Sprint(*p)
	}
	out := "last_seen=" + str(s.LastSeen) + " idle_since=" + str(s.IdleSince)
	for _, g := range s.GPUs {
		u := "null"
		if g.LatestUtilMean != nil {
			u = fmt.Sprint(*g.LatestUtilMean)
		}
		out += " " + str(g.LatestSamples) + "/" + u
	}
	return out
}

func readIdle(t *testing.T, s *server, id string) idleState {
	t.Helper()
	a := s.do(t, get("/v1/tasks/"+id, ""))
	if a.Status != 200 {
		t.Fatalf("GET /v1/tasks/%s: %d %s", id, a.Status, a.Body)
	}
	var st idleState
	if err := json.Unmarshal(a.Body, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// Each heartbeat of a run, in order, and the task's state after it. T is
// the start; the heartbeats' times are the sender's (the server bounds
// them at its clock plus five minutes only).
func TestHeartbeatIdleSince(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db string) {
		s := startServer(t, db, "--prices", fixtureFile(t, "prices.json"))
		T := time.Now().Add(-3 * time.Hour).Unix()
		if a := s.do(t, registerReq(twoGPUTask("hb", T), "")); a.Status != 201 {
			t.Fatalf("register: %d %s", a.Status, a.Body)
		}
		g := func(i int, samples int, util string) string {
			return fmt.Sprintf(`{"uuid":"GPU-hb-%d","samples":%d,"util_mean":%s}`, i, samples, util)
		}
		for _, c := range []struct {
			what, body, want string
		}{
			{"no heartbeat yet", "", "last_seen=null idle_since=null null/null null/null"},
			{"idle (0.5 % and 0 %): idle since time − interval",
				fmt.Sprintf(`{"task_id":"hb","time":%d,"interval_seconds":60,"gpus":[%s,%s]}`, T+120, g(0, 6, "0.5"), g(1, 6, "0")),
				fmt.Sprintf("last_seen=%d idle_since=%d 6/0.5 6/0", T+120, T+60)},
			{"idle again: idle_since stays the start of the run",
				fmt.Sprintf(`{"task_id":"hb","time":%d,"interval_seconds":60,"gpus":[%s,%s]}`, T+180, g(0, 6, "0"), g(1, 6, "0.99")),
				fmt.Sprintf("last_seen=%d idle_since=%d 6/0 6/0.99", T+180, T+60)},
			{"a late (spooled) busy heartbeat moves nothing back",
				fmt.Sprintf(`{"task_id":"hb","time":%d,"interval_seconds":60,"gpus":[%s,%s]}`, T+150, g(0, 6, "90"), g(1, 6, "90")),
				fmt.Sprintf("last_seen=%d idle_since=%d 6/0 6/0.99", T+180, T+60)},
			{"one at the same time as the newest with gpus moves nothing either",
				fmt.Sprintf(`{"task_id":"hb","time":%d,"interval_seconds":60,"gpus":[%s]}`, T+180, g(0, 6, "90")),
				fmt.Sprintf("last_seen=%d idle_since=%d 6/0 6/0.99", T+180, T+60)},
			{"no samples anywhere changes nothing but last_seen",
				fmt.Sprintf(`{"task_id":"hb","time":%d,"interval_seconds":60,"gpus":[%s,%s]}`, T+240, g(0, 0, "null"), g(1, 0, "null")),
				fmt.Sprintf("last_seen=%d idle_since=%d 6/0 6/0.99", T+240, T+60)},
			{"an unknown GPU at 95 % is ignored; the known one is idle",
				fmt.Sprintf(`{"task_id":"hb","time":%d,"interval_seconds":60,"gpus":[{"uuid":"GPU-other","samples":6,"util_mean":95},{"uuid":"GPU-hb-0","mig_uuid":"MIG-x","samples":6,"util_mean":80},%s]}`, T+300, g(1, 6, "0")),
				fmt.Sprintf("last_seen=%d idle_since=%d 6/0 6/0", T+300, T+60)},
			{"one GPU without samples, the other busy: busy, idle_since null",
				fmt.Sprintf(`{"task_id":"hb","time":%d,"interval_seconds":60,"gpus":[%s,%s]}`, T+360, g(0, 0, "null"), g(1, 6, "1")),
				fmt.Sprintf("last_seen=%d idle_since=null 0/null 6/1", T+360)},
			{"idle without interval_seconds: idle since its time",
				fmt.Sprintf(`{"task_id":"hb","time":%d,"gpus":[%s,%s]}`, T+420, g(0, 6, "0"), g(1, 6, "0")),
				fmt.Sprintf("last_seen=%d idle_since=%d 6/0 6/0", T+420, T+420)},
			{"a heartbeat without gpus moves last_seen only",
				fmt.Sprintf(`{"task_id":"hb","time":%d}`, T+2400),
				fmt.Sprintf("last_seen=%d idle_since=%d 6/0 6/0", T+2400, T+420)},
		} {
			if c.body != "" {
				if a := s.do(t, post("/v1/task/heartbeat", c.body, "")); a.Status != 200 {
					t.Fatalf("%s: %d %s", c.what, a.Status, a.Body)
				}
			}
			if got := readIdle(t, s, "hb").String(); got != c.want {
				t.Errorf("%s:\n got %s\nwant %s", c.what, got, c.want)
			}
		}

		// Idle for 2400 − 420 = 1980 s = 33 min: listed with the default
		// idle_for of 30m and with 33m, not with 34m. Cost so far: 2 H100
		// at 28 from T to T+2400 (40 min): 2 × 28 × 2/3 = 37.333333.
		list := func(query string) []map[string]any {
			t.Helper()
			a := s.do(t, get("/v1/tasks?"+query, ""))
			if a.Status != 200 {
				t.Fatalf("GET /v1/tasks?%s: %d %s", query, a.Status, a.Body)
			}
			var l struct{ Tasks []map[string]any }
			json.Unmarshal(a.Body, &l)
			return l.Tasks
		}
		for query, n := range map[string]int{"state=idle": 1, "state=idle&idle_for=33m": 1, "state=idle&idle_for=34m": 0,
			"state=idle&idle_for=0s&project=nlp": 0} {
			if got := list(query); len(got) != n {
				t.Errorf("GET /v1/tasks?%s: %d tasks, want %d", query, len(got), n)
			}
		}
		idle := list("state=idle")
		if len(idle) == 1 && (idle[0]["task_id"] != "hb" || idle[0]["idle_since"] != float64(T+420) || idle[0]["cost_so_far"] != 37.333333) {
			t.Errorf("the idle task: %v", idle[0])
		}
		if l := list("state=running"); len(l) != 1 || l[0]["cost_so_far"] != nil {
			t.Errorf("state=running lists cost_so_far or misses the task: %v", l)
		}

		// /metrics: utilisation per GPU and idle seconds (last_seen − idle_since).
		body := string(s.do(t, get("/metrics", "")).Body)
		for _, want := range []string{
			`paddle_task_idle_seconds{hostname="node-7",owner="cho@example.com",project="vision",task_id="hb",task_name="finetune"} 1980`,
			`paddle_task_gpu_utilization_percent{GPU_I_ID="",UUID="GPU-hb-0",owner="cho@example.com",project="vision",task_id="hb"} 0`,
			`paddle_task_gpu_utilization_percent{GPU_I_ID="",UUID="GPU-hb-1",owner="cho@example.com",project="vision",task_id="hb"} 0`,
			`paddle_task_duration_estimate_seconds{owner="cho@example.com",project="vision",task_id="hb"} 600`,
			`paddle_task_start_time_seconds{owner="cho@example.com",project="vision",task_id="hb"} ` + strconv.FormatFloat(float64(T), 'g', -1, 64),
		} {
			if !strings.Contains(body, want+"\n") {
				t.Errorf("/metrics lacks %s", want)
			}
		}
		promtoolCheck(t, body)

		// The completion ends it: idle_since null, the task leaves the
		// idle list; later heartbeats are answered 200 and move last_seen
		// (its counted end), never its GPU data.
		if a := s.do(t, post("/v1/task/complete", fmt.Sprintf(`{"schema_version":1,"task_id":"hb","end_time":%d,"duration_seconds":2500,"exit_code":0}`, T+2500), "")); a.Status != 200 {
			t.Fatalf("complete: %d %s", a.Status, a.Body)
		}
		for _, hb := range []string{
			fmt.Sprintf(`{"task_id":"hb","time":%d,"interval_seconds":60,"gpus":[%s]}`, T+2600, g(0, 6, "50")),
			fmt.Sprintf(`{"task_id":"hb","time":%d}`, T+2700),
		} {
			if a := s.do(t, post("/v1/task/heartbeat", hb, "")); a.Status != 200 {
				t.Fatalf("heartbeat of a completed task: %d %s", a.Status, a.Body)
			}
		}
		if got, want := readIdle(t, s, "hb").String(), fmt.Sprintf("last_seen=%d idle_since=null 6/0 6/0", T+2700); got != want {
			t.Errorf("after the completion: %s, want %s", got, want)
		}
		if l := list("state=idle&idle_for=0s"); len(l) != 0 {
			t.Errorf("a completed task is listed idle: %v", l)
		}
	})
}

// Bad heartbeats and idle queries are 400 naming the field or parameter;
// an unknown task's heartbeat with gpus is 404.
func TestHeartbeatIdleBadInput(t *testing.T) {
	s := startServer(t, storetest.SQLiteDSN(t))
	now := time.Now().Unix()
	if a := s.do(t, registerReq(twoGPUTask("bad", now-60), "")); a.Status != 201 {
		t.Fatalf("register: %d %s", a.Status, a.Body)
	}
	for _, c := range []struct {
		body   string
		status int
		err    string
	}{
		{`{"task_id":"bad","gpus":"GPU-x"}`, 400, "field gpus: must be a list of objects"},
		{`{"task_id":"bad","gpus":[1]}`, 400, "field gpus[0]: must be an object"},
		{`{"task_id":"bad","gpus":[{"uuid":"GPU-bad-0","samples":6,"util_mean":101}]}`, 400, "field gpus[0].util_mean: must be between 0 and 100"},
		{`{"task_id":"bad","gpus":[{"uuid":"GPU-bad-0","samples":-1}]}`, 400, "field gpus[0].samples: must be between 0 and"},
		{`{"task_id":"bad","gpus":[{"uuid":7,"samples":1}]}`, 400, "field gpus[0].uuid: must be a string"},
		{`{"task_id":"bad","gpus":[{"samples":6,"util_mean":0}]}`, 400, "field gpus[0].uuid: is required"},
		{`{"task_id":"bad","gpus":[{"uuid":"GPU-bad-0","util_mean":0}]}`, 400, "field gpus[0].samples: is required"},
		{`{"task_id":"bad","interval_seconds":"60"}`, 400, "field interval_seconds: must be a number"},
		{`{"task_id":"bad","interval_seconds":-1}`, 400, "field interval_seconds: must be between 0 and"},
		{`{"task_id":"nobody","interval_seconds":60,"gpus":[{"uuid":"GPU-bad-0","samples":6,"util_mean":0}]}`, 404, "no task nobody"},
	} {
		expect(t, s.do(t, post("/v1/task/heartbeat", c.body, "")), c.status, c.err)
	}
	for query, err := range map[string]string{
		"state=running&idle_for=30m": "parameter idle_for: only with state=idle",
		"idle_for=30m":               "parameter idle_for: only with state=idle",
		"state=idle&idle_for=half":   `parameter idle_for: "half" is not a Go duration`,
		"state=idle&idle_for=-5m":    `parameter idle_for: "-5m" is not a Go duration`,
		"state=sleeping":             "parameter state: must be running, completed, failed or idle",
	} {
		expect(t, s.do(t, get("/v1/tasks?"+query, "")), 400, err)
	}
}

// promtoolCheck runs `promtool check metrics` on an exposition (skipped
// without promtool unless PADDLE_TEST_REQUIRE_TOOLS=1).
func promtoolCheck(t *testing.T, body string) {
	t.Helper()
	tool := harness.Tool(t, "promtool")
	c := execCommand(tool, "check", "metrics")
	c.Stdin = strings.NewReader(body)
	if out, err := c.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}
