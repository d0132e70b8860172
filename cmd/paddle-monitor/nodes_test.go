package main

// Black-box tests of node tokens and POST /v1/nodes/report (docs/node.md,
// "The report" and "Identity and trust") on both stores.

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// nodeTokens is tokensFile with a node token "nodes" (secret n-secret) for
// gpu-node-1 (written in another case: node names compare in lower case).
func nodeTokens(t *testing.T) string {
	t.Helper()
	return tokensFile(t, t.TempDir(), `{"name":"nodes","sha256":"`+hashHex("n-secret")+`","nodes":["GPU-Node-1"]}`)
}

// nodeReportBody is a report of node ending at end over interval seconds:
// one whole GPU per uuid, each fully used by a pod "pod-<uuid>".
func nodeReportBody(node string, end, interval int64, uuids ...string) string {
	var ins []string
	for _, u := range uuids {
		ins = append(ins, fmt.Sprintf(`{"uuid":%q,"gpu_instance_id":null,"name":"NVIDIA H200","samples":6,"busy_share":1,
			"busy_basis":"utilization","occupied_share":1,"energy_joules":6000,
			"users":[{"runtime":"containerd","container_id":"c-%s","pod_uid":"pod-%s","namespace":"team-a","pod":"train-0",
			"container":"paddle","allocated_share":1,"seen_share":1,"busy_share":1,"sm_util_mean":80,"declared":null}]}`, u, u, u))
	}
	return fmt.Sprintf(`{"schema_version":1,"node":%q,"time":%d,"interval_seconds":%d,"agent_version":"test","samples":6,"final":false,
		"gpus":[],"instances":[%s]}`, node, end, interval, strings.Join(ins, ","))
}

func gzipped(t *testing.T, s string) string {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write([]byte(s))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestTokenNode: token --node mints an entry with only the node, in lower
// case; --node with --project, --owner or --admin, a glob or two nodes is
// a usage error (exit 2), and serve refuses a tokens file whose node
// token has a glob, naming the entry (NODE.md 11, 12.10).
func TestTokenNode(t *testing.T) {
	r := runMonitor(t, "token", "node-agent", "--node", "GPU-Node-7")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "pdm_") {
		t.Fatalf("stdout %q", r.stdout)
	}
	var entry map[string]any
	if err := json.Unmarshal([]byte(lines[1]), &entry); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(entry["nodes"]) != "[gpu-node-7]" || entry["admin"] != nil || entry["projects"] != nil || len(entry) != 3 {
		t.Fatalf("entry %s", lines[1])
	}
	for _, bad := range [][]string{{"--node", "gpu-node-*"}, {"--node", "a", "--node", "b"}} {
		r := runMonitor(t, append([]string{"token", "n"}, bad...)...)
		if r.code != 2 || !strings.Contains(r.stderr, "--node") {
			t.Errorf("token %v: exit %d, stderr %q", bad, r.code, r.stderr)
		}
	}
	glob := tokensFile(t, t.TempDir(), `{"name":"gpu-nodes","sha256":"`+hashHex("g")+`","nodes":["gpu-node-*"]}`)
	r = runMonitor(t, "serve", "--db", storetest.SQLiteDSN(t), "--tokens", glob, "--listen", "127.0.0.1:0")
	if r.code == 0 || !strings.Contains(r.stderr, `(gpu-nodes): nodes: "gpu-node-*" is a glob`) {
		t.Errorf("serve with a glob node token: exit %d, stderr %q", r.code, r.stderr)
	}
	for _, extra := range [][]string{{"--admin"}, {"--project", "p"}, {"--owner", "o"}} {
		r := runMonitor(t, append([]string{"token", "n", "--node", "gpu-1"}, extra...)...)
		if r.code != 2 || !strings.Contains(r.stderr, "--node does not combine with --project, --owner or --admin") {
			t.Errorf("token --node %v: exit %d, stderr %q", extra, r.code, r.stderr)
		}
	}
}

// TestNodeTokenForbiddenElsewhere: a node token is answered 403 by every
// other endpoint, before the body is read (a bad body is still 403) and
// before an unknown task_id could answer 404.
func TestNodeTokenForbiddenElsewhere(t *testing.T) {
	s := startServer(t, storetest.SQLiteDSN(t), "--tokens", nodeTokens(t))
	for _, r := range []request{
		post("/v1/task/register", `not json`, "n-secret"),
		post("/v1/task/complete", `{}`, "n-secret"),
		post("/v1/task/heartbeat", `{"schema_version":1,"task_id":"never-seen","time":1}`, "n-secret"),
		get("/v1/tasks", "n-secret"),
		get("/v1/tasks/never-seen", "n-secret"),
		get("/v1/report", "n-secret"),
	} {
		a := s.do(t, r)
		if a.Status != 403 || !strings.Contains(a.Error(t), "node token") {
			t.Errorf("%s %s: %d %s, want 403 naming the node token", r.Method, r.Path, a.Status, a.Body)
		}
	}
	// The page, too.
	if a := s.do(t, request{Method: "GET", Path: "/", Token: "n-secret", NoSpecCheck: true}); a.Status != 403 {
		t.Errorf("the page: %d", a.Status)
	}
}

