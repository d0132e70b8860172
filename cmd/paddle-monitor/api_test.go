package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/monitorproc"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// regBody is a registration as the entrypoint sends it.
func regBody(id, project, owner string, start int64) string {
	return fmt.Sprintf(`{"task_name":"resnet50","project":%q,"owner":%q,"gpu_count":1,"schema_version":1,"task_id":%q,
		"start_time":%d,"hostname":"node-1","priority":"high","env":"prod","duration_est":7200,
		"labels":{"cost_center":"cc-1024"},
		"gpus":[{"index":0,"uuid":"GPU-%s","name":"NVIDIA H100 80GB HBM3","memory_total_bytes":85520809984,"share":1}]}`,
		project, owner, id, start, id)
}

func registerReq(body, token string) request {
	id := ""
	var m map[string]any
	if json.Unmarshal([]byte(body), &m) == nil {
		id, _ = m["task_id"].(string)
	}
	if id == "" {
		id = "x"
	}
	return request{Method: "POST", Path: "/v1/task/register", Body: body, Token: token,
		Header: map[string]string{"Idempotency-Key": id, "User-Agent": "paddle-entrypoint/test"}}
}

// completeBody is a completion as the entrypoint sends it, of a run of an
// hour ending at end.
func completeBody(id string, exit int, end int64) string {
	return fmt.Sprintf(`{"schema_version":1,"task_id":%q,"start_time":%d,"end_time":%d,"duration_seconds":3600.5,
		"exit_code":%d,"gpu_count":1,"gpu_seconds":3600.5,
		"gpus":[{"uuid":"GPU-%s","samples":360,"util_mean":61.5,"util_p95":98,"memory_used_peak_bytes":1000,"idle_share":0.125}]}`,
		id, end-3600, end, exit, id)
}

func post(path, body, token string) request {
	return request{Method: "POST", Path: path, Body: body, Token: token}
}

func get(path, token string) request { return request{Method: "GET", Path: path, Token: token} }

func expect(t *testing.T, a answer, status int, errPart string) {
	t.Helper()
	if a.Status != status {
		t.Fatalf("status %d, want %d: %s", a.Status, status, a.Body)
	}
	if ct := a.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("Content-Type %q, want JSON", ct)
	}
	if errPart != "" && !strings.Contains(a.Error(t), errPart) {
		t.Fatalf("error %q does not say %q", a.Error(t), errPart)
	}
}

