package main

// Black-box tests of NODE.md section 11/12 ("Who pays cannot be
// redirected"), the monitor's side: each test is one finding of the
// hostile review, on both stores, with figures computed by hand.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// trustTokens is tokensFile with node tokens for gpu-node-1 (n-secret),
// gpu-node-2 (n2-secret) and a team token for ads_* (b-secret).
func trustTokens(t *testing.T) string {
	t.Helper()
	return tokensFile(t, t.TempDir(),
		`{"name":"node-1","sha256":"`+hashHex("n-secret")+`","nodes":["gpu-node-1"]}`,
		`{"name":"node-2","sha256":"`+hashHex("n2-secret")+`","nodes":["gpu-node-2"]}`,
		`{"name":"ads","sha256":"`+hashHex("b-secret")+`","projects":["ads_*"],"owners":["*@example.com"]}`)
}

// trustReg registers task id of project for a pod UID (may be empty) on
// k8sNode (may be empty), started at start, with the team token.
func trustReg(t *testing.T, s *server, token, id, project, podUID, k8sNode, hostname string, start int64) {
	t.Helper()
	reg := fmt.Sprintf(`{"schema_version":1,"task_id":%q,"task_name":"train","project":%q,"owner":"ann@example.com",
		"start_time":%d,"hostname":%q,"k8s_pod_uid":%q,"k8s_node":%q,"labels":{},"gpu_count":1,
		"gpus":[{"index":0,"uuid":"GPU-r-%s","name":"NVIDIA H200","memory_total_bytes":1,"share":1}]}`,
		id, project, start, hostname, podUID, k8sNode, id)
	expect(t, s.do(t, request{Method: "POST", Path: "/v1/task/register", Body: reg, Token: token,
		Header: map[string]string{"Idempotency-Key": id, "User-Agent": "paddle-entrypoint/test"}}), 201, "")
}

// trustUser is one user of a whole GPU, present throughout.
type trustUser struct {
	uuid                                  string
	runtime, containerID, podUID, ns, pod string
	declared                              string // JSON or "null"
}

// trustReport is a report of node ending at end over interval seconds: one
// whole, fully occupied GPU per user.
func trustReport(node string, end, interval int64, users ...trustUser) string {
	var ins []string
	for _, u := range users {
		if u.declared == "" {
			u.declared = "null"
		}
		ins = append(ins, fmt.Sprintf(`{"uuid":%q,"gpu_instance_id":null,"name":"NVIDIA H200","samples":60,"busy_share":1,
			"busy_basis":"utilization","occupied_share":1,"energy_joules":null,
			"users":[{"runtime":%q,"container_id":%q,"pod_uid":%q,"namespace":%q,"pod":%q,"container":"paddle",
			"allocated_share":1,"seen_share":1,"busy_share":1,"declared":%s}]}`,
			u.uuid, u.runtime, u.containerID, u.podUID, u.ns, u.pod, u.declared))
	}
	return fmt.Sprintf(`{"schema_version":1,"node":%q,"time":%d,"interval_seconds":%d,"agent_version":"test","samples":60,"final":false,
		"gpus":[],"instances":[%s]}`, node, end, interval, strings.Join(ins, ","))
}

// ledgerByProject is GET /v1/ledger?by=project over [from, to) as the
// admin sees it: each row's figures by project ("" for the states of no
// project).
func ledgerByProject(t *testing.T, s *server, from, to int64) map[string]map[string]any {
	t.Helper()
	a := s.do(t, get("/v1/ledger?by=project&from="+rfc(from)+"&to="+rfc(to), "a-secret"))
	expect(t, a, 200, "")
	out := map[string]map[string]any{}
	for _, row := range a.JSON(t)["rows"].([]any) {
		m := row.(map[string]any)
		out[m["key"].(map[string]any)["project"].(string)] = m
	}
	return out
}

func rfc(sec int64) string { return time.Unix(sec, 0).UTC().Format(time.RFC3339) }

