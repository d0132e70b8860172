package docs

// The admission manifests on a real Kubernetes API server: kube-apiserver
// and kube-scheduler (built once by scripts/kube-apiserver.sh, the one place
// their version is pinned) and etcd (Debian's etcd-server) on 127.0.0.1,
// with their data, a self-signed serving certificate and static tokens in a
// temporary directory. The tests apply deploy/kubernetes/priority.yaml,
// deploy/kubernetes/admission.yaml and kubernetes.md's namespace with its
// list, and create pods as a team's user and as an administrator:
// what the server stores (priorityClassName, priority, preemptionPolicy),
// how it refuses (its message) and whom the scheduler preempts is what a
// cluster does. There is no controller manager and no kubelet: the tests
// create the namespace's `default` ServiceAccount, the team's Role and a
// Node object themselves, and remove a preempted pod as the kubelet would.
// Without the binaries the tests are skipped, saying which is missing,
// unless PADDLE_TEST_REQUIRE_TOOLS=1 (CI) makes that a failure.

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/paddle-entrypoint/paddle-entrypoint/test/harness"
)

// k8sRequireTool skips (or, under PADDLE_TEST_REQUIRE_TOOLS=1, fails) with
// why a tool is missing.
func k8sRequireTool(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("PADDLE_TEST_REQUIRE_TOOLS") == "1" {
		t.Fatalf("%s (PADDLE_TEST_REQUIRE_TOOLS=1)", msg)
	}
	t.Skip(msg)
}

// k8sBinaries returns the paths of kube-apiserver and etcd.
func k8sBinaries(t *testing.T) (apiserver, etcd string) {
	t.Helper()
	apiserver = k8sMustBinary(t)
	harness.ToolAt(t, "kube-apiserver", apiserver, "not built at "+apiserver+": run scripts/kube-apiserver.sh once, about 20 minutes; .ci/run does")
	return apiserver, harness.Tool(t, "etcd")
}

// k8sMustBinary returns where scripts/kube-apiserver.sh puts kube-apiserver.
func k8sMustBinary(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("bash", "../scripts/kube-apiserver.sh", "--path").Output()
	if err != nil {
		t.Fatalf("scripts/kube-apiserver.sh --path: %v", err)
	}
	return strings.TrimSpace(string(out))
}

func k8sFreePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// k8sStart starts a server process whose output goes to log, stopped (and
// its log shown if the test failed) when the test ends.
func k8sStart(t *testing.T, log string, name string, args ...string) {
	t.Helper()
	f, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	t.Cleanup(func() {
		// Their data is in the test's directory: nothing to shut down
		// gracefully.
		cmd.Process.Kill()
		cmd.Wait()
		f.Close()
		if t.Failed() {
			b, _ := os.ReadFile(log)
			if len(b) > 4000 {
				b = b[len(b)-4000:]
			}
			t.Logf("%s (last lines of %s):\n%s", filepath.Base(name), log, b)
		}
	})
}

// k8sServingCert writes a self-signed certificate for 127.0.0.1 and its
// key, and returns a pool that trusts it.
func k8sServingCert(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	certFile, keyFile = filepath.Join(dir, "serving.crt"), filepath.Join(dir, "serving.key")
	k8sWritePEM(t, certFile, "CERTIFICATE", der)
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	k8sWritePEM(t, keyFile, "EC PRIVATE KEY", kb)
	return certFile, keyFile, pool
}

func k8sWritePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

func k8sToken(t *testing.T) string {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// k8sServer is a running kube-apiserver and the tokens of its two users:
// admin (system:masters) and alice (a team's user, with the Role the test
// gives her).
type k8sServer struct {
	base         string
	client       *http.Client
	admin, alice string
	caPEM        []byte // the serving certificate, which clients trust
}

// k8sStartServer starts etcd and kube-apiserver and waits until the API
// server is ready.
func k8sStartServer(t *testing.T) *k8sServer {
	t.Helper()
	apiserver, etcd := k8sBinaries(t)
	dir := t.TempDir()
	client, peer := k8sFreePort(t), k8sFreePort(t)
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", client)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peer)
	k8sStart(t, filepath.Join(dir, "etcd.log"), etcd,
		"--name", "test", "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "test="+peerURL)

	certFile, keyFile, pool := k8sServingCert(t, dir)
	caPEM, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(saKey)
	pub, _ := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	k8sWritePEM(t, filepath.Join(dir, "sa.key"), "EC PRIVATE KEY", kb)
	k8sWritePEM(t, filepath.Join(dir, "sa.pub"), "PUBLIC KEY", pub)
	s := &k8sServer{admin: k8sToken(t), alice: k8sToken(t), caPEM: caPEM}
	tokens := fmt.Sprintf("%s,admin,1,\"system:masters\"\n%s,alice,2,\"team-a\"\n", s.admin, s.alice)
	if err := os.WriteFile(filepath.Join(dir, "tokens.csv"), []byte(tokens), 0o600); err != nil {
		t.Fatal(err)
	}
	port := k8sFreePort(t)
	k8sStart(t, filepath.Join(dir, "kube-apiserver.log"), apiserver,
		"--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		// The endpoint reconciler refuses a loopback address; with no
		// nodes there is nothing for the kubernetes Service to reach.
		"--endpoint-reconciler-type=none",
		fmt.Sprintf("--secure-port=%d", port),
		"--tls-cert-file="+certFile, "--tls-private-key-file="+keyFile,
		"--cert-dir="+filepath.Join(dir, "certs"),
		"--token-auth-file="+filepath.Join(dir, "tokens.csv"),
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file="+filepath.Join(dir, "sa.pub"),
		"--service-account-signing-key-file="+filepath.Join(dir, "sa.key"),
		"--service-cluster-ip-range=10.96.0.0/24")
	s.base = fmt.Sprintf("https://127.0.0.1:%d", port)
	s.client = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}

	// Ready: every post-start hook done (RBAC's bootstrap roles, the
	// system priority classes). A loaded machine takes a while.
	deadline := time.Now().Add(3 * time.Minute)
	for {
		code, body := s.do(t, s.admin, "GET", "/readyz", nil)
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("kube-apiserver not ready after 3 minutes: %d %s", code, body)
		}
		time.Sleep(500 * time.Millisecond)
	}
	return s
}