// TestAPILifecycle walks one task through every endpoint on both stores.
func TestAPILifecycle(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := startServer(t, dsn)
		body := regBody("job-1", "vision", "ann@example.com", 1794700000)
		a := s.do(t, registerReq(body, ""))
		expect(t, a, 201, "")
		if m := a.JSON(t); m["task_id"] != "job-1" || m["status"] != "created" {
			t.Fatalf("201 body %v", m)
		}
		// The same JSON value, keys reordered and spaced: 200.
		var v map[string]any
		json.Unmarshal([]byte(body), &v)
		again, _ := json.MarshalIndent(v, "", "   ")
		a = s.do(t, registerReq(string(again), ""))
		expect(t, a, 200, "")
		if a.JSON(t)["status"] != "exists" {
			t.Fatalf("200 body %s", a.Body)
		}
		// A different body under the same id: 409, the first kept.
		expect(t, s.do(t, registerReq(regBody("job-1", "other", "ann@example.com", 1794700000), "")), 409, "different body")

		// Heartbeats: forward only, capped at the server's clock + 5 min.
		expect(t, s.do(t, post("/v1/task/heartbeat", `{"task_id":"job-1","time":1794700100}`, "")), 200, "")
		expect(t, s.do(t, post("/v1/task/heartbeat", `{"task_id":"job-1","time":1794700050}`, "")), 200, "")
		task := s.do(t, get("/v1/tasks/job-1", "")).JSON(t)
		if task["last_seen"] != 1794700100.0 || task["project"] != "vision" || task["state"] != "running" {
			t.Fatalf("task after heartbeats: %v", task)
		}
		before := time.Now().Unix()
		expect(t, s.do(t, post("/v1/task/heartbeat", `{"task_id":"job-1","time":99999999999}`, "")), 200, "")
		task = s.do(t, get("/v1/tasks/job-1", "")).JSON(t)
		if ls := int64(task["last_seen"].(float64)); ls < before+300 || ls > time.Now().Unix()+300 {
			t.Fatalf("a heartbeat from the far future set last_seen %d, want now+300 (%d)", ls, before+300)
		}
		expect(t, s.do(t, post("/v1/task/heartbeat", `{"task_id":"nope"}`, "")), 404, "no task nope")

		// Completion: 200, the same again 200, a different one 409.
		a = s.do(t, post("/v1/task/complete", completeBody("job-1", 0, 1794703600), ""))
		expect(t, a, 200, "")
		if a.JSON(t)["status"] != "completed" {
			t.Fatalf("complete: %s", a.Body)
		}
		expect(t, s.do(t, post("/v1/task/complete", completeBody("job-1", 0, 1794703600), "")), 200, "")
		expect(t, s.do(t, post("/v1/task/complete", completeBody("job-1", 137, 1794703600), "")), 409, "different completion")
		task = s.do(t, get("/v1/tasks/job-1", "")).JSON(t)
		c := task["completion"].(map[string]any)
		gpu := task["gpus"].([]any)[0].(map[string]any)
		eff := task["efficiency"].(map[string]any)
		if task["state"] != "completed" || c["exit_code"] != 0.0 || c["end_time"] != 1794703600.0 ||
			gpu["uuid"] != "GPU-job-1" || gpu["util_mean"] != 61.5 || gpu["name"] != "NVIDIA H100 80GB HBM3" ||
			eff["gpu_seconds"] != 3600.5 || eff["idle_share"] != 0.125 {
			t.Fatalf("completed task: %s", s.do(t, get("/v1/tasks/job-1", "")).Body)
		}

		// A completion before its registration: kept, joined later.
		a = s.do(t, post("/v1/task/complete", completeBody("job-2", 2, 1794709000), ""))
		expect(t, a, 200, "")
		if a.JSON(t)["status"] != "pending" {
			t.Fatalf("early completion: %s", a.Body)
		}
		expect(t, s.do(t, get("/v1/tasks/job-2", "")), 404, "no task job-2")
		expect(t, s.do(t, registerReq(regBody("job-2", "vision", "bob@example.com", 1794705000), "")), 201, "")
		task = s.do(t, get("/v1/tasks/job-2", "")).JSON(t)
		if task["state"] != "failed" {
			t.Fatalf("the early completion was not joined: %v", task)
		}

		expect(t, s.do(t, get("/healthz", "")), 200, "")
	})
}

// TestListTasks: filters, newest first, pages that cover every task once.
func TestListTasks(t *testing.T) {
	s := startServer(t, storetest.SQLiteDSN(t))
	for i := range 12 {
		project := []string{"search", "vision"}[i%2]
		body := regBody(fmt.Sprintf("t%02d", i), project, "ann", int64(1794700000+i*3600))
		expect(t, s.do(t, registerReq(body, "")), 201, "")
	}
	expect(t, s.do(t, post("/v1/task/complete", completeBody("t00", 0, 1794703600), "")), 200, "")
	expect(t, s.do(t, post("/v1/task/complete", completeBody("t01", 1, 1794707200), "")), 200, "")

	var ids []string
	path := "/v1/tasks?limit=5"
	for pages := 0; ; pages++ {
		a := s.do(t, get(path, ""))
		expect(t, a, 200, "")
		m := a.JSON(t)
		for _, task := range m["tasks"].([]any) {
			ids = append(ids, task.(map[string]any)["task_id"].(string))
		}
		next, _ := m["next_cursor"].(string)
		if next == "" {
			break
		}
		path = "/v1/tasks?limit=5&cursor=" + next
	}
	if strings.Join(ids, ",") != "t11,t10,t09,t08,t07,t06,t05,t04,t03,t02,t01,t00" {
		t.Fatalf("pages gave %v", ids)
	}
	for _, tc := range []struct {
		query string
		want  string
	}{
		{"project=search", "t10,t08,t06,t04,t02,t00"},
		{"state=completed", "t00"},
		{"state=failed", "t01"},
		{"state=running&project=vision", "t11,t09,t07,t05,t03"},
		{"to=2000-01-01", ""},
		{"from=" + time.Unix(1794700000+3600, 0).UTC().Format(time.RFC3339) + "&to=" + time.Unix(1794700000+3*3600, 0).UTC().Format(time.RFC3339), "t02,t01"},
		{"owner=bob", ""},
		{"pipeline=none", ""},
	} {
		m := s.do(t, get("/v1/tasks?"+tc.query, "")).JSON(t)
		var got []string
		for _, task := range m["tasks"].([]any) {
			got = append(got, task.(map[string]any)["task_id"].(string))
		}
		if strings.Join(got, ",") != tc.want {
			t.Errorf("?%s gave %v, want %s", tc.query, got, tc.want)
		}
	}
}