// discrepantUsers is GET /v1/discrepancies' users as "node/pod state".
func discrepantUsers(t *testing.T, s *server, from, to int64) []string {
	t.Helper()
	a := s.do(t, get("/v1/discrepancies?from="+rfc(from)+"&to="+rfc(to), "a-secret"))
	expect(t, a, 200, "")
	var d struct {
		Users []struct {
			Node, Pod, State string
			GPUHours         float64 `json:"gpu_hours"`
		} `json:"users"`
	}
	if err := json.Unmarshal(a.Body, &d); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, u := range d.Users {
		out = append(out, fmt.Sprintf("%s/%s %s %g", u.Node, u.Pod, u.State, u.GPUHours))
	}
	return out
}

// TestTiesBoundToTheNode (F1, F3; NODE.md 11 and 12.1): over one hour,
//   - search_v's pod pod-v runs on gpu-node-1 (its registration names the
//     node); gpu-node-2, with its own exact token, reports pod-v too: before
//     NODE.md 11 search_v paid 2 GPU-hours, now 1, and gpu-node-2's hour
//     is unattributed;
//   - search_w's pod pod-w registered without k8s_node is reported by both
//     nodes over the same hour: it ties on neither (2 unattributed
//     GPU-hours, both listed by discrepancies), before it paid 2;
//   - a plain Docker container on gpu-node-1 declares search_c's task,
//     whose registration names a pod UID and gpu-node-1: before it was
//     tied through k8s_node (search_c paid 1), now it is unattributed;
//   - a plain container declaring search_d's task, registered on
//     gpu-node-1 without a pod UID, is still tied through k8s_node (1).
func TestTiesBoundToTheNode(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := startServer(t, dsn, "--tokens", trustTokens(t))
		h := time.Now().Unix()/3600*3600 - 3*3600
		trustReg(t, s, "s-secret", "t-v", "search_v", "pod-v", "gpu-node-1", "train-v", h-100)
		trustReg(t, s, "s-secret", "t-w", "search_w", "pod-w", "", "train-w", h-100)
		trustReg(t, s, "s-secret", "t-c", "search_c", "pod-c", "gpu-node-1", "train-c", h-100)
		trustReg(t, s, "s-secret", "t-d", "search_d", "", "gpu-node-1", "docker-host", h-100)
		decl := func(task, project string) string {
			return fmt.Sprintf(`{"task_id":%q,"project":%q,"owner":"ann@example.com"}`, task, project)
		}
		expect(t, s.do(t, post("/v1/nodes/report", trustReport("gpu-node-1", h+3600, 3600,
			trustUser{uuid: "GPU-a", runtime: "containerd", containerID: "c-v", podUID: "pod-v", ns: "team-v", pod: "train-v"},
			trustUser{uuid: "GPU-b", runtime: "containerd", containerID: "c-w1", podUID: "pod-w", ns: "team-w", pod: "train-w"},
			trustUser{uuid: "GPU-c", runtime: "docker", containerID: "0123456789abcdef0123", declared: decl("t-c", "search_c")},
			trustUser{uuid: "GPU-d", runtime: "docker", containerID: "fedcba9876543210fedc", declared: decl("t-d", "search_d")},
		), "n-secret")), 201, "")
		expect(t, s.do(t, post("/v1/nodes/report", trustReport("gpu-node-2", h+3600, 3600,
			trustUser{uuid: "GPU-x", runtime: "containerd", containerID: "c-x", podUID: "pod-v", ns: "team-v", pod: "train-v"},
			trustUser{uuid: "GPU-y", runtime: "containerd", containerID: "c-w2", podUID: "pod-w", ns: "team-w", pod: "train-w"},
		), "n2-secret")), 201, "")

		rows := ledgerByProject(t, s, h, h+3600)
		checkFigures(t, "search_v", rows["search_v"], map[string]float64{"attributed_gpu_hours": 1})
		checkFigures(t, `""`, rows[""], map[string]float64{"unattributed_gpu_hours": 4})
		checkFigures(t, "search_d", rows["search_d"], map[string]float64{"attributed_gpu_hours": 1})
		for _, p := range []string{"search_w", "search_c"} {
			if r := rows[p]; r != nil && r["attributed_gpu_hours"] != 0.0 {
				t.Errorf("%s is billed: %v", p, r)
			}
		}
		got := strings.Join(discrepantUsers(t, s, h, h+3600), "\n")
		for _, want := range []string{"gpu-node-1/train-w unattributed 1", "gpu-node-2/train-w unattributed 1", "gpu-node-2/train-v unattributed 1",
			"gpu-node-1/ unattributed 1"} {
			if !strings.Contains(got, want) {
				t.Errorf("discrepancies do not list %q:\n%s", want, got)
			}
		}
	})
}