// TestNodeReportEndpoint: the answers of POST /v1/nodes/report, as a node
// agent and a hostile team would see them, on both stores.
func TestNodeReportEndpoint(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := startServer(t, dsn, "--tokens", nodeTokens(t))
		// Two minutes back: a stored span clips a later report only up to
		// when it was received (NODE.md 12.2), so the reports that must
		// clip are all in the past. With end the current minute, a run in
		// its first second got "created" for the clipped report.
		end := time.Now().Unix()/60*60 - 120
		body := nodeReportBody("gpu-node-1", end, 60, "GPU-a", "GPU-b")

		expect(t, s.do(t, post("/v1/nodes/report", body, "")), 401, "token")
		expect(t, s.do(t, post("/v1/nodes/report", body, "s-secret")), 403, "team token")
		a := s.do(t, post("/v1/nodes/report", body, "n-secret"))
		expect(t, a, 201, "")
		if got := a.JSON(t); got["status"] != "created" || got["node"] != "gpu-node-1" || got["time"] != float64(end) {
			t.Fatalf("answer %s", a.Body)
		}
		expectStatus(t, s.do(t, post("/v1/nodes/report", body, "n-secret")), "exists")
		// A different body under the same node and time: the first is kept.
		expectStatus(t, s.do(t, post("/v1/nodes/report", nodeReportBody("gpu-node-1", end, 60, "GPU-a"), "n-secret")), "exists")
		s.waitLog(t, "a different body: the first is kept")
		// gzip, the next minute.
		next := request{Method: "POST", Path: "/v1/nodes/report", Body: gzipped(t, nodeReportBody("gpu-node-1", end+60, 60, "GPU-a", "GPU-b")),
			Token: "n-secret", Header: map[string]string{"Content-Encoding": "gzip"}, NoSpecCheck: true}
		expect(t, s.do(t, next), 201, "")
		// Overlapping the two stored: clipped to its last 30 s.
		expectStatus(t, s.do(t, post("/v1/nodes/report", nodeReportBody("gpu-node-1", end+90, 90, "GPU-a", "GPU-b"), "n-secret")), "clipped")
		// Another node than the token's (compared in lower case above).
		expect(t, s.do(t, post("/v1/nodes/report", nodeReportBody("gpu-node-2", end, 60, "GPU-z"), "n-secret")), 403, "node gpu-node-2")
		// Bad bodies name the field.
		for field, b := range map[string]string{
			"interval_seconds":                      strings.Replace(body, `"interval_seconds":60`, `"interval_seconds":0`, 1),
			"time":                                  strings.Replace(body, fmt.Sprintf(`"time":%d`, end), `"time":1.5`, 1),
			"instances[0].users[0].allocated_share": strings.Replace(body, `"allocated_share":1`, `"allocated_share":2`, 1),
			"node":                                  strings.Replace(body, `"gpu-node-1"`, `"gpu_node_1"`, 1),
			"schema_version":                        strings.Replace(body, `"schema_version":1`, `"schema_version":2`, 1),
		} {
			a := s.do(t, request{Method: "POST", Path: "/v1/nodes/report", Body: b, Token: "n-secret", NoSpecCheck: true})
			expect(t, a, 400, field)
		}
		// Over 256 KiB: from the Content-Length, and decoded from gzip.
		big := strings.Replace(body, `"agent_version":"test"`, `"agent_version":"`+strings.Repeat("x", 300<<10)+`"`, 1)
		expect(t, s.do(t, request{Method: "POST", Path: "/v1/nodes/report", Body: big, Token: "n-secret", NoSpecCheck: true}), 413, "256 KiB")
		expect(t, s.do(t, request{Method: "POST", Path: "/v1/nodes/report", Body: gzipped(t, big), Token: "n-secret",
			Header: map[string]string{"Content-Encoding": "gzip"}, NoSpecCheck: true}), 413, "256 KiB")
		// GPU-a moved to gpu-node-2 without a retire: stored, 409 naming
		// it every time, logged (NODE.md 12.3).
		moved := nodeReportBody("gpu-node-2", end+120, 60, "GPU-a")
		for range 2 {
			a := s.do(t, post("/v1/nodes/report", moved, "a-secret"))
			if a.Status != 409 || string(a.Body) != fmt.Sprintf(`{"node":"gpu-node-2","time":%d,"status":"stored","conflicts":[{"uuid":"GPU-a","held_by":"gpu-node-1"}]}`+"\n", end+120) {
				t.Fatalf("a GPU another node holds: %d %s", a.Status, a.Body)
			}
		}
		s.waitLog(t, "held_by")
		r := runMonitor(t, "node", "retire", "gpu-node-1", "--db", dsn)
		if r.code != 0 || r.stdout != "node gpu-node-1 retired: 2 GPUs no longer count\n" {
			t.Fatalf("node retire: exit %d, %q %q", r.code, r.stdout, r.stderr)
		}
		// The conflict resolved, the same report is one stored before; the
		// next one counts GPU-a as gpu-node-2's.
		expectStatus(t, s.do(t, post("/v1/nodes/report", moved, "a-secret")), "exists")
		expect(t, s.do(t, post("/v1/nodes/report", nodeReportBody("gpu-node-2", end+180, 60, "GPU-a"), "a-secret")), 201, "")
		if r := runMonitor(t, "node", "retire", "gpu-node-9", "--db", dsn); r.code != 1 || !strings.Contains(r.stderr, "no report of node gpu-node-9") {
			t.Fatalf("node retire of an unknown node: exit %d, %q", r.code, r.stderr)
		}
		if r := runMonitor(t, "node", "retire", "bad_name", "--db", dsn); r.code != 2 {
			t.Fatalf("node retire bad_name: exit %d, %q", r.code, r.stderr)
		}
	})
}