// TestBadInput: each refusal, with a JSON error naming the field.
func TestBadInput(t *testing.T) {
	s := startServer(t, storetest.SQLiteDSN(t))
	good := regBody("ok-1", "p", "o", 1794700000)
	without := func(key string) string {
		var m map[string]any
		json.Unmarshal([]byte(good), &m)
		delete(m, key)
		b, _ := json.Marshal(m)
		return string(b)
	}
	with := func(key string, v any) string {
		var m map[string]any
		json.Unmarshal([]byte(good), &m)
		m[key] = v
		b, _ := json.Marshal(m)
		return string(b)
	}
	for _, tc := range []struct {
		name    string
		r       request
		status  int
		errPart string
	}{
		{"not JSON", registerReq(`{"task_id":`, ""), 400, "not a JSON object"},
		{"JSON array", registerReq(`[1,2]`, ""), 400, "not a JSON object"},
		{"no task_id", registerReq(without("task_id"), ""), 400, "field task_id: is required"},
		{"no task_name", registerReq(without("task_name"), ""), 400, "field task_name: is required"},
		{"no project", registerReq(without("project"), ""), 400, "field project: is required"},
		{"no owner", registerReq(without("owner"), ""), 400, "field owner: is required"},
		{"no start_time", registerReq(without("start_time"), ""), 400, "field start_time: is required"},
		{"project with a space", registerReq(with("project", "a b"), ""), 400, "field project: must follow the name rule"},
		{"project forging JSON", registerReq(with("project", `x","admin":"1`), ""), 400, "field project"},
		{"owner with a newline", registerReq(with("owner", "ann\nproject=admin"), ""), 400, "field owner"},
		{"project 64 characters", registerReq(with("project", strings.Repeat("a", 64)), ""), 400, "field project"},
		{"task_name a number", registerReq(with("task_name", 5), ""), 400, "field task_name: must be a string"},
		{"start_time a string", registerReq(with("start_time", "now"), ""), 400, "field start_time: must be an integer"},
		{"start_time a fraction", registerReq(with("start_time", 1.5), ""), 400, "field start_time: must be an integer"},
		{"duration_est 0", registerReq(with("duration_est", 0), ""), 400, "field duration_est: must be between 1 and 31536000"},
		{"label value", registerReq(with("labels", map[string]any{"team": "a;b"}), ""), 400, "field labels.team"},
		{"label key", registerReq(with("labels", map[string]any{"bad key": "a"}), ""), 400, `field labels: key "bad key"`},
		{"gpus not a list", registerReq(with("gpus", "GPU-1"), ""), 400, "field gpus: must be a list of objects"},
		{"gpu uuid control", registerReq(with("gpus", []any{map[string]any{"index": 0, "uuid": "GPU\x01", "name": "x", "memory_total_bytes": 1}}), ""), 400, "field gpus[0].uuid"},
		{"hostname bad", registerReq(with("hostname", "a b"), ""), 400, "field hostname"},
		{"complete no end_time", post("/v1/task/complete", `{"task_id":"x","duration_seconds":1,"exit_code":0}`, ""), 400, "field end_time: is required"},
		{"complete no duration", post("/v1/task/complete", `{"task_id":"x","end_time":1,"exit_code":0}`, ""), 400, "field duration_seconds: is required"},
		{"complete no exit_code", post("/v1/task/complete", `{"task_id":"x","end_time":1,"duration_seconds":1}`, ""), 400, "field exit_code: is required"},
		{"complete no task_id", post("/v1/task/complete", `{"end_time":1,"duration_seconds":1,"exit_code":0}`, ""), 400, "field task_id: is required"},
		{"complete idle_share 2", post("/v1/task/complete", `{"task_id":"x","end_time":1,"duration_seconds":1,"exit_code":0,"gpus":[{"uuid":"u","samples":1,"idle_share":2}]}`, ""), 400, "field gpus[0].idle_share"},
		{"complete gate", post("/v1/task/complete", `{"task_id":"x","end_time":1,"duration_seconds":1,"exit_code":0,"gate":{"expr":"a>1"}}`, ""), 400, "field gate.passed"},
		{"heartbeat no task_id", post("/v1/task/heartbeat", `{"time":5}`, ""), 400, "field task_id: is required"},
		{"heartbeat time string", post("/v1/task/heartbeat", `{"task_id":"a","time":"5"}`, ""), 400, "field time: must be an integer"},
		{"list state", get("/v1/tasks?state=done", ""), 400, "parameter state"},
		{"list limit", get("/v1/tasks?limit=0", ""), 400, "parameter limit"},
		{"list from", get("/v1/tasks?from=yesterday", ""), 400, "parameter from"},
		{"list cursor", get("/v1/tasks?cursor=zzz", ""), 400, "parameter cursor"},
		{"list project", get("/v1/tasks?project=a%20b", ""), 400, "parameter project"},
		{"unknown path", request{Method: "GET", Path: "/v2/nothing", NoSpecCheck: true}, 404, "no such path"},
		{"wrong method", request{Method: "GET", Path: "/v1/task/register", NoSpecCheck: true}, 405, "method GET not allowed"},
		{"wrong method on tasks", request{Method: "DELETE", Path: "/v1/tasks/ok-1", NoSpecCheck: true}, 405, "not allowed"},
		{"over 1 MiB", registerReq(`{"pad":"`+strings.Repeat("a", 1<<20)+`"}`, ""), 413, "over 1 MiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			expect(t, s.do(t, tc.r), tc.status, tc.errPart)
		})
	}
	// A 405 says what is allowed.
	a := s.do(t, request{Method: "PUT", Path: "/v1/task/complete", NoSpecCheck: true})
	if a.Header.Get("Allow") != "POST" {
		t.Errorf("Allow %q, want POST", a.Header.Get("Allow"))
	}
	// A newer schema_version and unknown fields are accepted.
	newer := with("schema_version", 7)
	newer = strings.Replace(newer, `{`, `{"from_the_future":{"x":[1,2]},`, 1)
	expect(t, s.do(t, registerReq(newer, "")), 201, "")
	// Nothing refused was stored.
	m := s.do(t, get("/v1/tasks", "")).JSON(t)
	if n := len(m["tasks"].([]any)); n != 1 {
		t.Fatalf("%d tasks stored, want 1: %v", n, m)
	}
}

