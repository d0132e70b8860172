package docs

// Node identity from the cluster (docs/node.md, "Identity and trust";
// NODE.md 11, 12.10) on the real kube-apiserver: the shipped manifests'
// ServiceAccounts and RBAC applied, pods of the DaemonSet's template bound
// to two nodes, their projected tokens (audience paddle-monitor) minted by
// the API server's TokenRequest as the kubelet does, and the built
// paddle-monitor reviewing them with its own ServiceAccount's token (the
// manifest's ClusterRole: tokenreviews create, nothing else).

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

// k8sTokenFor mints a token of the ServiceAccount ns/sa for audiences,
// bound to the pod (name, uid) when name is not empty.
func (s *k8sServer) k8sTokenFor(t *testing.T, ns, sa, pod, uid string, audiences ...string) string {
	t.Helper()
	spec := map[string]any{"expirationSeconds": 3600}
	if len(audiences) > 0 {
		spec["audiences"] = audiences
	}
	if pod != "" {
		spec["boundObjectRef"] = map[string]any{"kind": "Pod", "apiVersion": "v1", "name": pod, "uid": uid}
	}
	code, body := s.do(t, s.admin, "POST", "/api/v1/namespaces/"+ns+"/serviceaccounts/"+sa+"/token",
		map[string]any{"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec})
	var out struct {
		Status struct {
			Token string `json:"token"`
		} `json:"status"`
	}
	if code != http.StatusCreated || json.Unmarshal(body, &out) != nil || out.Status.Token == "" {
		t.Fatalf("TokenRequest for %s/%s: %d %s", ns, sa, code, body)
	}
	return out.Status.Token
}

// TestK8sAPIServerNodeIdentity: a token of the agent's pod bound to
// gpu-node-a reports for gpu-node-a (201) and not for gpu-node-b (403
// naming both); a token of another ServiceAccount, of another audience, or
// not bound to a pod is 401; three reports with one token make one
// review.
func TestK8sAPIServerNodeIdentity(t *testing.T) {
	s := k8sStartServer(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "paddle-monitor")
	repo, _ := filepath.Abs("..")
	c := exec.Command("go", "build", "-trimpath", "-o", bin, "./cmd/paddle-monitor")
	c.Dir, c.Env = repo, append(os.Environ(), "CGO_ENABLED=0")
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	// The manifests' identities: paddle-node.yaml whole (its namespace,
	// ServiceAccount and DaemonSet), paddle-monitor.yaml's ServiceAccount
	// and RBAC in its namespace.
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
				continue // no controller here; only the identities matter
			case "DaemonSet":
				template = obj["spec"].(map[string]any)["template"].(map[string]any)
			}
			s.mustCreate(t, obj)
		}
	}
	if template == nil {
		t.Fatal("paddle-node.yaml has no DaemonSet")
	}
	for _, n := range []string{"gpu-node-a", "gpu-node-b"} {
		s.mustCreate(t, map[string]any{"apiVersion": "v1", "kind": "Node", "metadata": map[string]any{"name": n}})
	}
	s.mustCreate(t, map[string]any{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": map[string]any{"name": "default", "namespace": "paddle-node"}})
	pod := func(name, node, sa string) (string, string) {
		spec := map[string]any{}
		for k, v := range template["spec"].(map[string]any) {
			spec[k] = v
		}
		spec["nodeName"], spec["serviceAccountName"] = node, sa
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
		return name, uid
	}
	podA, uidA := pod("paddle-node-a", "gpu-node-a", "paddle-node")
	podB, uidB := pod("paddle-node-b", "gpu-node-b", "paddle-node")
	// A pod of the same node under another ServiceAccount (root on the
	// node can read every pod's token).
	podX, uidX := pod("intruder", "gpu-node-a", "default")
	tokA := s.k8sTokenFor(t, "paddle-node", "paddle-node", podA, uidA, "paddle-monitor")
	tokB := s.k8sTokenFor(t, "paddle-node", "paddle-node", podB, uidB, "paddle-monitor")
	otherSA := s.k8sTokenFor(t, "paddle-node", "default", podX, uidX, "paddle-monitor")
	otherAudience := s.k8sTokenFor(t, "paddle-node", "paddle-node", podA, uidA, "vault")
	unbound := s.k8sTokenFor(t, "paddle-node", "paddle-node", "", "", "paddle-monitor")

	// The monitor authenticates to the cluster as its manifest's
	// ServiceAccount (a kubeconfig in JSON).
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
	tokens := filepath.Join(dir, "tokens.json")
	adminHash := "4c2d6e9b8f7d3a5e1c0b9a8f7e6d5c4b3a291807f6e5d4c3b2a1908f7e6d5c4b" // of no token: the file needs an entry
	if err := os.WriteFile(tokens, []byte(`{"tokens":[{"name":"ops","sha256":"`+adminHash+`","admin":true}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	srv, err := monitorproc.Start(bin, []string{"--listen", "127.0.0.1:0", "--db", filepath.Join(dir, "m.db"), "--tokens", tokens,
		"--kube-tokenreview", kc, "--node-service-account", "paddle-node/paddle-node", "--log-format", "json"},
		monitorproc.Options{Env: []string{"PATH=/usr/bin:/bin"}, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Kill)

	now := time.Now().Unix()
	report := func(node string, end int64, token string) (int, string) {
		body := fmt.Sprintf(`{"schema_version":1,"node":%q,"time":%d,"interval_seconds":60,"samples":1,"gpus":[],
			"instances":[{"uuid":"GPU-%s","gpu_instance_id":null,"name":"NVIDIA H200","samples":1,"busy_share":0,"busy_basis":"utilization","occupied_share":0,"users":[]}]}`,
			node, end, node)
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
	for i, tc := range []struct {
		name, node, token string
		code              int
		says              string
	}{
		{"its own node", "gpu-node-a", tokA, 201, `"status":"created"`},
		{"its own node again", "gpu-node-a", tokA, 201, `"status":"created"`},
		{"another node", "gpu-node-b", tokA, 403, "bound to a pod of node gpu-node-a: it may not send reports of node gpu-node-b"},
		{"the other node's own", "gpu-node-b", tokB, 201, `"status":"created"`},
		{"another ServiceAccount", "gpu-node-a", otherSA, 401, "system:serviceaccount:paddle-node:default is not a node agent's ServiceAccount"},
		{"another audience", "gpu-node-a", otherAudience, 401, "not valid"},
		{"a token bound to no pod", "gpu-node-a", unbound, 401, "not bound to a pod on a node"},
		{"no Kubernetes token", "gpu-node-a", "pdm_0123", 401, "not valid"},
		{"its own node a third time", "gpu-node-a", tokA, 201, `"status":"created"`},
	} {
		code, body := report(tc.node, now-600+int64(i)*60, tc.token)
		if code != tc.code || !strings.Contains(body, tc.says) {
			t.Errorf("%s: %d %s, want %d saying %q", tc.name, code, body, tc.code, tc.says)
		}
	}
	// One review per token per period: tokA was used four times, tokB once,
	// each refused token once (the cluster answered each, or refused it).
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	m, _ := io.ReadAll(resp.Body)
	for _, want := range []string{`paddle_monitor_tokenreviews_total{result="authenticated"} 2`, `paddle_monitor_tokenreviews_total{result="error"} 0`} {
		if !strings.Contains(string(m), want+"\n") {
			t.Errorf("/metrics does not say %s:\n%s", want, grepLines(string(m), "paddle_monitor_tokenreviews_total"))
		}
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