// metricLine is the line of /metrics that starts with prefix ("" when none).
func metricLine(t *testing.T, s *server, prefix string) string {
	t.Helper()
	a := s.do(t, request{Method: "GET", Path: "/metrics", Token: "a-secret", NoSpecCheck: true})
	for _, l := range strings.Split(string(a.Body), "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

// TestNoReportFromTheFuture (F4; NODE.md 12.2): a report an hour ahead of
// the monitor's clock is answered 425 with Retry-After (the seconds until
// it is within 300 s) and not stored, so the node's real report of now is
// stored whole (before NODE.md 11 the report from the future was stored
// and billed, and the real one answered 200 clipped, then deleted by the
// agent); a report 100 s ahead is stored; the skew the agent's sent_at
// shows is on /metrics.
func TestNoReportFromTheFuture(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := startServer(t, dsn, "--tokens", trustTokens(t))
		now := time.Now().Unix()
		pod := trustUser{uuid: "GPU-a", runtime: "containerd", containerID: "c1", podUID: "pod-1", ns: "team-a", pod: "train-0"}
		a := s.do(t, post("/v1/nodes/report", trustReport("gpu-node-1", now+3600, 3600, pod), "n-secret"))
		expect(t, a, 425, "time")
		if !strings.Contains(a.Error(t), "past the monitor's clock") {
			t.Errorf("425 error %q", a.Error(t))
		}
		if ra, err := strconvAtoi(a.Header.Get("Retry-After")); err != nil || ra < 3300-30 || ra > 3300 {
			t.Errorf("Retry-After %q, want about 3300", a.Header.Get("Retry-After"))
		}
		a = s.do(t, post("/v1/nodes/report", trustReport("gpu-node-1", now, 60, pod), "n-secret"))
		expect(t, a, 201, "")
		if a.JSON(t)["status"] != "created" {
			t.Errorf("the real report of now: %s, want created (not clipped by a span from the future)", a.Body)
		}
		// Within 300 s: stored, and the skew shown.
		body := strings.Replace(trustReport("gpu-node-1", now+100, 100, pod), `"final":false`, fmt.Sprintf(`"final":false,"sent_at":%q`, time.Unix(now+100, 0).UTC().Format(time.RFC3339)), 1)
		expect(t, s.do(t, post("/v1/nodes/report", body, "n-secret")), 201, "")
		line := metricLine(t, s, `paddle_node_clock_skew_seconds{node="gpu-node-1"} `)
		var skew float64
		if _, err := fmt.Sscanf(strings.TrimPrefix(line, `paddle_node_clock_skew_seconds{node="gpu-node-1"} `), "%g", &skew); err != nil || skew < 90 || skew > 100 {
			t.Errorf("the skew: %q, want about 100", line)
		}
	})
}

func strconvAtoi(s string) (int, error) {
	var v int
	_, err := fmt.Sscanf(s, "%d", &v)
	return v, err
}