// do sends one request (obj marshalled as JSON, nil for none) and returns
// the status and the body; a network error fails the test.
func (s *k8sServer) do(t *testing.T, token, method, path string, obj any) (int, []byte) {
	t.Helper()
	var body io.Reader
	if obj != nil {
		b, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		body = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, s.base+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	if method == "PATCH" {
		req.Header.Set("Content-Type", "application/merge-patch+json")
	}
	resp, err := s.client.Do(req)
	if err != nil {
		if strings.HasSuffix(path, "/readyz") {
			return 0, []byte(err.Error()) // not listening yet
		}
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// k8sPath is the REST collection of an object of kind in namespace.
func k8sPath(t *testing.T, apiVersion, kind, namespace string) string {
	t.Helper()
	resources := map[string]string{
		"PriorityClass": "priorityclasses", "MutatingAdmissionPolicy": "mutatingadmissionpolicies",
		"MutatingAdmissionPolicyBinding":   "mutatingadmissionpolicybindings",
		"ValidatingAdmissionPolicy":        "validatingadmissionpolicies",
		"ValidatingAdmissionPolicyBinding": "validatingadmissionpolicybindings",
		"Namespace":                        "namespaces", "ConfigMap": "configmaps", "ServiceAccount": "serviceaccounts",
		"Pod": "pods", "Job": "jobs", "Role": "roles", "RoleBinding": "rolebindings", "Node": "nodes",
		"DaemonSet": "daemonsets", "RuntimeClass": "runtimeclasses",
		"ClusterRole": "clusterroles", "ClusterRoleBinding": "clusterrolebindings",
		"DeviceClass": "deviceclasses", "ResourceSlice": "resourceslices", "ResourceClaim": "resourceclaims",
		"ResourceClaimTemplate": "resourceclaimtemplates",
	}
	res, ok := resources[kind]
	if !ok {
		t.Fatalf("no REST path known for %s", kind)
	}
	prefix := "/apis/" + apiVersion
	if apiVersion == "v1" {
		prefix = "/api/v1"
	}
	if namespace != "" {
		prefix += "/namespaces/" + namespace
	}
	return prefix + "/" + res
}

// create creates obj (a typed object or a map with apiVersion, kind and
// metadata) as the user of token; it returns the status and the stored
// object or the refusal.
func (s *k8sServer) create(t *testing.T, token string, obj any, query string) (int, map[string]any) {
	t.Helper()
	m := k8sUnstructured(t, obj)
	meta, _ := m["metadata"].(map[string]any)
	ns, _ := meta["namespace"].(string)
	code, body := s.do(t, token, "POST", k8sPath(t, m["apiVersion"].(string), m["kind"].(string), ns)+query, m)
	var out map[string]any
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatalf("create %s: the answer is not JSON: %s", m["kind"], body)
	}
	return code, out
}

// mustCreate creates obj as admin and fails the test unless it is created.
func (s *k8sServer) mustCreate(t *testing.T, obj any) {
	t.Helper()
	if code, out := s.create(t, s.admin, obj, ""); code != http.StatusCreated {
		t.Fatalf("creating %v: %d %v", k8sUnstructured(t, obj)["kind"], code, out["message"])
	}
}

// k8sObjects decodes a multi-document YAML text into maps.
func k8sObjects(t *testing.T, text []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, part := range regexp.MustCompile(`(?m)^---\n`).Split(string(text), -1) {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(part), &m); err != nil {
			t.Fatalf("YAML does not parse: %v\n%s", err, part)
		}
		if m != nil {
			out = append(out, m)
		}
	}
	return out
}

// k8sAdmissionObjects returns the objects of deploy/kubernetes/admission.yaml
// and of kubernetes.md's block with the paddle-projects ConfigMap (the
// namespace team-a and its list).
func k8sAdmissionObjects(t *testing.T) []map[string]any {
	t.Helper()
	b, err := os.ReadFile("../deploy/kubernetes/admission.yaml")
	if err != nil {
		t.Fatal(err)
	}
	objs := k8sObjects(t, b)
	doc, err := os.ReadFile("kubernetes.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range k8sYAMLBlock.FindAllSubmatch(doc, -1) {
		if bytes.Contains(b[1], []byte("name: paddle-projects\n")) {
			return append(objs, k8sObjects(t, b[1])...)
		}
	}
	t.Fatal("kubernetes.md has no block with the paddle-projects ConfigMap")
	return nil
}

// k8sPod is a pod of namespace team-a running the Paddle image on a GPU
// with env in its container.
func k8sPod(name string, env ...corev1.EnvVar) *corev1.Pod {
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a", Labels: map[string]string{"paddle.example.com/project": "search_ranking"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "train", Image: "my-registry/paddle:2.6.1-gpu", Args: []string{"python", "train.py"}, Env: env,
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}},
		}}},
	}
}