func hashHex(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// tokensFile writes a tokens file with a scoped token "search" (secret
// s-secret), an admin token "finance" (a-secret), and returns its path.
func tokensFile(t *testing.T, dir string, extra ...string) string {
	t.Helper()
	entries := []string{
		`{"name":"search","sha256":"` + hashHex("s-secret") + `","projects":["search_*"],"owners":["*@example.com"]}`,
		`{"name":"finance","sha256":"` + hashHex("a-secret") + `","admin":true}`,
	}
	path := filepath.Join(dir, "tokens.json")
	writeFile(t, path, `{"tokens":[`+strings.Join(append(entries, extra...), ",")+`]}`)
	return path
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestTokens: 401, 403, the order of checks, scoped reads, admin, Basic.
func TestTokens(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		dir := t.TempDir()
		s := startServer(t, dsn, "--tokens", tokensFile(t, dir))
		in := regBody("s-1", "search_ranking", "ann@example.com", 1794700000)
		out := regBody("v-1", "vision", "ann@example.com", 1794700000)

		a := s.do(t, registerReq(in, ""))
		expect(t, a, 401, "token is required")
		if got := a.Header.Values("WWW-Authenticate"); len(got) != 2 || !strings.HasPrefix(got[0], `Basic realm="paddle-monitor"`) {
			t.Errorf("WWW-Authenticate %q", got)
		}
		expect(t, s.do(t, registerReq(in, "wrong")), 401, "not valid")
		expect(t, s.do(t, registerReq(in, "s-secret")), 201, "")
		expect(t, s.do(t, registerReq(out, "s-secret")), 403, "may not register tasks of project vision with owner ann@example.com")
		expect(t, s.do(t, registerReq(regBody("s-2", "search_x", "ann@evil.com", 1), "s-secret")), 403, "owner")
		expect(t, s.do(t, registerReq(out, "a-secret")), 201, "")
		// Order: 413 before 401, 401 before 400, 400 before 403, 403 before 409.
		expect(t, s.do(t, registerReq(`{"x":"`+strings.Repeat("a", 1<<20)+`"}`, "")), 413, "")
		expect(t, s.do(t, registerReq(`not json`, "")), 401, "")
		expect(t, s.do(t, registerReq(`not json`, "s-secret")), 400, "")
		forged := regBody("v-1", "vision", "mallory@example.com", 1) // v-1 exists: 403, never 409
		expect(t, s.do(t, registerReq(forged, "s-secret")), 403, "")
		// Writes of tasks outside the token's scope answer as for an
		// unused task_id (docs/monitor.md, Teams sharing one monitor): a
		// completion waits (200
		// pending), a heartbeat is 404.
		a = s.do(t, post("/v1/task/complete", completeBody("v-1", 0, 1794703600), "s-secret"))
		expect(t, a, 200, "")
		if a.JSON(t)["status"] != "pending" {
			t.Fatalf("completion of a task outside the scope: %s, want pending", a.Body)
		}
		expect(t, s.do(t, post("/v1/task/heartbeat", `{"task_id":"v-1"}`, "s-secret")), 404, "")
		expect(t, s.do(t, post("/v1/task/heartbeat", `{"task_id":"s-1"}`, "s-secret")), 200, "")
		expect(t, s.do(t, post("/v1/task/heartbeat", `{"task_id":"s-1"}`, "")), 401, "")

		// Reads: a token is needed, and sees its own tasks only.
		expect(t, s.do(t, get("/v1/tasks", "")), 401, "")
		expect(t, s.do(t, get("/v1/tasks/s-1", "")), 401, "")
		ids := func(token string) string {
			var got []string
			for _, task := range s.do(t, get("/v1/tasks", token)).JSON(t)["tasks"].([]any) {
				got = append(got, task.(map[string]any)["task_id"].(string))
			}
			return strings.Join(got, ",")
		}
		if got := ids("s-secret"); got != "s-1" {
			t.Errorf("the scoped token lists %q, want s-1", got)
		}
		if got := ids("a-secret"); got != "v-1,s-1" && got != "s-1,v-1" {
			t.Errorf("the admin token lists %q, want both", got)
		}
		expect(t, s.do(t, get("/v1/tasks/v-1", "s-secret")), 404, "")
		expect(t, s.do(t, get("/v1/tasks/v-1", "a-secret")), 200, "")
		// HTTP Basic: the token as the password, any user name.
		basic := request{Method: "GET", Path: "/v1/tasks/s-1", Header: map[string]string{
			"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte("anyone:s-secret"))}}
		expect(t, s.do(t, basic), 200, "")
		// No token needed for health and metrics.
		expect(t, s.do(t, get("/healthz", "")), 200, "")
		if a := s.do(t, get("/metrics", "")); a.Status != 200 {
			t.Fatalf("/metrics without --metrics-auth: %d", a.Status)
		}
	})
}

// TestTokensReloadAndMetricsAuth: SIGHUP re-reads the file (a broken file
// keeps the old tokens); --metrics-auth needs an admin token.
func TestTokensReloadAndMetricsAuth(t *testing.T) {
	dir := t.TempDir()
	path := tokensFile(t, dir)
	s := startServer(t, storetest.SQLiteDSN(t), "--tokens", path, "--metrics-auth")
	body := regBody("r-1", "search_a", "ann@example.com", 1794700000)
	expect(t, s.do(t, registerReq(body, "new-secret")), 401, "")

	// The search token is replaced by a new one.
	writeFile(t, path, `{"tokens":[{"name":"new","sha256":"`+hashHex("new-secret")+`","projects":["*"]}]}`)
	s.Signal(syscall.SIGHUP)
	s.waitLog(t, `"msg":"tokens reloaded"`)
	expect(t, s.do(t, registerReq(body, "new-secret")), 201, "")
	expect(t, s.do(t, get("/v1/tasks", "s-secret")), 401, "")

	// A broken file: the previous tokens stay in force.
	writeFile(t, path, `{"tokens":[{"name":"x"`)
	s.Signal(syscall.SIGHUP)
	s.waitLog(t, "the previous tokens stay in force")
	expect(t, s.do(t, get("/v1/tasks/r-1", "new-secret")), 200, "")

	// /metrics: 401 without a token, 403 with a non-admin one.
	expect(t, s.do(t, get("/metrics", "")), 401, "")
	expect(t, s.do(t, get("/metrics", "new-secret")), 403, "admin")
	writeFile(t, path, `{"tokens":[{"name":"adm","sha256":"`+hashHex("adm")+`","admin":true}]}`)
	s.Signal(syscall.SIGHUP)
	s.waitLog(t, `"tokens":1`)
	deadline := time.Now().Add(10 * time.Second)
	for s.do(t, get("/metrics", "adm")).Status != 200 {
		if time.Now().After(deadline) {
			t.Fatal("the admin token never opened /metrics")
		}
		time.Sleep(20 * time.Millisecond)
	}
	m := string(s.do(t, get("/metrics", "adm")).Body)
	for _, want := range []string{
		`paddle_monitor_http_requests_total{code="201",endpoint="POST /v1/task/register"} 1`,
		`paddle_monitor_http_requests_total{code="401",endpoint="POST /v1/task/register"} 1`,
		"# HELP paddle_monitor_store_errors_total",
	} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, m)
		}
	}
}