// TestUUIDConflictLoud (F8; NODE.md 12.3): gpu-node-2, with its own
// token, reports GPU-a that gpu-node-1 holds. Its report is stored and
// answered 409 {"status":"stored","conflicts":[…]} every time (before, 409
// refused it and the agent deleted it: the node went dark); GPU-a is
// counted once (capacity 1 GPU-hour, not 2: gpu-node-2's entries are out
// of every state), the conflict is on /metrics and in discrepancies until
// `node retire gpu-node-1`.
func TestUUIDConflictLoud(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := startServer(t, dsn, "--tokens", trustTokens(t))
		h := time.Now().Unix()/3600*3600 - 3*3600
		user := func(c string) trustUser {
			return trustUser{uuid: "GPU-a", runtime: "containerd", containerID: c, podUID: "pod-" + c, ns: "team-a", pod: "p-" + c}
		}
		expect(t, s.do(t, post("/v1/nodes/report", trustReport("gpu-node-1", h+3600, 3600, user("one")), "n-secret")), 201, "")
		for range 2 {
			a := s.do(t, post("/v1/nodes/report", trustReport("gpu-node-2", h+3600, 3600, user("two")), "n2-secret"))
			want := fmt.Sprintf(`{"node":"gpu-node-2","time":%d,"status":"stored","conflicts":[{"uuid":"GPU-a","held_by":"gpu-node-1"}]}`+"\n", h+3600)
			if a.Status != 409 || string(a.Body) != want {
				t.Fatalf("the conflicting report: %d %s, want 409 %s", a.Status, a.Body, want)
			}
		}
		series := `paddle_gpu_uuid_conflict{UUID="GPU-a",held_by="gpu-node-1",node="gpu-node-2"} 1`
		if l := metricLine(t, s, `paddle_gpu_uuid_conflict{`); l != series {
			t.Errorf("/metrics: %q, want %q", l, series)
		}
		a := s.do(t, get("/v1/ledger?from="+rfc(h)+"&to="+rfc(h+3600), "a-secret"))
		expect(t, a, 200, "")
		checkFigures(t, "the total", a.JSON(t)["total"].(map[string]any), map[string]float64{"capacity_gpu_hours": 1,
			"unattributed_gpu_hours": 1, "check_gpu_hours": 0})
		conflicts := func() string {
			a := s.do(t, get("/v1/discrepancies?from="+rfc(h)+"&to="+rfc(h+3600), "a-secret"))
			expect(t, a, 200, "")
			b, _ := json.Marshal(a.JSON(t)["gpu_conflicts"])
			return string(b)
		}
		if got, want := conflicts(), fmt.Sprintf(`[{"first_time":%d,"held_by":"gpu-node-1","last_time":%d,"node":"gpu-node-2","observed_seconds":3600,"uuid":"GPU-a"}]`, h+3600, h+3600); got != want {
			t.Errorf("discrepancies' gpu_conflicts: %s, want %s", got, want)
		}
		if r := runMonitor(t, "node", "retire", "gpu-node-1", "--db", dsn); r.code != 0 {
			t.Fatalf("node retire: exit %d %s", r.code, r.stderr)
		}
		if l := metricLine(t, s, `paddle_gpu_uuid_conflict{`); l != "" {
			t.Errorf("/metrics after the retire: %q", l)
		}
		if got := conflicts(); got != "[]" {
			t.Errorf("discrepancies after the retire: %s", got)
		}
		expect(t, s.do(t, post("/v1/nodes/report", trustReport("gpu-node-2", h+7200, 3600, user("two")), "n2-secret")), 201, "")
	})
}