func k8sLiteral(name, value string) corev1.EnvVar { return corev1.EnvVar{Name: name, Value: value} }

// k8sEventually retries f until it returns "" or the deadline passes (a
// policy takes effect once the API server's informers see it), then fails
// with f's last answer.
func k8sEventually(t *testing.T, what string, f func() string) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		msg := f()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still %s after 90s", what, msg)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

func k8sString(m map[string]any, path ...string) string {
	var v any = m
	for _, p := range path {
		mm, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		v = mm[p]
	}
	switch x := v.(type) {
	case string:
		return x
	case float64:
		return fmt.Sprint(int64(x))
	case nil:
		return ""
	}
	return fmt.Sprint(v)
}

func TestK8sAPIServerAdmission(t *testing.T) {
	s := k8sStartServer(t)

	priority, err := os.ReadFile("../deploy/kubernetes/priority.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range append(k8sObjects(t, priority), k8sAdmissionObjects(t)...) {
		s.mustCreate(t, obj)
	}
	// What a controller manager and a cluster administrator would have
	// made: the namespace's default ServiceAccount, and alice's rights in
	// team-a (the aggregated edit role is filled by the controller manager,
	// so the test grants the same verbs on pods, Jobs and ConfigMaps itself).
	s.mustCreate(t, &corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
		ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "team-a"}})
	s.mustCreate(t, map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
		"metadata": map[string]any{"name": "team", "namespace": "team-a"},
		"rules": []any{
			map[string]any{"apiGroups": []any{""}, "resources": []any{"pods", "configmaps"}, "verbs": []any{"*"}},
			map[string]any{"apiGroups": []any{"batch"}, "resources": []any{"jobs"}, "verbs": []any{"*"}},
		}})
	s.mustCreate(t, map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
		"metadata": map[string]any{"name": "team-alice", "namespace": "team-a"},
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "team"},
		"subjects": []any{map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}}})

	// The policies act once the server's informers have them.
	k8sEventually(t, "the priority policy", func() string {
		code, out := s.create(t, s.alice, k8sPod("probe", k8sLiteral("PADDLE_PRIORITY", "high")), "?dryRun=All")
		if code != http.StatusCreated || k8sString(out, "spec", "priorityClassName") != "paddle-high" {
			return fmt.Sprintf("%d %q %s", code, k8sString(out, "spec", "priorityClassName"), k8sString(out, "message"))
		}
		return ""
	})
	k8sEventually(t, "the project policy", func() string {
		if code, out := s.create(t, s.alice, k8sPod("probe", k8sLiteral("PADDLE_PROJECT", "admin")), "?dryRun=All"); code != http.StatusForbidden {
			return fmt.Sprintf("%d %s", code, k8sString(out, "message"))
		}
		return ""
	})

	fromLabel := func(name, label string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['" + label + "']"}}}
	}
	const denied = `ValidatingAdmissionPolicy 'paddle-labels' with binding 'paddle-labels' denied request: `
	type podCase struct {
		name string
		pod  *corev1.Pod
		// class, priority and preemption policy of the stored pod; or
		// the refusal's message when deny is set.
		class, prio, preempt string
		deny                 string
	}
	tests := []podCase{
		{name: "high", pod: k8sPod("p-high", k8sLiteral("PADDLE_PRIORITY", "high")),
			class: "paddle-high", prio: "100000", preempt: "PreemptLowerPriority"},
		{name: "Medium, any case", pod: k8sPod("p-medium", k8sLiteral("PADDLE_PRIORITY", "Medium")),
			class: "paddle-medium", prio: "10000", preempt: "PreemptLowerPriority"},
		{name: "low never preempts", pod: k8sPod("p-low", k8sLiteral("PADDLE_PRIORITY", "LOW")),
			class: "paddle-low", prio: "1000", preempt: "Never"},
		{name: "a pod that names a class keeps it", pod: func() *corev1.Pod {
			p := k8sPod("p-named", k8sLiteral("PADDLE_PRIORITY", "high"))
			p.Spec.PriorityClassName = "paddle-low"
			return p
		}(), class: "paddle-low", prio: "1000", preempt: "Never"},
		{name: "valueFrom is left alone", pod: func() *corev1.Pod {
			p := k8sPod("p-valuefrom", fromLabel("PADDLE_PRIORITY", "paddle.example.com/priority"))
			p.Labels["paddle.example.com/priority"] = "high"
			return p
		}(), class: "", prio: "0", preempt: "PreemptLowerPriority"},
		{name: "a literal followed by valueFrom: the container sees valueFrom", pod: k8sPod("p-last",
			k8sLiteral("PADDLE_PRIORITY", "high"), fromLabel("PADDLE_PRIORITY", "paddle.example.com/priority")),
			class: "", prio: "0", preempt: "PreemptLowerPriority"},
		{name: "without PADDLE_PRIORITY", pod: k8sPod("p-none", k8sLiteral("PADDLE_TASK_NAME", "resnet50")),
			class: "", prio: "0", preempt: "PreemptLowerPriority"},
		{name: "a value the entrypoint refuses", pod: k8sPod("p-urgent", k8sLiteral("PADDLE_PRIORITY", "urgent")),
			class: "", prio: "0", preempt: "PreemptLowerPriority"},
		{name: "a container without GPUs does not count", pod: func() *corev1.Pod {
			p := k8sPod("p-second")
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "side", Image: "busybox",
				Env: []corev1.EnvVar{k8sLiteral("PADDLE_PRIORITY", "high")}})
			return p
		}(), class: "", prio: "0", preempt: "PreemptLowerPriority"},
		{name: "a second GPU container asking higher: the lowest wins", pod: func() *corev1.Pod {
			p := k8sPod("p-two-gpu", k8sLiteral("PADDLE_PRIORITY", "medium"))
			side := *p.Spec.Containers[0].DeepCopy()
			side.Name, side.Env = "second", []corev1.EnvVar{k8sLiteral("PADDLE_PRIORITY", "high")}
			p.Spec.Containers = append(p.Spec.Containers, side)
			return p
		}(), class: "paddle-medium", prio: "10000", preempt: "PreemptLowerPriority"},
		{name: "a glob of the namespace's list", pod: k8sPod("p-ocr", k8sLiteral("PADDLE_PROJECT", "OCR-invoices"),
			k8sLiteral("PADDLE_PRIORITY", "medium")), class: "paddle-medium", prio: "10000", preempt: "PreemptLowerPriority"},
		{name: "the project from the pod's label", pod: k8sPod("p-label", fromLabel("PADDLE_PROJECT", "paddle.example.com/project")),
			class: "", prio: "0", preempt: "PreemptLowerPriority"},
		{name: "team-a claiming admin", pod: k8sPod("p-admin", k8sLiteral("PADDLE_PROJECT", "admin"), k8sLiteral("PADDLE_PRIORITY", "high")),
			deny: denied + "PADDLE_PROJECT must be a project namespace team-a may claim: search_ranking, ocr-*"},
		{name: "team-a claiming admin through the pod's label", pod: func() *corev1.Pod {
			p := k8sPod("p-admin-label", fromLabel("PADDLE_PROJECT", "paddle.example.com/project"))
			p.Labels["paddle.example.com/project"] = "admin"
			return p
		}(), deny: denied + "PADDLE_PROJECT must be a project namespace team-a may claim: search_ranking, ocr-*"},
		{name: "a project from a Secret", pod: k8sPod("p-secret", corev1.EnvVar{Name: "PADDLE_PROJECT", ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "project"}}}),
			deny: denied + "PADDLE_PROJECT must be set literally or from the pod's label paddle.example.com/project"},
	}
	job := k8sLoad(t).job
	job.Namespace = "team-a"
	argo := k8sArgoPod(job)
	argo.Name, argo.Namespace = "p-argo", "team-a"
	kfp := k8sKFPPod(job)
	kfp.Name, kfp.Namespace = "p-kfp", "team-a"
	// Argo's wait container comes first: the class comes from the GPU
	// container behind it.
	tests = append(tests,
		podCase{name: "an Argo Workflows pod (init, wait, emissary)", pod: argo, class: "paddle-high", prio: "100000", preempt: "PreemptLowerPriority"},
		podCase{name: "a Kubeflow Pipelines pod (launcher)", pod: kfp, class: "paddle-high", prio: "100000", preempt: "PreemptLowerPriority"},
	)
	jobPod := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: *job.Spec.Template.ObjectMeta.DeepCopy(), Spec: *job.Spec.Template.Spec.DeepCopy()}
	jobPod.Name, jobPod.Namespace = "p-job", "team-a"
	tests = append(tests, podCase{name: "the pod of kubernetes.md's Job (PADDLE_PRIORITY=high)", pod: jobPod, class: "paddle-high", prio: "100000", preempt: "PreemptLowerPriority"})

	for _, tt := range tests {
		code, out := s.create(t, s.alice, tt.pod, "")
		if tt.deny != "" {
			if msg := k8sString(out, "message"); code != http.StatusForbidden || !strings.Contains(msg, tt.deny) {
				t.Errorf("%s: %d %q, want 403 with %q", tt.name, code, msg, tt.deny)
			}
			continue
		}
		if code != http.StatusCreated {
			t.Errorf("%s: %d %s", tt.name, code, k8sString(out, "message"))
			continue
		}
		// What the server stored, read back.
		_, body := s.do(t, s.alice, "GET", "/api/v1/namespaces/team-a/pods/"+tt.pod.Name, nil)
		var stored map[string]any
		json.Unmarshal(body, &stored)
		got := [3]string{k8sString(stored, "spec", "priorityClassName"), k8sString(stored, "spec", "priority"), k8sString(stored, "spec", "preemptionPolicy")}
		if want := [3]string{tt.class, tt.prio, tt.preempt}; got != want {
			t.Errorf("%s: priorityClassName, priority, preemptionPolicy = %q, want %q", tt.name, got, want)
		}
	}

	// The Job itself is admitted (the policy checks Jobs too); one with a
	// forged project is refused at creation, before any pod.
	job.TypeMeta = metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"}
	if code, out := s.create(t, s.alice, job, ""); code != http.StatusCreated {
		t.Errorf("kubernetes.md's Job in team-a: %d %s", code, k8sString(out, "message"))
	}
	forged := job.DeepCopy()
	forged.Name = "forged"
	forged.Spec.Template.Labels["paddle.example.com/project"] = "admin"
	if code, out := s.create(t, s.alice, forged, ""); code != http.StatusForbidden ||
		!strings.Contains(k8sString(out, "message"), "may claim: search_ranking, ocr-*") {
		t.Errorf("a Job claiming admin: %d %s", code, k8sString(out, "message"))
	}

	// Every case of the CEL evaluation (kubernetes_test.go) on the real
	// server, in its namespace with its list: the bypasses refused with
	// their message, the pods of the docs admitted with their class.
	m := k8sLoad(t)
	for ns, cm := range k8sParams(t, m) {
		if ns == "team-a" {
			continue
		}
		s.mustCreate(t, &corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
			ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"paddle.example.com/admission": "enforce"}}})
		s.mustCreate(t, &corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
			ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns}})
		s.mustCreate(t, cm)
	}
	k8sEventually(t, "the lists of the other namespaces", func() string {
		code, out := s.create(t, s.admin, k8sPipelinePods(t)[0], "?dryRun=All")
		if code != http.StatusCreated {
			return fmt.Sprintf("%d %s", code, k8sString(out, "message"))
		}
		return ""
	})
	for _, c := range k8sCases(t, m) {
		// Names of their own: the pods and the Job above exist.
		obj := k8sUnstructured(t, c.obj)
		obj["metadata"].(map[string]any)["name"] = "case-" + obj["metadata"].(map[string]any)["name"].(string)
		code, out := s.create(t, s.admin, obj, "?dryRun=All")
		msg := k8sString(out, "message")
		switch {
		case c.deny != "":
			if code != http.StatusForbidden || !strings.HasPrefix(msg[strings.Index(msg, ": ")+2:], denied) || !strings.Contains(msg, c.deny) {
				t.Errorf("%s: %d %q, want 403 with %q", c.name, code, msg, c.deny)
			}
		case code != http.StatusCreated:
			t.Errorf("%s: %d %s", c.name, code, msg)
		case c.class != "-" && k8sString(out, "spec", "priorityClassName") != c.class:
			t.Errorf("%s: priorityClassName %q, want %q", c.name, k8sString(out, "spec", "priorityClassName"), c.class)
		}
	}

	// alice may write ConfigMaps in team-a, but not the list of what
	// team-a may claim; the administrator may.
	patch := map[string]any{"data": map[string]any{"projects": "*"}}
	code, body := s.do(t, s.alice, "PATCH", "/api/v1/namespaces/team-a/configmaps/paddle-projects", patch)
	if want := "only a user who may grant projects in namespace team-a may change its paddle-projects ConfigMap"; code != http.StatusForbidden || !strings.Contains(string(body), want) {
		t.Errorf("alice widening team-a's projects: %d %s, want 403 with %q", code, body, want)
	}
	if code, body := s.do(t, s.alice, "DELETE", "/api/v1/namespaces/team-a/configmaps/paddle-projects", nil); code != http.StatusForbidden {
		t.Errorf("alice deleting team-a's projects: %d %s, want 403", code, body)
	}
	if code, out := s.create(t, s.alice, &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "train-config", Namespace: "team-a"}}, ""); code != http.StatusCreated {
		t.Errorf("alice creating another ConfigMap: %d %s", code, k8sString(out, "message"))
	}
	// A namespace being deleted takes its list with it: the namespace
	// controller (here alice, who has its rights in team-z but not the
	// grant) may delete it then, and only then.
	s.mustCreate(t, &corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{Name: "team-z", Labels: map[string]string{"paddle.example.com/admission": "enforce"}}})
	s.mustCreate(t, &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "paddle-projects", Namespace: "team-z"}, Data: map[string]string{"projects": "nlp"}})
	s.mustCreate(t, map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
		"metadata": map[string]any{"name": "cleanup", "namespace": "team-z"},
		"rules":    []any{map[string]any{"apiGroups": []any{""}, "resources": []any{"configmaps"}, "verbs": []any{"delete"}}}})
	s.mustCreate(t, map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
		"metadata": map[string]any{"name": "cleanup-alice", "namespace": "team-z"},
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cleanup"},
		"subjects": []any{map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}}})
	k8sEventually(t, "alice's rights in team-z", func() string {
		code, body := s.do(t, s.alice, "DELETE", "/api/v1/namespaces/team-z/configmaps/paddle-projects?dryRun=All", nil)
		if code != http.StatusForbidden || !strings.Contains(string(body), "only a user who may grant projects in namespace team-z") {
			return fmt.Sprintf("%d %s", code, body)
		}
		return ""
	})
	if code, body := s.do(t, s.admin, "DELETE", "/api/v1/namespaces/team-z", nil); code != http.StatusOK {
		t.Fatalf("deleting team-z: %d %s", code, body)
	}
	k8sEventually(t, "the list of a namespace being deleted", func() string {
		if code, body := s.do(t, s.alice, "DELETE", "/api/v1/namespaces/team-z/configmaps/paddle-projects", nil); code != http.StatusOK {
			return fmt.Sprintf("%d %s", code, body)
		}
		return ""
	})

	patch = map[string]any{"data": map[string]any{"projects": "search_ranking, ocr-*, admin"}}
	if code, body := s.do(t, s.admin, "PATCH", "/api/v1/namespaces/team-a/configmaps/paddle-projects", patch); code != http.StatusOK {
		t.Fatalf("the administrator granting admin to team-a: %d %s", code, body)
	}
	k8sEventually(t, "team-a's new list", func() string {
		code, out := s.create(t, s.alice, k8sPod("p-admin-granted", k8sLiteral("PADDLE_PROJECT", "admin")), "?dryRun=All")
		if code != http.StatusCreated {
			return fmt.Sprintf("%d %s", code, k8sString(out, "message"))
		}
		return ""
	})
}