// TestNoTokensWarning and a graceful SIGTERM: exit 0.
func TestNoTokensWarningAndSIGTERM(t *testing.T) {
	s := startServer(t, storetest.SQLiteDSN(t))
	if !strings.Contains(s.Log(), `"level":"WARN","msg":"no tokens file (--tokens): every write and read is open`) {
		t.Errorf("no warning about the missing tokens file:\n%s", s.Log())
	}
	s.Signal(syscall.SIGTERM)
	if code := s.wait(t); code != 0 {
		t.Fatalf("exit %d after SIGTERM, want 0:\n%s", code, s.Log())
	}
	if !strings.Contains(s.Log(), `"msg":"stopped"`) {
		t.Errorf("log: %s", s.Log())
	}
}

// TestTokenCommand: the minted token works against a server that loads the
// printed entry.
func TestTokenCommand(t *testing.T) {
	r := runMonitor(t, "token", "ci", "--project", "search_*", "--owner", "*@example.com")
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if r.code != 0 || len(lines) != 2 || !strings.HasPrefix(lines[0], "pdm_") {
		t.Fatalf("token: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var entry map[string]any
	if err := json.Unmarshal([]byte(lines[1]), &entry); err != nil || entry["sha256"] != hashHex(lines[0]) || entry["name"] != "ci" {
		t.Fatalf("entry %s", lines[1])
	}
	if strings.Contains(lines[1], lines[0]) {
		t.Fatal("the entry holds the token")
	}
	path := filepath.Join(t.TempDir(), "tokens.json")
	writeFile(t, path, `{"tokens":[`+lines[1]+`]}`)
	s := startServer(t, storetest.SQLiteDSN(t), "--tokens", path)
	expect(t, s.do(t, registerReq(regBody("m-1", "search_a", "ann@example.com", 1), lines[0])), 201, "")
	expect(t, s.do(t, registerReq(regBody("m-2", "admin", "ann@example.com", 1), lines[0])), 403, "")

	for _, args := range [][]string{{"token", "x"}, {"token", "x", "--admin", "--project", "p"}, {"token"}, {"frobnicate"}, {}} {
		if r := runMonitor(t, args...); r.code != 2 || r.stdout != "" {
			t.Errorf("%v: exit %d, stdout %q; want 2 and nothing", args, r.code, r.stdout)
		}
	}
	if r := runMonitor(t, "token", "fin", "--admin"); r.code != 0 || !strings.Contains(r.stdout, `"admin":true`) {
		t.Errorf("token --admin: %d %s %s", r.code, r.stdout, r.stderr)
	}
}

func TestVersionAndBadSettings(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		if r := runMonitor(t, args...); r.code != 0 || !strings.HasPrefix(r.stdout, "paddle-monitor version ") {
			t.Errorf("%v: %d %q", args, r.code, r.stdout)
		}
	}
	for _, args := range [][]string{{"--help"}, {"serve", "--help"}, {"token", "--help"}, {"report", "--help"}} {
		r := runMonitor(t, args...)
		if r.code != 0 || !strings.HasPrefix(r.stdout, "usage:") || r.stderr != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, r.code, r.stdout, r.stderr)
		}
	}
	if r := runMonitor(t, "serve", "--help"); !strings.Contains(r.stdout, "(env PADDLE_MONITOR_DB)") {
		t.Errorf("serve --help does not list the variables:\n%s", r.stdout)
	}
	if r := runMonitor(t, "serve", "--bogus"); r.code != 2 || !strings.Contains(r.stderr, "unknown flag: --bogus") {
		t.Errorf("serve --bogus: exit %d, stderr %q", r.code, r.stderr)
	}
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		env  string
		want string
	}{
		{[]string{"serve", "--tokens", filepath.Join(dir, "missing.json")}, "", "tokens file " + filepath.Join(dir, "missing.json") + ": no such file or directory"},
		{[]string{"serve", "--metrics-auth"}, "", "--metrics-auth needs --tokens"},
		{[]string{"serve"}, "PADDLE_MONITOR_OPEN_TTL=soon", `PADDLE_MONITOR_OPEN_TTL="soon"`},
		{[]string{"serve", "--log-format", "xml"}, "", "--log-format"},
		{[]string{"serve", "--db", "postgres://nobody@127.0.0.1:1/x?connect_timeout=2"}, "", "database unreachable"},
	} {
		r := runMonitorEnv(t, dir, []string{tc.env}, tc.args...)
		if r.code == 0 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v %s: exit %d, stderr %q; want it to say %q", tc.args, tc.env, r.code, r.stderr, tc.want)
		}
	}
	// The environment sets what the flag does not; the flag wins.
	s := startServerEnv(t, []string{"PADDLE_MONITOR_LOG=debug", "PADDLE_MONITOR_LISTEN=256.0.0.1:1"}, storetest.SQLiteDSN(t))
	if !strings.Contains(s.Log(), `"level":"DEBUG","msg":"settings"`) {
		t.Errorf("log: %s", s.Log())
	}
}