// TestNodeCase (F10; NODE.md 12.4): one node reporting as GPU-Node-1 and
// gpu-node-1, its GPU as GPU-ABC and gpu-abc, is one node and one GPU:
// one ledger row, capacity 2 GPU-hours over the two hours (before, two
// nodes and two GPUs, the GPU counted twice).
func TestNodeCase(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := startServer(t, dsn, "--tokens", trustTokens(t))
		h := time.Now().Unix()/3600*3600 - 3*3600
		u := trustUser{uuid: "GPU-ABC", runtime: "containerd", containerID: "c1", podUID: "pod-1", ns: "team-a", pod: "train-0"}
		a := s.do(t, post("/v1/nodes/report", trustReport("GPU-Node-1", h+3600, 3600, u), "n-secret"))
		expect(t, a, 201, "")
		if a.JSON(t)["node"] != "gpu-node-1" {
			t.Errorf("the answer names %v, want gpu-node-1", a.JSON(t)["node"])
		}
		u.uuid = "gpu-abc"
		expect(t, s.do(t, post("/v1/nodes/report", trustReport("gpu-node-1", h+7200, 3600, u), "n-secret")), 201, "")
		a = s.do(t, get("/v1/ledger?from="+rfc(h)+"&to="+rfc(h+7200), "a-secret"))
		expect(t, a, 200, "")
		rows := a.JSON(t)["rows"].([]any)
		if len(rows) != 1 || rows[0].(map[string]any)["key"].(map[string]any)["node"] != "gpu-node-1" {
			t.Fatalf("rows: %s", a.Body)
		}
		checkFigures(t, "gpu-node-1", rows[0].(map[string]any), map[string]float64{"capacity_gpu_hours": 2, "unattributed_gpu_hours": 2,
			"unobserved_gpu_hours": 0, "check_gpu_hours": 0})
	})
}

// shippedNamespaces writes the namespace mapping of the shipped monitor
// manifest's ConfigMap (deploy/kubernetes/paddle-monitor.yaml) to dir and
// returns its path.
func shippedNamespaces(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile("../../deploy/kubernetes/paddle-monitor.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range bytes.Split(b, []byte("\n---\n")) {
		var cm corev1.ConfigMap
		if yaml.Unmarshal(doc, &cm) == nil && cm.Kind == "ConfigMap" {
			data, ok := cm.Data["namespaces.json"]
			if !ok {
				t.Fatalf("the shipped ConfigMap %s has no namespaces.json: an untied pod would be free", cm.Name)
			}
			path := filepath.Join(dir, "namespaces.json")
			writeFile(t, path, data)
			return path
		}
	}
	t.Fatal("the shipped monitor manifest has no ConfigMap")
	return ""
}

// TestNoFreePod (F9; MONITOR.md 20.23): with the shipped manifest's
// namespace mapping, observed use of pods no registration ties is charged
// to "unassigned", one row by project, split by --by namespace; before,
// the manifest had no mapping and the use was charged to nobody.
func TestNoFreePod(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		dir := t.TempDir()
		ns := shippedNamespaces(t, dir)
		s := startServer(t, dsn, "--tokens", trustTokens(t), "--namespace-projects", ns)
		h := time.Now().Unix()/3600*3600 - 3*3600
		expect(t, s.do(t, post("/v1/nodes/report", trustReport("gpu-node-1", h+3600, 3600,
			trustUser{uuid: "GPU-a", runtime: "containerd", containerID: "c1", podUID: "pod-x", ns: "team-x", pod: "train-x"},
			trustUser{uuid: "GPU-b", runtime: "containerd", containerID: "c2", podUID: "pod-y", ns: "team-y", pod: "train-y"},
			trustUser{uuid: "GPU-c", runtime: "containerd", containerID: "c3", podUID: "pod-z", ns: "team-y", pod: "train-z"},
		), "n-secret")), 201, "")
		rows := ledgerByProject(t, s, h, h+3600)
		checkFigures(t, "unassigned", rows["unassigned"], map[string]float64{"undeclared_gpu_hours": 3, "unattributed_gpu_hours": 0})
		checkFigures(t, `""`, rows[""], map[string]float64{"undeclared_gpu_hours": 0, "unattributed_gpu_hours": 0, "attributed_gpu_hours": 0})
		if len(rows) != 2 {
			t.Errorf("%d rows by project, want unassigned and the fleet's own: %v", len(rows), rows)
		}
		a := s.do(t, get("/v1/ledger?by=namespace&from="+rfc(h)+"&to="+rfc(h+3600), "a-secret"))
		expect(t, a, 200, "")
		byNS := map[string]float64{}
		for _, row := range a.JSON(t)["rows"].([]any) {
			m := row.(map[string]any)
			byNS[m["key"].(map[string]any)["namespace"].(string)] = m["undeclared_gpu_hours"].(float64)
		}
		if byNS["team-x"] != 1 || byNS["team-y"] != 2 {
			t.Errorf("by namespace: %v, want team-x 1, team-y 2", byNS)
		}
	})
}

