package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// withField returns body (a JSON object) with key set to v.
func withField(t *testing.T, body, key string, v any) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatal(err)
	}
	m[key] = v
	b, _ := json.Marshal(m)
	return string(b)
}

// gpuList is n GPU entries of a registration.
func gpuList(n int) []any {
	var out []any
	for i := range n {
		out = append(out, map[string]any{"index": i, "uuid": fmt.Sprintf("GPU-b-%d", i), "name": "NVIDIA H100 80GB HBM3",
			"memory_total_bytes": 1, "share": 1})
	}
	return out
}

// TestBounds: what no real clock or node sends is a 400 naming the field;
// a time ahead of the server's clock by less than 24 hours is clamped to
// the receipt time, stored clamped and logged once per host; a pending
// completion that does not fit its registration is not joined, and logged.
func TestBounds(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := startServer(t, dsn)
		now := time.Now().Unix()
		reg := func(id string, start int64) string { return teamReg(id, "search_rank", "ann", start, "GPU-"+id) }
		comp := func(id string, start, end int64, dur float64) string {
			return fmt.Sprintf(`{"schema_version":1,"task_id":%q,"start_time":%d,"end_time":%d,"duration_seconds":%g,"exit_code":0}`, id, start, end, dur)
		}
		for _, tc := range []struct {
			name, errPart string
			r             request
		}{
			{"start 25 h ahead", "field start_time: ", registerReq(reg("far", now+25*3600), "")},
			{"start 2^40", "field start_time", registerReq(reg("far2", 1<<40), "")},
			{"257 GPUs", "field gpus: must list at most 256 GPUs",
				registerReq(withField(t, withField(t, reg("many", now), "gpus", gpuList(257)), "gpu_count", 257), "")},
			{"gpus and gpu_count differ", "field gpu_count: 2 differs from the 1 entries of gpus",
				registerReq(withField(t, reg("count", now), "gpu_count", 2), "")},
			{"end 25 h ahead", "field end_time: ", post("/v1/task/complete", comp("c1", now, now+25*3600, 1), "")},
			{"end before start", "field end_time: ", post("/v1/task/complete", comp("c2", now-100, now-200, 1), "")},
			{"end past start + duration + 1h", "field end_time: ",
				post("/v1/task/complete", comp("c3", now-10000, now-10000+3600+3601, 3600), "")},
			{"end 2^40 with duration 1", "field end_time", post("/v1/task/complete", comp("c4", now-100, 1<<40, 1), "")},
		} {
			t.Run(tc.name, func(t *testing.T) {
				a := s.do(t, tc.r)
				expect(t, a, 400, tc.errPart)
				if strings.Contains(tc.errPart, "ahead") || tc.name == "start 25 h ahead" || tc.name == "end 25 h ahead" {
					if !strings.Contains(a.Error(t), "more than 24 hours ahead of the server's clock") {
						t.Errorf("error %q does not say the rule", a.Error(t))
					}
				}
			})
		}
		// An empty gpus with a count is device-node counting: accepted.
		expect(t, s.do(t, registerReq(withField(t, withField(t, reg("nodes", now), "gpus", []any{}), "gpu_count", 4), "")), 201, "")
		// A completion of a stored task whose end does not fit the task's
		// start (the body has no start_time of its own): 400, the task
		// stays open.
		expect(t, s.do(t, registerReq(reg("fit", now-7200), "")), 201, "")
		expect(t, s.do(t, post("/v1/task/complete", fmt.Sprintf(`{"task_id":"fit","end_time":%d,"duration_seconds":60,"exit_code":0}`, now-7200-5), "")),
			400, "before the task's start_time")
		expect(t, s.do(t, post("/v1/task/complete", fmt.Sprintf(`{"task_id":"fit","end_time":%d,"duration_seconds":60,"exit_code":0}`, now), "")),
			400, "later than the task's start_time")
		if task := taskOf(t, s, "/v1/tasks/fit", ""); task["state"] != "running" {
			t.Errorf("a refused completion reached the task: %v", task)
		}
		// Nothing refused was stored.
		for _, id := range []string{"far", "far2", "many", "count"} {
			expect(t, s.do(t, get("/v1/tasks/"+id, "")), 404, "")
		}

		// Clamped: a start an hour ahead is stored as the receipt time.
		before := time.Now().Unix()
		expect(t, s.do(t, registerReq(reg("skew", now+3600), "")), 201, "")
		after := time.Now().Unix()
		if st := int64(taskOf(t, s, "/v1/tasks/skew", "")["start_time"].(float64)); st < before || st > after {
			t.Errorf("start_time an hour ahead stored as %d, want the receipt time (%d to %d)", st, before, after)
		}
		// The same body again is the same task (the body is kept as sent).
		expect(t, s.do(t, registerReq(reg("skew", now+3600), "")), 200, "")
		// A completion an hour ahead, clamped, then checked: it fits.
		a := s.do(t, post("/v1/task/complete", comp("skew", now+3600, now+3600+60, 60), ""))
		expect(t, a, 200, "")
		task := taskOf(t, s, "/v1/tasks/skew", "")
		if end := int64(task["completion"].(map[string]any)["end_time"].(float64)); end > time.Now().Unix() {
			t.Errorf("end_time an hour ahead stored as %d, after the server's clock", end)
		}
		// Logged once per host: node-1 twice, then another host.
		expect(t, s.do(t, registerReq(reg("skew2", now+1800), "")), 201, "")
		expect(t, s.do(t, registerReq(withField(t, reg("skew3", now+1800), "hostname", "node-2"), "")), 201, "")
		s.waitLog(t, `"host":"node-2"`)
		log := s.Log()
		if n := strings.Count(log, `"msg":"a time ahead of the server's clock was clamped`); n != 3 {
			// node-1 (the registration), the completion's remote address,
			// node-2.
			t.Errorf("%d clamp warnings, want 3 (node-1, the completion's address, node-2):\n%s", n, log)
		}
		if n := strings.Count(log, `"host":"node-1"`); n != 1 {
			t.Errorf("node-1's skew logged %d times, want once:\n%s", n, log)
		}

		// A pending completion checked when its registration comes: one
		// that ends before the start is not joined, and logged.
		expect(t, s.do(t, post("/v1/task/complete", fmt.Sprintf(`{"task_id":"late","end_time":%d,"duration_seconds":10,"exit_code":0}`, now-5000), "")), 200, "")
		expect(t, s.do(t, registerReq(reg("late", now-4000), "")), 201, "")
		if task := taskOf(t, s, "/v1/tasks/late", ""); task["state"] != "running" {
			t.Errorf("a pending completion ending before the start was joined: %v", task)
		}
		s.waitLog(t, `"msg":"a pending completion does not fit its registration: not joined"`)
	})
}

