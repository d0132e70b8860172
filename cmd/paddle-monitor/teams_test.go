package main

// Black-box tests of teams sharing one monitor (docs/monitor.md): two
// team tokens (search_*, ads_*) and an admin, as a hostile team would try
// them.

import (
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// teamTokens is tokensFile with a second team: "ads" (secret ads-secret),
// projects ads_*, any owner.
func teamTokens(t *testing.T) string {
	t.Helper()
	return tokensFile(t, t.TempDir(), `{"name":"ads","sha256":"`+hashHex("ads-secret")+`","projects":["ads_*"]}`)
}

// teamReg is a registration of id in project with a GPU of its own (claims
// are TestClaimsAcrossScopes' business).
func teamReg(id, project, owner string, start int64, gpu string) string {
	return fmt.Sprintf(`{"schema_version":1,"task_id":%q,"task_name":"train","project":%q,"owner":%q,"start_time":%d,
		"hostname":"node-1","labels":{},"gpu_count":1,"gpus":[{"index":0,"uuid":%q,"name":"NVIDIA H100 80GB HBM3","memory_total_bytes":1,"share":1}]}`,
		id, project, owner, start, gpu)
}

// teamComplete is a completion of id that started at start and ran an hour.
func teamComplete(id string, start int64, exit int) string {
	return fmt.Sprintf(`{"schema_version":1,"task_id":%q,"start_time":%d,"end_time":%d,"duration_seconds":3600,"exit_code":%d,"gpu_count":1}`,
		id, start, start+3600, exit)
}

// sameAnswer checks that a (about task id) is the answer unused (about
// task unusedID) was: status, Content-Type and body, the id aside.
func sameAnswer(t *testing.T, what string, a answer, id string, unused answer, unusedID string) {
	t.Helper()
	body := strings.ReplaceAll(string(unused.Body), unusedID, id)
	if a.Status != unused.Status || string(a.Body) != body || a.Header.Get("Content-Type") != unused.Header.Get("Content-Type") {
		t.Errorf("%s: %d %s; an unused task id answers %d %s", what, a.Status, a.Body, unused.Status, body)
	}
}

// expectStatus checks a 200 write answer and its status.
func expectStatus(t *testing.T, a answer, status string) {
	t.Helper()
	expect(t, a, 200, "")
	if got := a.JSON(t)["status"]; got != status {
		t.Fatalf("status %v, want %s: %s", got, status, a.Body)
	}
}

func taskOf(t *testing.T, s *server, path, token string) map[string]any {
	t.Helper()
	a := s.do(t, get(path, token))
	expect(t, a, 200, "")
	return a.JSON(t)
}

// TestTaskIdentityPerScope: a task_id that exists only outside the
// caller's scope is, for that caller, unused — register 201, complete 200
// pending, heartbeat 404, with the bodies an unused id gets — and the other
// team's task is untouched: no oracle, no squatting, no poisoned pending
// completion. A token that sees several tasks under one id (the admin):
// registration 200 for the same body else 409, completion by start_time,
// heartbeat updates each, GET lists the others as same_task_id.
func TestTaskIdentityPerScope(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := startServer(t, dsn, "--tokens", teamTokens(t))
		const a, b, admin = "s-secret", "ads-secret", "a-secret"
		const start = int64(1794700000)

		// The oracle: B probes A's pod UID and an unused one; every answer
		// is the same.
		for _, id := range []string{"pod-a", "pod-c", "pod-h", "pod-r"} {
			expect(t, s.do(t, registerReq(teamReg(id, "search_rank", "ann@example.com", start, "GPU-"+id), a)), 201, "")
		}
		sameAnswer(t, "B registers A's id", s.do(t, registerReq(teamReg("pod-a", "ads_ctr", "bob", start, "GPU-b"), b)), "pod-a",
			s.do(t, registerReq(teamReg("never", "ads_ctr", "bob", start, "GPU-b2"), b)), "never")
		sameAnswer(t, "B completes A's id", s.do(t, post("/v1/task/complete", teamComplete("pod-c", start, 9), b)), "pod-c",
			s.do(t, post("/v1/task/complete", teamComplete("never2", start, 9), b)), "never2")
		sameAnswer(t, "B heartbeats A's id", s.do(t, post("/v1/task/heartbeat", `{"task_id":"pod-h"}`, b)), "pod-h",
			s.do(t, post("/v1/task/heartbeat", `{"task_id":"never3"}`, b)), "never3")
		sampled := func(id string) string {
			return fmt.Sprintf(`{"task_id":%q,"time":%d,"interval_seconds":60,"gpus":[{"uuid":"GPU-pod-h","samples":6,"util_mean":0}]}`, id, start+600)
		}
		sameAnswer(t, "B's heartbeat with GPU samples for A's id", s.do(t, post("/v1/task/heartbeat", sampled("pod-h"), b)), "pod-h",
			s.do(t, post("/v1/task/heartbeat", sampled("never5"), b)), "never5")
		sameAnswer(t, "B reads A's id", s.do(t, get("/v1/tasks/pod-r?project=search_rank", b)), "pod-r",
			s.do(t, get("/v1/tasks/never4?project=search_rank", b)), "never4")

		// A's tasks are untouched: B's task under the same id is B's own,
		// B's completion and heartbeat moved nothing of A's.
		for _, id := range []string{"pod-a", "pod-c", "pod-h", "pod-r"} {
			ta := taskOf(t, s, "/v1/tasks/"+id, a)
			if ta["project"] != "search_rank" || ta["last_seen"] != nil || ta["completion"] != nil || ta["same_task_id"] != nil ||
				ta["idle_since"] != nil {
				t.Errorf("A's task %s after B's probes: %v", id, ta)
			}
		}
		if tb := taskOf(t, s, "/v1/tasks/pod-a", b); tb["project"] != "ads_ctr" || tb["same_task_id"] != nil {
			t.Errorf("B's task pod-a: %v", tb)
		}
		// Within one scope the registration's rules stand: a different
		// body is 409, the
		// same 200.
		expect(t, s.do(t, registerReq(teamReg("pod-a", "search_other", "ann@example.com", start, "GPU-pod-a"), a)), 409, "different body")
		expect(t, s.do(t, registerReq(teamReg("pod-a", "search_rank", "ann@example.com", start, "GPU-pod-a"), a)), 200, "")

		// Squatting: B registers a pod UID before its owner does; A's
		// registration is still 201 and A's completion 200 completed.
		expect(t, s.do(t, registerReq(teamReg("pod-squat", "ads_ctr", "bob", start, "GPU-s1"), b)), 201, "")
		expect(t, s.do(t, registerReq(teamReg("pod-squat", "search_rank", "ann@example.com", start+5, "GPU-s2"), a)), 201, "")
		ans := s.do(t, post("/v1/task/complete", teamComplete("pod-squat", start+5, 0), a))
		expect(t, ans, 200, "")
		if ans.JSON(t)["status"] != "completed" {
			t.Errorf("A's completion of a squatted id: %s", ans.Body)
		}
		if ta := taskOf(t, s, "/v1/tasks/pod-squat", a); ta["state"] != "completed" || ta["project"] != "search_rank" {
			t.Errorf("A's squatted task: %v", ta)
		}
		if tb := taskOf(t, s, "/v1/tasks/pod-squat", b); tb["state"] != "running" {
			t.Errorf("B's task was completed by A's completion: %v", tb)
		}

		// Poisoning: B's completion comes first for A's id; A's own
		// completion is then 200 pending (its scope's own), and A's
		// registration joins A's, never B's.
		expectStatus(t, s.do(t, post("/v1/task/complete", teamComplete("pod-p", start, 137), b)), "pending")
		ans = s.do(t, post("/v1/task/complete", teamComplete("pod-p", start, 0), a))
		expect(t, ans, 200, "")
		if ans.JSON(t)["status"] != "pending" {
			t.Errorf("A's completion after B's: %s, want pending", ans.Body)
		}
		expect(t, s.do(t, registerReq(teamReg("pod-p", "search_rank", "ann@example.com", start, "GPU-p"), a)), 201, "")
		ta := taskOf(t, s, "/v1/tasks/pod-p", a)
		if c, _ := ta["completion"].(map[string]any); ta["state"] != "completed" || c == nil || c["exit_code"] != 0.0 {
			t.Errorf("A's task joined the wrong pending completion: %v", ta)
		}
		// B's pending completion waits for B's own registration.
		expect(t, s.do(t, registerReq(teamReg("pod-p", "ads_ctr", "bob", start, "GPU-p2"), b)), 201, "")
		if tb := taskOf(t, s, "/v1/tasks/pod-p", b); tb["state"] != "failed" {
			t.Errorf("B's task did not join B's pending completion: %v", tb)
		}
		// Lists: each team sees its own.
		for _, tc := range []struct{ token, want string }{{a, "search_rank"}, {b, "ads_ctr"}} {
			for _, task := range taskOf(t, s, "/v1/tasks?limit=1000", tc.token)["tasks"].([]any) {
				if p := task.(map[string]any)["project"]; p != tc.want {
					t.Errorf("token %s lists a task of %v", tc.token, p)
				}
			}
		}

		// The admin sees both tasks under pod-a: the newest, and the other
		// as same_task_id; ?project= picks one.
		expect(t, s.do(t, registerReq(teamReg("pod-2", "search_rank", "ann@example.com", start, "GPU-21"), a)), 201, "")
		expect(t, s.do(t, registerReq(teamReg("pod-2", "ads_ctr", "bob", start+60, "GPU-22"), b)), 201, "")
		both := taskOf(t, s, "/v1/tasks/pod-2", admin)
		want := []any{map[string]any{"project": "search_rank", "owner": "ann@example.com", "start_time": float64(start)}}
		if both["project"] != "ads_ctr" || !reflect.DeepEqual(both["same_task_id"], want) {
			t.Errorf("admin's GET of pod-2: project %v, same_task_id %v; want ads_ctr and %v", both["project"], both["same_task_id"], want)
		}
		if p := taskOf(t, s, "/v1/tasks/pod-2?project=search_rank", admin); p["project"] != "search_rank" ||
			!reflect.DeepEqual(p["same_task_id"], []any{map[string]any{"project": "ads_ctr", "owner": "bob", "start_time": float64(start + 60)}}) {
			t.Errorf("?project=search_rank: %v", p)
		}
		expect(t, s.do(t, get("/v1/tasks/pod-2?project=nlp", admin)), 404, "no task pod-2")
		// Registration: 200 when one of them has the same body, else 409.
		expect(t, s.do(t, registerReq(teamReg("pod-2", "search_rank", "ann@example.com", start, "GPU-21"), admin)), 200, "")
		expect(t, s.do(t, registerReq(teamReg("pod-2", "nlp_x", "cho", start, "GPU-23"), admin)), 409, "")
		// Heartbeat: each.
		expect(t, s.do(t, post("/v1/task/heartbeat", fmt.Sprintf(`{"task_id":"pod-2","time":%d}`, start+120), admin)), 200, "")
		for _, tok := range []string{a, b} {
			if ls := taskOf(t, s, "/v1/tasks/pod-2", tok)["last_seen"]; ls != float64(start+120) {
				t.Errorf("the admin's heartbeat left last_seen %v for token %s", ls, tok)
			}
		}
		// Completion: the one whose start_time equals the completion's,
		// else 409.
		expect(t, s.do(t, post("/v1/task/complete", teamComplete("pod-2", start+30, 0), admin)), 409, "start_time")
		expect(t, s.do(t, post("/v1/task/complete", `{"task_id":"pod-2","end_time":1794703600,"duration_seconds":3600,"exit_code":0}`, admin)), 409, "start_time")
		expectStatus(t, s.do(t, post("/v1/task/complete", teamComplete("pod-2", start+60, 3), admin)), "completed")
		if tb := taskOf(t, s, "/v1/tasks/pod-2", b); tb["state"] != "failed" {
			t.Errorf("the admin's completion did not reach B's task: %v", tb)
		}
		if ta := taskOf(t, s, "/v1/tasks/pod-2", a); ta["state"] != "running" {
			t.Errorf("the admin's completion reached A's task too: %v", ta)
		}
		// The list shows both, each once.
		n := 0
		for _, task := range taskOf(t, s, "/v1/tasks?limit=1000", admin)["tasks"].([]any) {
			if task.(map[string]any)["task_id"] == "pod-2" {
				n++
			}
		}
		if n != 2 {
			t.Errorf("the admin lists pod-2 %d times, want 2", n)
		}
		// Pages of one walk the tasks sharing an id and a start_time
		// without losing one.
		expect(t, s.do(t, registerReq(teamReg("pod-3", "search_rank", "ann@example.com", start-1, "GPU-31"), a)), 201, "")
		expect(t, s.do(t, registerReq(teamReg("pod-3", "ads_ctr", "bob", start-1, "GPU-32"), b)), 201, "")
		var seen []string
		path := "/v1/tasks?limit=1&to=2026-11-14T23:46:40Z" // before start: pod-3 only
		for range 5 {
			m := taskOf(t, s, path, admin)
			for _, task := range m["tasks"].([]any) {
				seen = append(seen, task.(map[string]any)["project"].(string))
			}
			next, _ := m["next_cursor"].(string)
			if next == "" {
				break
			}
			path = "/v1/tasks?limit=1&to=2026-11-14T23:46:40Z&cursor=" + next
		}
		if len(seen) != 2 || seen[0] == seen[1] {
			t.Errorf("pages over two tasks under one id and start: %v", seen)
		}
	})
}