// TestHostileNeighbour: everything a hostile team (ads_b, its own team
// token, pods on the same node as search_a) and a hostile node (root on
// gpu-node-2, its own node token) can send changes nobody's bill but
// their own. The same honest fleet is stored twice, alone and with the
// hostile side's reports and registrations; every project's ledger row but
// ads_b's is the same in both:
//   - an ads_b pod declares search_a's task in its labels file (tied by
//     pod UID to nothing: ads_b's namespace's use, not search_a's);
//   - a plain container on gpu-node-1 declares search_a's task (F3);
//   - gpu-node-2 reports search_a's pod UID (F1) and search_a's GPU UUID
//     (F8), and a report an hour ahead (F4);
//   - ads_b registers a task with a share of 0.01 for its pod and uses a
//     whole GPU: it pays the observed hour.
func TestHostileNeighbour(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		h := time.Now().Unix()/3600*3600 - 3*3600
		honest := []trustUser{{uuid: "GPU-a", runtime: "containerd", containerID: "c-a", podUID: "pod-a", ns: "team-a", pod: "train-a"}}
		run := func(hostile bool) map[string]map[string]any {
			db := storetest.SQLiteDSN(t)
			if strings.HasPrefix(dsn, "postgres") {
				db = storetest.PostgresDSN(t)
			}
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "ns.json"), `{"team-b": "ads_b", "*": "unassigned"}`)
			s := startServer(t, db, "--tokens", trustTokens(t), "--namespace-projects", filepath.Join(dir, "ns.json"))
			trustReg(t, s, "s-secret", "t-a", "search_a", "pod-a", "gpu-node-1", "train-a", h-100)
			users := honest
			if hostile {
				reg := fmt.Sprintf(`{"schema_version":1,"task_id":"t-b","task_name":"x","project":"ads_b","owner":"bob@example.com",
					"start_time":%d,"hostname":"train-b","k8s_pod_uid":"pod-b2","k8s_node":"gpu-node-1","labels":{},"gpu_count":1,
					"gpus":[{"index":0,"uuid":"GPU-d","name":"NVIDIA H200","memory_total_bytes":1,"share":0.01}]}`, h-100)
				expect(t, s.do(t, request{Method: "POST", Path: "/v1/task/register", Body: reg, Token: "b-secret",
					Header: map[string]string{"Idempotency-Key": "t-b", "User-Agent": "paddle-entrypoint/test"}}), 201, "")
				steal := `{"task_id":"t-a","project":"search_a","owner":"ann@example.com"}`
				users = append(slices.Clone(honest),
					trustUser{uuid: "GPU-b", runtime: "containerd", containerID: "c-b", podUID: "pod-b", ns: "team-b", pod: "sneaky", declared: steal},
					trustUser{uuid: "GPU-c", runtime: "docker", containerID: "0123456789abcdef0123", declared: steal},
					trustUser{uuid: "GPU-d", runtime: "containerd", containerID: "c-b2", podUID: "pod-b2", ns: "team-b", pod: "cheap"})
			}
			expect(t, s.do(t, post("/v1/nodes/report", trustReport("gpu-node-1", h+3600, 3600, users...), "n-secret")), 201, "")
			if hostile {
				forged := trustReport("gpu-node-2", h+3600, 3600,
					trustUser{uuid: "GPU-x", runtime: "containerd", containerID: "c-x", podUID: "pod-a", ns: "team-a", pod: "train-a"},
					trustUser{uuid: "GPU-a", runtime: "containerd", containerID: "c-y", podUID: "pod-a", ns: "team-a", pod: "train-a"})
				if a := s.do(t, post("/v1/nodes/report", forged, "n2-secret")); a.Status != 409 {
					t.Fatalf("the forged report: %d %s", a.Status, a.Body)
				}
				expect(t, s.do(t, post("/v1/nodes/report", trustReport("gpu-node-2", time.Now().Unix()+3600, 3600,
					trustUser{uuid: "GPU-z", runtime: "containerd", containerID: "c-z", podUID: "pod-a", ns: "team-a", pod: "train-a"}), "n2-secret")), 425, "")
			}
			return ledgerByProject(t, s, h, h+3600)
		}
		alone, with := run(false), run(true)
		for p, row := range alone {
			if p == "ads_b" || p == "" || p == "unassigned" {
				continue
			}
			a, _ := json.Marshal(row)
			b, _ := json.Marshal(with[p])
			if string(a) != string(b) {
				t.Errorf("project %s: alone %s, with the hostile neighbour %s", p, a, b)
			}
		}
		checkFigures(t, "search_a", with["search_a"], map[string]float64{"attributed_gpu_hours": 1})
		// The hostile team pays its own: its pod that declared another's
		// task (undeclared, its namespace's) and its cheap registration's
		// observed whole GPU.
		checkFigures(t, "ads_b", with["ads_b"], map[string]float64{"attributed_gpu_hours": 1, "undeclared_gpu_hours": 1})
		for p := range with {
			if _, ok := alone[p]; !ok && p != "ads_b" && p != "" && p != "unassigned" {
				t.Errorf("a project appears only with the hostile neighbour: %s %v", p, with[p])
			}
		}
	})
}