// TestOpenBound: --max-open-per-token bounds a token's open tasks (seen
// within --open-ttl) and pending completions: past it a registration is 429
// naming the token; a completion frees a place, so does --open-ttl; admin
// tokens are not bounded; without a tokens file the bound is for all. A
// start_time in the future does not keep a task on /metrics past
// --open-ttl.
func TestOpenBound(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		const ttl = 4 * time.Second
		s := startServer(t, dsn, "--tokens", teamTokens(t), "--max-open-per-token", "3", "--open-ttl", ttl.String())
		const a, b, admin = "s-secret", "ads-secret", "a-secret"
		now := time.Now().Unix()
		for i := range 3 {
			expect(t, s.do(t, registerReq(teamReg(fmt.Sprintf("o-%d", i), "search_rank", "ann@example.com", now-60, "GPU-o"+fmt.Sprint(i)), a)), 201, "")
		}
		ans := s.do(t, registerReq(teamReg("o-3", "search_rank", "ann@example.com", now-60, "GPU-o3"), a))
		expect(t, ans, 429, "token search has reached its bound of open tasks (--max-open-per-token")
		if !strings.Contains(ans.Error(t), "the bound is 3") || ans.Header.Get("Retry-After") != "60" {
			t.Errorf("429 %q (Retry-After %q) does not give the bound, or no Retry-After: 60", ans.Error(t), ans.Header.Get("Retry-After"))
		}
		// The same body of a stored task is still 200, and another token
		// is not affected.
		expect(t, s.do(t, registerReq(teamReg("o-0", "search_rank", "ann@example.com", now-60, "GPU-o0"), a)), 200, "")
		expect(t, s.do(t, registerReq(teamReg("o-0", "ads_ctr", "bob", now-60, "GPU-p0"), b)), 201, "")
		// A completion frees a place.
		expectStatus(t, s.do(t, post("/v1/task/complete", teamComplete("o-1", now-60, 0), a)), "completed")
		expect(t, s.do(t, registerReq(teamReg("o-3", "search_rank", "ann@example.com", now-60, "GPU-o3"), a)), 201, "")
		// Pending completions count: B has one task and two pending.
		expectStatus(t, s.do(t, post("/v1/task/complete", teamComplete("p-1", now-60, 0), b)), "pending")
		expectStatus(t, s.do(t, post("/v1/task/complete", teamComplete("p-2", now-60, 0), b)), "pending")
		expect(t, s.do(t, registerReq(teamReg("p-3", "ads_ctr", "bob", now-60, "GPU-p3"), b)), 429, "token ads")
		expect(t, s.do(t, post("/v1/task/complete", teamComplete("p-4", now-60, 0), b)), 429, "token ads")
		// The admin is not bounded.
		for i := range 5 {
			expect(t, s.do(t, registerReq(teamReg(fmt.Sprintf("adm-%d", i), "nlp_x", "cho", now-60, "GPU-q"+fmt.Sprint(i)), admin)), 201, "")
		}
		// A start_time 20 hours ahead is clamped to the receipt time, so
		// --open-ttl applies to it like to any other task.
		expect(t, s.do(t, registerReq(teamReg("future", "nlp_x", "cho", now+20*3600, "GPU-f"), admin)), 201, "")
		// The TTL runs from the last time each task was seen (the
		// registrations above), not from the test's start: on a loaded
		// machine they can take longer than the margin.
		lastSeen := time.Now()
		if !strings.Contains(string(s.do(t, get("/metrics", admin)).Body), `task_id="future"`) {
			t.Error("the task with a future start is not on /metrics")
		}
		// After --open-ttl without a heartbeat the tasks no longer count
		// as open, and leave /metrics whatever their start.
		time.Sleep(time.Until(lastSeen.Add(ttl + 2*time.Second)))
		expect(t, s.do(t, registerReq(teamReg("o-4", "search_rank", "ann@example.com", now, "GPU-o4"), a)), 201, "")
		if m := string(s.do(t, get("/metrics", admin)).Body); strings.Contains(m, `task_id="future"`) || strings.Contains(m, `task_id="o-0"`) {
			t.Errorf("tasks not seen for --open-ttl are still on /metrics:\n%s", m)
		}

		// Without a tokens file the bound is for all.
		open := startServer(t, storetest.SQLiteDSN(t), "--max-open-per-token", "2")
		expect(t, open.do(t, registerReq(teamReg("g-1", "search_rank", "ann", now, "GPU-g1"), "")), 201, "")
		expect(t, open.do(t, registerReq(teamReg("g-2", "ads_ctr", "bob", now, "GPU-g2"), "")), 201, "")
		expect(t, open.do(t, registerReq(teamReg("g-3", "nlp_x", "cho", now, "GPU-g3"), "")), 429, "the monitor (no tokens file: one bound for all)")
	})
}
