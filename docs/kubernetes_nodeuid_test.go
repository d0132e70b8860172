package docs

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/monitorproc"
)

// TestK8sAPIServerNodeRecreated (NODE.md 12.10; docs/security.md, "Node
// identity"): on the real kube-apiserver, the card GPU-OLD of gpu-node-a
// moves to gpu-node-b while gpu-node-a's Node still stands: gpu-node-b's
// report is 409, GPU-OLD held by gpu-node-a. The Node gpu-node-a is then
// deleted and recreated under its name (a new machine, a new UID); the
// first report of the new machine's agent retires the old machine's GPUs,
// so gpu-node-b's next report of GPU-OLD is 201 and no conflict is left
// in /metrics, without any `node retire`.
func TestK8sAPIServerNodeRecreated(t *testing.T) {
	s := k8sStartServer(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "paddle-monitor")
	repo, _ := filepath.Abs("..")
	c := exec.Command("go", "build", "-trimpath", "-o", bin, "./cmd/paddle-monitor")
	c.Dir, c.Env = repo, append(os.Environ(), "CGO_ENABLED=0")
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// The manifests' identities, as TestK8sAPIServerNodeIdentity applies
	// them.
	s.mustCreate(t, map[string]any{"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
		"metadata": map[string]any{"name": "nvidia"}, "handler": "nvidia"})
	s.mustCreate(t, map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "paddle"}})
	var template map[string]any
	for _, f := range []string{"../deploy/kubernetes/paddle-node.yaml", "../deploy/kubernetes/paddle-monitor.yaml"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, obj := range k8sObjects(t, b) {
			switch obj["kind"] {
			case "Deployment", "Service", "ConfigMap":
				continue
			case "DaemonSet":
				template = obj["spec"].(map[string]any)["template"].(map[string]any)
			}
			s.mustCreate(t, obj)
		}
	}
	if template == nil {
		t.Fatal("paddle-node.yaml has no DaemonSet")
	}
	node := func(name string) string {
		code, out := s.create(t, s.admin, map[string]any{"apiVersion": "v1", "kind": "Node", "metadata": map[string]any{"name": name}}, "")
		if code != http.StatusCreated {
			t.Fatalf("creating the Node %s: %d %v", name, code, out)
		}
		return k8sString(out, "metadata", "uid")
	}
	// token is the projected token of the agent's pod name on node.
	token := func(name, node string) string {
		spec := map[string]any{}
		for k, v := range template["spec"].(map[string]any) {
			spec[k] = v
		}
		spec["nodeName"], spec["serviceAccountName"] = node, "paddle-node"
		obj := map[string]any{"apiVersion": "v1", "kind": "Pod", "spec": spec,
			"metadata": map[string]any{"name": name, "namespace": "paddle-node", "labels": template["metadata"].(map[string]any)["labels"]}}
		var uid string
		k8sEventually(t, "the agent's pod on "+node, func() string {
			code, out := s.create(t, s.admin, obj, "")
			if code != http.StatusCreated {
				return fmt.Sprintf("%d %s", code, k8sString(out, "message"))
			}
			uid = k8sString(out, "metadata", "uid")
			return ""
		})
		return s.k8sTokenFor(t, "paddle-node", "paddle-node", name, uid, "paddle-monitor")
	}
	oldUID := node("gpu-node-a")
	node("gpu-node-b")
	tokOld, tokB := token("paddle-node-a", "gpu-node-a"), token("paddle-node-b", "gpu-node-b")

	monTok := s.k8sTokenFor(t, "paddle", "paddle-monitor", "", "")
	kubeconfig, _ := json.Marshal(map[string]any{
		"current-context": "c",
		"contexts":        []any{map[string]any{"name": "c", "context": map[string]any{"cluster": "k", "user": "m"}}},
		"clusters": []any{map[string]any{"name": "k", "cluster": map[string]any{"server": s.base,
			"certificate-authority-data": base64.StdEncoding.EncodeToString(s.caPEM)}}},
		"users": []any{map[string]any{"name": "m", "user": map[string]any{"token": monTok}}},
	})
	kc := filepath.Join(dir, "kubeconfig.json")
	if err := os.WriteFile(kc, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	srv, err := monitorproc.Start(bin, []string{"--listen", "127.0.0.1:0", "--db", filepath.Join(dir, "m.db"),
		"--kube-tokenreview", kc, "--node-service-account", "paddle-node/paddle-node", "--log-format", "json"},
		monitorproc.Options{Env: []string{"PATH=/usr/bin:/bin"}, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Kill)

	now := time.Now().Unix()
	report := func(node, uuid string, end int64, token string) (int, string) {
		body := fmt.Sprintf(`{"schema_version":1,"node":%q,"time":%d,"interval_seconds":60,"samples":1,"gpus":[],
			"instances":[{"uuid":%q,"gpu_instance_id":null,"name":"NVIDIA H200","samples":1,"busy_share":0,"busy_basis":"utilization","occupied_share":0,"users":[]}]}`,
			node, end, uuid)
		req, _ := http.NewRequest("POST", srv.URL+"/v1/nodes/report", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	conflicts := func() string {
		resp, err := http.Get(srv.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		m, _ := io.ReadAll(resp.Body)
		var out []string
		for _, l := range strings.Split(string(m), "\n") {
			if strings.HasPrefix(l, "paddle_gpu_uuid_conflict{") {
				out = append(out, l)
			}
		}
		return strings.Join(out, "\n")
	}
	step := func(name, node, uuid string, at int64, token string, code int, says string) {
		t.Helper()
		if c, body := report(node, uuid, at, token); c != code || !strings.Contains(body, says) {
			t.Fatalf("%s: %d %s, want %d saying %q", name, c, body, code, says)
		}
	}
	step("the old machine", "gpu-node-a", "GPU-OLD", now-600, tokOld, 201, `"status":"created"`)
	step("the moved card while the old Node stands", "gpu-node-b", "GPU-OLD", now-540, tokB, 409, `"held_by":"gpu-node-a"`)
	if got := conflicts(); !strings.Contains(got, `held_by="gpu-node-a"`) {
		t.Fatalf("/metrics before the Node is recreated: %q, want GPU-OLD's conflict", got)
	}

	if code, body := s.do(t, s.admin, "DELETE", "/api/v1/nodes/gpu-node-a", nil); code != http.StatusOK {
		t.Fatalf("deleting the Node gpu-node-a: %d %s", code, body)
	}
	if newUID := node("gpu-node-a"); newUID == oldUID || newUID == "" {
		t.Fatalf("the recreated Node's UID %q, the old %q", newUID, oldUID)
	}
	tokNew := token("paddle-node-a2", "gpu-node-a")
	step("the new machine of the same name", "gpu-node-a", "GPU-NEW", now-480, tokNew, 201, `"status":"created"`)
	step("the moved card after the new machine's first report", "gpu-node-b", "GPU-OLD", now-420, tokB, 201, `"status":"created"`)
	if got := conflicts(); got != "" {
		t.Errorf("/metrics after the Node was recreated still has conflicts:\n%s", got)
	}
}