// TestProvisionalSpan (F4; NODE.md 12.2): the part of a stored span after
// the time it was received is provisional: a report 240 s ahead covers
// [now−60, now+240); the node's next report, of [now+60, now+120), is
// stored whole (before, it was answered 200 clipped with nothing kept, and
// the agent deleted it), and the first is cut at now+60. Every read clips
// at now: the GPU is observed from now−60 to the instant of the read,
// some 60 s, never the 180 s stored nor the 300 s first reported.
func TestProvisionalSpan(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := startServer(t, dsn, "--tokens", trustTokens(t))
		now := time.Now().Unix()
		u := trustUser{uuid: "GPU-a", runtime: "containerd", containerID: "c1", podUID: "pod-1", ns: "team-a", pod: "train-0"}
		expect(t, s.do(t, post("/v1/nodes/report", trustReport("gpu-node-1", now+240, 300, u), "n-secret")), 201, "")
		a := s.do(t, post("/v1/nodes/report", trustReport("gpu-node-1", now+120, 60, u), "n-secret"))
		expect(t, a, 201, "")
		if a.JSON(t)["status"] != "created" {
			t.Fatalf("the report of the provisional part: %s", a.Body)
		}
		h := now / 3600 * 3600
		a = s.do(t, get("/v1/ledger?from="+rfc(h-3600)+"&to="+rfc(h+7200), "a-secret"))
		expect(t, a, 200, "")
		got := a.JSON(t)["total"].(map[string]any)["unattributed_gpu_hours"].(float64)
		if hi := float64(time.Now().Unix()+1-(now-60)) / 3600; got < 60.0/3600-1e-9 || got > hi {
			t.Errorf("the total's unattributed = %.6f GPU-hours, want between %.6f and %.6f", got, 60.0/3600, hi)
		}
	})
}