// The trap the mutation avoids: the Priority admission plugin runs before
// admission policies and has already given the pod a priority (0, no class),
// so a policy that sets only priorityClassName makes the plugin's second
// pass refuse the pod. The same server, with the policy cut down to that.
func TestK8sAPIServerPriorityNeedsTheValue(t *testing.T) {
	s := k8sStartServer(t)
	priority, err := os.ReadFile("../deploy/kubernetes/priority.yaml")
	if err != nil {
		t.Fatal(err)
	}
	objs := k8sObjects(t, priority)
	found := false
	for _, obj := range objs {
		if obj["kind"] == "MutatingAdmissionPolicy" {
			mut := obj["spec"].(map[string]any)["mutations"].([]any)[0].(map[string]any)
			mut["applyConfiguration"] = map[string]any{"expression": "Object{spec: Object.spec{priorityClassName: variables.className}}"}
			found = true
		}
		s.mustCreate(t, obj)
	}
	if !found {
		t.Fatal("priority.yaml has no MutatingAdmissionPolicy")
	}
	s.mustCreate(t, &corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: metav1.ObjectMeta{Name: "team-a"}})
	s.mustCreate(t, &corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
		ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "team-a"}})
	const want = "the integer value of priority (0) must not be provided in pod spec; priority admission controller computed 100000 from the given PriorityClass name"
	k8sEventually(t, "the cut-down policy", func() string {
		code, out := s.create(t, s.admin, k8sPod("p", k8sLiteral("PADDLE_PRIORITY", "high")), "?dryRun=All")
		if msg := k8sString(out, "message"); code != http.StatusForbidden || !strings.Contains(msg, want) {
			return fmt.Sprintf("%d %q", code, msg)
		}
		return ""
	})
}