type ran struct {
	code           int
	stdout, stderr string
}

func runMonitor(t *testing.T, args ...string) ran {
	return runMonitorEnv(t, t.TempDir(), nil, args...)
}

func runMonitorEnv(t *testing.T, dir string, env []string, args ...string) ran {
	t.Helper()
	c := execCommand(bin.monitor, args...)
	c.Dir = dir
	c.Env = append([]string{"PATH=/usr/bin:/bin"}, env...)
	var out, errb strings.Builder
	c.Stdout, c.Stderr = &out, &errb
	c.Run()
	return ran{c.ProcessState.ExitCode(), out.String(), errb.String()}
}

// TestSIGTERMFinishesRequestsInFlight: a registration whose body is still
// arriving when SIGTERM comes is answered 201 and stored; then the server
// exits 0.
//
// "In flight" means the server has read the request's headers and its
// handler runs: net/http's Shutdown closes a connection whose request it
// has not read yet, and a connection's goroutine that reads the headers
// after Shutdown began drops them (the client sees EOF and retries). The
// test once sent SIGTERM as soon as its headers were written, so under load
// the server sometimes had not read them yet ("unexpected EOF"). The
// request now asks for 100 Continue, which the server sends when the
// handler first reads the body: SIGTERM comes only after that answer, so
// the handler is certainly running, and the body's rest only after the
// server said it is stopping.
func TestSIGTERMFinishesRequestsInFlight(t *testing.T) {
	db := storetest.SQLiteDSN(t)
	s := startServer(t, db)
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(60 * time.Second))
	body := regBody("inflight-1", "p", "o", 1794700000)
	fmt.Fprintf(conn, "POST /v1/task/register HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: %d\r\n\r\n%s",
		len(body), body[:10])
	answers := bufio.NewReader(conn)
	cont, err := http.ReadResponse(answers, nil)
	if err != nil || cont.StatusCode != http.StatusContinue {
		t.Fatalf("no 100 Continue before the body: %v %v\n%s", cont, err, s.Log())
	}
	s.Signal(syscall.SIGTERM)
	s.waitLog(t, `"msg":"stopping"`)
	if _, err := io.WriteString(conn, body[10:]); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(answers, nil)
	if err != nil {
		t.Fatalf("no answer to the request in flight: %v\n%s", err, s.Log())
	}
	resp.Body.Close()
	if resp.StatusCode != 201 {
		t.Fatalf("the request in flight got %d, want 201", resp.StatusCode)
	}
	if code := s.wait(t); code != 0 {
		t.Fatalf("exit %d, want 0", code)
	}
	again := startServer(t, db)
	expect(t, again.do(t, get("/v1/tasks/inflight-1", "")), 200, "")
}

// TestDatabaseURLFromFile: PADDLE_MONITOR_DB_FILE holds the database URL
// (a password need not sit in the environment); a missing file is an error
// naming the variable.
func TestDatabaseURLFromFile(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "from-file.db")
	secret := filepath.Join(dir, "db-url")
	writeFile(t, secret, db+"\n")
	p, err := monitorproc.Start(bin.monitor, []string{"--listen", "127.0.0.1:0", "--log-format", "json"},
		monitorproc.Options{Env: []string{"PADDLE_MONITOR_DB_FILE=" + secret}, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	s := &server{p}
	defer p.Kill()
	expect(t, s.do(t, registerReq(regBody("f-1", "p", "o", 1), "")), 201, "")
	p.Stop()
	if _, err := os.Stat(db); err != nil {
		t.Fatalf("the database named in the file was not used: %v", err)
	}
	r := runMonitorEnv(t, dir, []string{"PADDLE_MONITOR_DB_FILE=" + filepath.Join(dir, "nope")}, "serve")
	if r.code != 1 || !strings.Contains(r.stderr, "PADDLE_MONITOR_DB_FILE: open "+filepath.Join(dir, "nope")) {
		t.Errorf("missing file: exit %d, %q", r.code, r.stderr)
	}
}
