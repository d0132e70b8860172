package main

// Black-box tests of NODE.md section 11/12 ("Who pays cannot be
// redirected"), the monitor's side: each test is one finding of the
// hostile review, on both stores, with figures computed by hand.

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

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