// startScheduler starts kube-scheduler against s (a kubeconfig with a
// token of the cluster administrators' group, trusting s's certificate).
func (s *k8sServer) startScheduler(t *testing.T, scheduler string) {
	t.Helper()
	dir := t.TempDir()
	kubeconfig := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster: {server: %q, certificate-authority-data: %q}
users:
- name: scheduler
  user: {token: %q}
contexts:
- name: test
  context: {cluster: test, user: scheduler}
current-context: test
`, s.base, base64.StdEncoding.EncodeToString(s.caPEM), s.admin)
	path := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(path, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	k8sStart(t, filepath.Join(dir, "kube-scheduler.log"), scheduler,
		"--kubeconfig="+path, "--leader-elect=false",
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", k8sFreePort(t)))
}

// k8sGPUPod is a pod of namespace ml asking for gpus GPUs, with
// PADDLE_PRIORITY=priority.
func k8sGPUPod(name, priority string, gpus int) *corev1.Pod {
	p := k8sPod(name, k8sLiteral("PADDLE_PRIORITY", priority))
	p.Namespace = "ml"
	p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse(fmt.Sprint(gpus))}
	return p
}

// getPod reads a pod of namespace ml back.
func (s *k8sServer) getPod(t *testing.T, name string) (int, *corev1.Pod) {
	t.Helper()
	code, body := s.do(t, s.admin, "GET", "/api/v1/namespaces/ml/pods/"+name, nil)
	var p corev1.Pod
	if code == http.StatusOK {
		if err := json.Unmarshal(body, &p); err != nil {
			t.Fatal(err)
		}
	}
	return code, &p
}

// From PADDLE_PRIORITY=high to preemption, with the real scheduler: a node
// with 8 GPUs full of low pods; another low pod waits (low never preempts);
// a high pod asking for 2 GPUs makes the scheduler preempt one low pod
// (DisruptionTarget, PreemptionByScheduler, a Preempted event) and nominate
// the node; once the victim is gone (the test removes it, as the kubelet
// would at the end of its grace period), the high pod is bound there.
func TestK8sAPIServerPreemption(t *testing.T) {
	s := k8sStartServer(t)
	scheduler := filepath.Join(filepath.Dir(k8sMustBinary(t)), "kube-scheduler")
	if _, err := os.Stat(scheduler); err != nil {
		k8sRequireTool(t, "kube-scheduler is not built at %s: run scripts/kube-apiserver.sh", scheduler)
	}
	priority, err := os.ReadFile("../deploy/kubernetes/priority.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range k8sObjects(t, priority) {
		s.mustCreate(t, obj)
	}
	s.mustCreate(t, &corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: metav1.ObjectMeta{Name: "ml"}})
	s.mustCreate(t, &corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
		ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "ml"}})
	capacity := corev1.ResourceList{"cpu": resource.MustParse("64"), "memory": resource.MustParse("512Gi"),
		"pods": resource.MustParse("110"), "nvidia.com/gpu": resource.MustParse("8")}
	s.mustCreate(t, &corev1.Node{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-node-7", Labels: map[string]string{"kubernetes.io/hostname": "gpu-node-7"}},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}})
	// The TaintNodesByCondition plugin taints a new node not-ready; the
	// node lifecycle controller (absent here) would lift it once the
	// kubelet reports Ready.
	if code, body := s.do(t, s.admin, "PATCH", "/api/v1/nodes/gpu-node-7", map[string]any{"spec": map[string]any{"taints": nil}}); code != http.StatusOK {
		t.Fatalf("untainting the node: %d %s", code, body)
	}
	s.startScheduler(t, scheduler)
	k8sEventually(t, "the priority policy", func() string {
		code, out := s.create(t, s.admin, k8sGPUPod("probe", "high", 1), "?dryRun=All")
		if code != http.StatusCreated || k8sString(out, "spec", "priorityClassName") != "paddle-high" {
			return fmt.Sprintf("%d %s", code, k8sString(out, "message"))
		}
		return ""
	})

	bound := func(name string) func() string {
		return func() string {
			if _, p := s.getPod(t, name); p.Spec.NodeName != "gpu-node-7" {
				return fmt.Sprintf("%s not bound (nodeName %q, conditions %v)", name, p.Spec.NodeName, p.Status.Conditions)
			}
			return ""
		}
	}
	for _, name := range []string{"sweep-a", "sweep-b"} {
		s.mustCreate(t, k8sGPUPod(name, "low", 4))
		k8sEventually(t, "the low pod "+name, bound(name))
	}
	// The node is full: a low pod waits and preempts nobody.
	s.mustCreate(t, k8sGPUPod("sweep-c", "low", 1))
	k8sEventually(t, "the waiting low pod", func() string {
		_, p := s.getPod(t, "sweep-c")
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable &&
				c.Message == "0/1 nodes are available: 1 Insufficient nvidia.com/gpu. preemption: not eligible due to preemptionPolicy=Never." {
				return ""
			}
		}
		return fmt.Sprintf("sweep-c: conditions %v", p.Status.Conditions)
	})
	for _, name := range []string{"sweep-a", "sweep-b"} {
		if _, p := s.getPod(t, name); p.DeletionTimestamp != nil {
			t.Fatalf("a low pod preempted %s", name)
		}
	}
	if _, p := s.getPod(t, "sweep-c"); p.Status.NominatedNodeName != "" || p.Spec.PreemptionPolicy == nil || *p.Spec.PreemptionPolicy != corev1.PreemptNever {
		t.Errorf("sweep-c: nominated %q, preemptionPolicy %v", p.Status.NominatedNodeName, p.Spec.PreemptionPolicy)
	}

	// PADDLE_PRIORITY=high: the scheduler preempts one low pod.
	s.mustCreate(t, k8sGPUPod("resnet50", "high", 2))
	var victim string
	k8sEventually(t, "the preemption", func() string {
		_, high := s.getPod(t, "resnet50")
		for _, name := range []string{"sweep-a", "sweep-b"} {
			_, p := s.getPod(t, name)
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue && c.Reason == "PreemptionByScheduler" &&
					p.DeletionTimestamp != nil && high.Status.NominatedNodeName == "gpu-node-7" {
					victim = name
					return ""
				}
			}
		}
		return fmt.Sprintf("resnet50 nominated %q", high.Status.NominatedNodeName)
	})
	// The scheduler's event broadcaster writes the Preempted event on its
	// own goroutine, after the victim's condition and deletion: it is
	// awaited, not read once (CI once read the events before it landed).
	_, high := s.getPod(t, "resnet50")
	k8sEventually(t, "the Preempted event", func() string {
		code, body := s.do(t, s.admin, "GET", "/api/v1/namespaces/ml/events", nil)
		var events corev1.EventList
		json.Unmarshal(body, &events)
		for _, e := range events.Items {
			if e.InvolvedObject.Name == victim && e.Reason == "Preempted" &&
				e.Message == fmt.Sprintf("Preempted by pod %s on node gpu-node-7", high.UID) {
				return ""
			}
		}
		return fmt.Sprintf("no Preempted event for %s naming resnet50's UID %s: %d %v", victim, high.UID, code, events.Items)
	})
	// The kubelet would stop the victim's containers (SIGTERM) and remove
	// the pod after its grace period: here it is removed at once.
	zero := int64(0)
	if code, body := s.do(t, s.admin, "DELETE", "/api/v1/namespaces/ml/pods/"+victim, metav1.DeleteOptions{GracePeriodSeconds: &zero}); code != http.StatusOK {
		t.Fatalf("removing the victim: %d %s", code, body)
	}
	k8sEventually(t, "the high pod on the freed GPUs", bound("resnet50"))
}

// deploy/kubernetes/paddle-node.yaml on the real API server with Pod
// Security admission on (as every kube-apiserver has it): its namespace and
// DaemonSet are created, and the DaemonSet's pod (made here as its
// controller would, on node gpu-node-7) is admitted in that namespace and
// refused, naming hostPID and the host paths, in a namespace that enforces
// baseline, as a team's would.
func TestK8sAPIServerNodeAgent(t *testing.T) {
	s := k8sStartServer(t)
	b, err := os.ReadFile("../deploy/kubernetes/paddle-node.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// The RuntimeClass the NVIDIA GPU Operator makes, which the pod names.
	s.mustCreate(t, map[string]any{"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
		"metadata": map[string]any{"name": "nvidia"}, "handler": "nvidia"})
	var template map[string]any
	for _, obj := range k8sObjects(t, b) {
		s.mustCreate(t, obj)
		if obj["kind"] == "DaemonSet" {
			template = obj["spec"].(map[string]any)["template"].(map[string]any)
		}
	}
	if template == nil {
		t.Fatal("paddle-node.yaml has no DaemonSet")
	}
	s.mustCreate(t, &corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
		ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "paddle-node"}})
	s.mustCreate(t, &corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{"pod-security.kubernetes.io/enforce": "baseline"}}})
	// The pod names its ServiceAccount: one of that name in team-a too, so
	// that Pod Security is what refuses it there.
	for _, sa := range []string{"default", "paddle-node"} {
		s.mustCreate(t, &corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
			ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: "team-a"}})
	}
	pod := func(ns string) map[string]any {
		meta := map[string]any{"name": "paddle-node-x7k2p", "namespace": ns, "labels": template["metadata"].(map[string]any)["labels"]}
		spec := map[string]any{}
		for k, v := range template["spec"].(map[string]any) {
			spec[k] = v
		}
		spec["nodeName"] = "gpu-node-7"
		return map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
	}
	k8sEventually(t, "the agent's pod in its namespace", func() string {
		if code, out := s.create(t, s.admin, pod("paddle-node"), ""); code != http.StatusCreated {
			return fmt.Sprintf("%d %s", code, k8sString(out, "message"))
		}
		return ""
	})
	code, out := s.create(t, s.admin, pod("team-a"), "?dryRun=All")
	msg := k8sString(out, "message")
	for _, want := range []string{`violates PodSecurity "baseline:latest"`, "host namespaces (hostPID=true)", "hostPath volumes"} {
		if code != http.StatusForbidden || !strings.Contains(msg, want) {
			t.Errorf("the agent's pod in a baseline namespace: %d %q, want 403 with %q", code, msg, want)
		}
	}
}