// TestOneScopeWithoutTokens: with no tokens file everything is one scope,
// so the registration's rules are unchanged: another project under a
// stored id is
// 409, a completion applies to the one task.
func TestOneScopeWithoutTokens(t *testing.T) {
	s := startServer(t, storetest.SQLiteDSN(t))
	const start = int64(1794700000)
	expect(t, s.do(t, registerReq(teamReg("one", "search_rank", "ann", start, "GPU-1"), "")), 201, "")
	expect(t, s.do(t, registerReq(teamReg("one", "ads_ctr", "bob", start, "GPU-2"), "")), 409, "different body")
	expectStatus(t, s.do(t, post("/v1/task/complete", teamComplete("one", start, 0), "")), "completed")
	task := taskOf(t, s, "/v1/tasks/one", "")
	if task["project"] != "search_rank" || task["state"] != "completed" || task["same_task_id"] != nil {
		t.Errorf("task one: %v", task)
	}
	b, _ := json.Marshal(task["gpus"])
	if !strings.Contains(string(b), "GPU-1") || strings.Contains(string(b), "GPU-2") {
		t.Errorf("GPUs of task one: %s", b)
	}
}

// TestCSVNeutralised: GPU model names are free text from NVML; in the
// report's CSV a cell that would start a spreadsheet formula (=, +, -, @)
// gets a leading ', the figures stay numbers, and JSON keeps the original.
func TestCSVNeutralised(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := startServer(t, dsn)
		const start = int64(1794700000) // 2026-11-14
		models := []string{"=cmd|' /C calc'!A0", "@SUM(1+1)", "-1+1", "+1", "NVIDIA H100 80GB HBM3"}
		for i, m := range models {
			id := fmt.Sprintf("csv-%d", i)
			body := fmt.Sprintf(`{"schema_version":1,"task_id":%q,"task_name":"train","project":"search_rank","owner":"ann","start_time":%d,
				"hostname":"node-1","labels":{},"gpu_count":1,"gpus":[{"index":0,"uuid":"GPU-%s","name":%q,"memory_total_bytes":1,"share":1}]}`,
				id, start, id, m)
			expect(t, s.do(t, registerReq(body, "")), 201, "")
			expectStatus(t, s.do(t, post("/v1/task/complete", teamComplete(id, start, 0), "")), "completed")
		}
		q := "/v1/report?from=2026-11-01&to=2026-12-01&by=model"
		a := s.do(t, get(q+"&format=csv", ""))
		if a.Status != 200 {
			t.Fatalf("CSV: %d %s", a.Status, a.Body)
		}
		rows, err := csv.NewReader(strings.NewReader(string(a.Body))).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string][]string{}
		for _, r := range rows[1:] {
			got[r[0]] = r
		}
		for _, m := range models {
			want := m
			if strings.ContainsRune("=+-@", rune(m[0])) {
				want = "'" + m
			}
			r, ok := got[want]
			if !ok {
				t.Errorf("the CSV has no cell %q:\n%s", want, a.Body)
				continue
			}
			// gpu_hours: one hour, a number.
			if i := slices.Index(rows[0], "gpu_hours"); i < 0 || r[i] != "1" {
				t.Errorf("row %q: gpu_hours %q, want the number 1 (header %v)", want, r[i], rows[0])
			}
		}
		// JSON shows the original text.
		var rep struct {
			Rows []struct {
				Key map[string]string `json:"key"`
			} `json:"rows"`
		}
		if err := json.Unmarshal(s.do(t, get(q, "")).Body, &rep); err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, r := range rep.Rows {
			keys = append(keys, r.Key["model"])
		}
		for _, m := range models {
			if !slices.Contains(keys, m) {
				t.Errorf("JSON lacks model %q: %v", m, keys)
			}
		}
	})
}

