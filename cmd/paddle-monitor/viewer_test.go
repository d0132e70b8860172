package main

// Black-box tests of read-only logins and of who closed a month and why
// (docs/monitor.md, "Teams sharing one monitor" and "Operating it for a
// year"), on both stores.

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// viewerTokens is tokensFile with two viewers: "fin" (v-secret) reads
// every project, "ads-view" (av-secret) reads ads_*.
func viewerTokens(t *testing.T) string {
	t.Helper()
	return tokensFile(t, t.TempDir(),
		`{"name":"fin","sha256":"`+hashHex("v-secret")+`","role":"viewer"}`,
		`{"name":"ads-view","sha256":"`+hashHex("av-secret")+`","role":"viewer","projects":["ads_*"]}`)
}

func basicAuth(secret string) map[string]string {
	return map[string]string{"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte("finance:"+secret))}
}

func TestViewerTokenCommand(t *testing.T) {
	r := runMonitor(t, "token", "fin", "--role", "viewer")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || len(lines) != 2 || !strings.HasPrefix(lines[0], "pdm_") {
		t.Fatalf("token --role viewer: exit %d %q %s", r.code, r.stdout, r.stderr)
	}
	var entry map[string]any
	if err := json.Unmarshal([]byte(lines[1]), &entry); err != nil || entry["role"] != "viewer" || entry["projects"] != nil || entry["admin"] != nil {
		t.Errorf("entry %s (%v)", lines[1], err)
	}
	r = runMonitor(t, "token", "ads", "--role", "viewer", "--project", "ads_*", "--owner", "*@example.com")
	if r.code != 0 || !strings.Contains(r.stdout, `"projects":["ads_*"],"owners":["*@example.com"],"role":"viewer"`) {
		t.Errorf("scoped viewer: exit %d %s %s", r.code, r.stdout, r.stderr)
	}
	for _, bad := range [][]string{
		{"token", "x", "--role", "viewer", "--admin"},
		{"token", "x", "--role", "viewer", "--node", "gpu-*"},
		{"token", "x", "--role", "boss"},
		{"token", "x", "--role", "viewer", "--project", "[oops"},
	} {
		if r := runMonitor(t, bad...); r.code != 2 {
			t.Errorf("%q: exit %d, want 2: %s", bad, r.code, r.stderr)
		}
	}
	// A tokens file with a role the monitor does not know does not load.
	dir := t.TempDir()
	path := tokensFile(t, dir, `{"name":"x","sha256":"`+hashHex("x")+`","role":"root"}`)
	if r := runMonitor(t, "serve", "--db", storetest.SQLiteDSN(t), "--tokens", path); r.code == 0 || !strings.Contains(r.stderr, `role "root"`) {
		t.Errorf("serve with role root: exit %d %s", r.code, r.stderr)
	}
}

func TestViewerReadsAndNeverWrites(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := startServer(t, dsn, "--tokens", viewerTokens(t), "--metrics-auth")
		start := time.Date(2025, 11, 10, 8, 0, 0, 0, time.UTC).Unix()
		expect(t, s.do(t, registerReq(regBody("s-1", "search_ranking", "ann@example.com", start), "s-secret")), 201, "")
		expect(t, s.do(t, post("/v1/task/complete", completeBody("s-1", 0, start+3600), "s-secret")), 200, "")

		// Every write of a viewer is 403, before its body is read.
		for _, v := range []string{"v-secret", "av-secret"} {
			for _, r := range []request{
				registerReq(regBody("v-1", "search_ranking", "ann@example.com", start), v),
				post("/v1/task/complete", completeBody("s-1", 0, start+3600), v),
				post("/v1/task/heartbeat", `{"task_id":"s-1"}`, v),
				post("/v1/nodes/report", `{}`, v),
				post("/v1/statements/2025-11/close", "", v),
				post("/v1/statements/2025-11/reopen", `{"reason":"x"}`, v),
			} {
				expect(t, s.do(t, r), 403, "viewer (read-only)")
			}
		}
		// Before its body: headers alone get the answer.
		for _, path := range []string{"/v1/task/register", "/v1/task/complete", "/v1/task/heartbeat", "/v1/nodes/report",
			"/v1/statements/2025-11/close", "/v1/statements/2025-11/reopen"} {
			if got := rawHeadersOnly(t, s.URL, path, "v-secret"); !strings.HasPrefix(got, "HTTP/1.1 403") {
				t.Errorf("a viewer's %s without its body: %q", path, got)
			}
		}

		// Reads: fin sees every project, ads-view none of search's.
		tasks := func(token string) int {
			return len(s.do(t, get("/v1/tasks", token)).JSON(t)["tasks"].([]any))
		}
		if tasks("v-secret") != 1 || tasks("av-secret") != 0 {
			t.Errorf("tasks: fin %d, ads-view %d; want 1, 0", tasks("v-secret"), tasks("av-secret"))
		}
		rep := s.do(t, get("/v1/report?month=2025-11", "v-secret")).JSON(t)
		if rep["total"].(map[string]any)["gpu_hours"] != 1.0 {
			t.Errorf("fin's report: %v", rep["total"])
		}
		// The page and its CSV link in a browser: the token as the
		// password of HTTP Basic authentication.
		page := s.do(t, request{Method: "GET", Path: "/?month=2025-11", Header: basicAuth("v-secret"), NoSpecCheck: true})
		if page.Status != 200 || !strings.Contains(string(page.Body), "search_ranking") {
			t.Errorf("the page with a viewer: %d", page.Status)
		}
		csvA := s.do(t, request{Method: "GET", Path: "/v1/report?month=2025-11&format=csv", Header: basicAuth("v-secret")})
		if csvA.Status != 200 || !strings.Contains(string(csvA.Body), "search_ranking") {
			t.Errorf("the CSV link with a viewer: %d %s", csvA.Status, csvA.Body)
		}
		// /metrics with --metrics-auth: a viewer of every project only.
		if a := s.do(t, get("/metrics", "v-secret")); a.Status != 200 {
			t.Errorf("/metrics with fin: %d", a.Status)
		}
		expect(t, s.do(t, get("/metrics", "av-secret")), 403, "viewer of every project")
		// The statements: read by fin, not by a scoped viewer.
		expect(t, s.do(t, get("/v1/statements", "v-secret")), 200, "")
		expect(t, s.do(t, get("/v1/statements", "av-secret")), 403, "")
		expect(t, s.do(t, get("/v1/statements", "s-secret")), 403, "")
	})
}