// TestCursorTellsNothingElse: a page's next_cursor holds only what its last
// row shows the reader (start_time, task_id, project, owner), never a
// storage key whose sequence would count other teams' registrations.
func TestCursorTellsNothingElse(t *testing.T) {
	s := startServer(t, storetest.SQLiteDSN(t), "--tokens", teamTokens(t))
	const start = int64(1794700000)
	expect(t, s.do(t, registerReq(teamReg("a-1", "search_rank", "ann@example.com", start, "GPU-c1"), "s-secret")), 201, "")
	for i := range 20 {
		expect(t, s.do(t, registerReq(teamReg(fmt.Sprintf("b-%d", i), "ads_ctr", "bob", start, fmt.Sprintf("GPU-cb%d", i)), "ads-secret")), 201, "")
	}
	expect(t, s.do(t, registerReq(teamReg("a-2", "search_rank", "ann@example.com", start+1, "GPU-c2"), "s-secret")), 201, "")
	m := taskOf(t, s, "/v1/tasks?limit=1", "s-secret")
	next, _ := m["next_cursor"].(string)
	raw, err := base64.RawURLEncoding.DecodeString(next)
	if err != nil {
		t.Fatalf("next_cursor %q: %v", next, err)
	}
	if want := fmt.Sprintf(`[%d,"a-2","search_rank","ann@example.com"]`, start+1); string(raw) != want {
		t.Errorf("next_cursor holds %s, want %s", raw, want)
	}
	m = taskOf(t, s, "/v1/tasks?limit=1&cursor="+next, "s-secret")
	if got := m["tasks"].([]any)[0].(map[string]any)["task_id"]; got != "a-1" || m["next_cursor"] != nil {
		t.Errorf("the second page: %v", m)
	}
}