// rawHeadersOnly sends a write's headers with a Content-Length and no
// body, and returns the first line of the answer: a server that waited for
// the body would time out.
func rawHeadersOnly(t *testing.T, base, path, token string) string {
	t.Helper()
	u, _ := url.Parse(base)
	c, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n", path, token)
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatalf("no answer before the body: %v", err)
	}
	return strings.TrimSpace(line)
}

func TestCloseRecordsWhoAndWhy(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		tokens := viewerTokens(t)
		s := startServer(t, dsn, "--tokens", tokens)
		start := time.Date(2025, 10, 10, 8, 0, 0, 0, time.UTC).Unix()
		expect(t, s.do(t, registerReq(regBody("s-1", "search_ranking", "ann@example.com", start), "s-secret")), 201, "")

		// API: the admin token's name is who; the body's reason why.
		a := s.do(t, post("/v1/statements/2025-10/close", `{"reason":"October billed"}`, "a-secret"))
		if a.Status != 201 || a.JSON(t)["closed_by"] != "finance" || a.JSON(t)["close_reason"] != "October billed" {
			t.Fatalf("close: %d %s", a.Status, a.Body)
		}
		expect(t, s.do(t, post("/v1/statements/2025-10/close", `{"why":"x"}`, "a-secret")), 400, "reason")
		expect(t, s.do(t, post("/v1/statements/2025-10/reopen", "", "a-secret")), 400, "reason: required")
		expect(t, s.do(t, post("/v1/statements/2025-10/reopen", `{"reason":"  "}`, "a-secret")), 400, "reason: required")
		expect(t, s.do(t, post("/v1/statements/2025-09/reopen", `{"reason":"x"}`, "a-secret")), 409, "not closed")
		a = s.do(t, post("/v1/statements/2025-10/reopen", `{"reason":"a late Slurm job"}`, "a-secret"))
		if a.Status != 200 || a.JSON(t)["reopened_by"] != "finance" || a.JSON(t)["reopen_reason"] != "a late Slurm job" || a.JSON(t)["in_force"] != false {
			t.Fatalf("reopen: %d %s", a.Status, a.Body)
		}
		list := s.do(t, get("/v1/statements", "v-secret")).JSON(t)["statements"].([]any)
		v1 := list[0].(map[string]any)
		if len(list) != 1 || v1["close_reason"] != "October billed" || v1["reopen_reason"] != "a late Slurm job" || v1["reopened_by"] != "finance" {
			t.Errorf("statements: %v", list)
		}
		stopServer(t, s)

		// CLI: --as is required; --reason too to reopen.
		for _, bad := range [][]string{
			{"close", "--db", dsn, "--month", "2025-10"},
			{"close", "--db", dsn, "--month", "2025-10", "--as", " "},
			{"close", "--db", dsn, "--month", "2025-10", "--as", "Ana", "--reopen"},
		} {
			if r := runMonitor(t, bad...); r.code != 2 || !strings.Contains(r.stderr, "required") {
				t.Errorf("%q: exit %d %s", bad, r.code, r.stderr)
			}
		}
		mustRun(t, "close", "--db", dsn, "--month", "2025-10", "--as", "Ana Finance", "--reason", "re-billed with the late job")
		out := mustRun(t, "statements", "--db", dsn)
		for _, want := range []string{
			`2025-10  version 1  closed `,
			` by finance (reason: "October billed")`,
			`reopened `, ` by finance (reason: "a late Slurm job")`,
			`2025-10  version 2  closed `, ` by Ana Finance (reason: "re-billed with the late job")`,
		} {
			if !strings.Contains(out, want) {
				t.Errorf("statements lacks %q:\n%s", want, out)
			}
		}
		js := mustRun(t, "statements", "--db", dsn, "--json")
		if !strings.Contains(js, `"closed_by":"Ana Finance","reopened_at":null,"reopened_by":"","close_reason":"re-billed with the late job","reopen_reason":""`) {
			t.Errorf("statements --json:\n%s", js)
		}
		// A reason cannot forge the list's fields.
		mustRun(t, "close", "--db", dsn, "--month", "2025-10", "--reopen", "--as", "Eve", "--reason", "x\"\n2025-10  version 9  in force")
		if out := mustRun(t, "statements", "--db", dsn); strings.Contains(out, "\n2025-10  version 9") {
			t.Errorf("a reason forged a line:\n%s", out)
		}
	})
}
