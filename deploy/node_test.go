package deploy

// deploy/kubernetes/paddle-node.yaml, decoded strictly into the Kubernetes
// types and judged by the Pod Security evaluator clusters run: what the
// node agent needs (docs/node.md), and nothing it must not take (a GPU).
// docs/kubernetes_apiserver_test.go creates its pod on a real API server.

import (
	"bytes"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	psaapi "k8s.io/pod-security-admission/api"
	psapolicy "k8s.io/pod-security-admission/policy"
	"sigs.k8s.io/yaml"
)

func loadNodeAgent(t *testing.T) (*corev1.Namespace, *appsv1.DaemonSet) {
	t.Helper()
	m := loadNodeAgentAll(t)
	return m.ns, m.ds
}

// nodeAgentObjects are paddle-node.yaml's documents, each decoded strictly.
type nodeAgentObjects struct {
	ns      *corev1.Namespace
	ds      *appsv1.DaemonSet
	sa      *corev1.ServiceAccount
	role    *rbacv1.ClusterRole
	binding *rbacv1.ClusterRoleBinding
}

func loadNodeAgentAll(t *testing.T) nodeAgentObjects {
	t.Helper()
	b, err := os.ReadFile("kubernetes/paddle-node.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var m nodeAgentObjects
	for _, part := range bytes.Split(b, []byte("\n---\n")) {
		var tm struct {
			Kind string `json:"kind"`
		}
		if err := yaml.Unmarshal(part, &tm); err != nil {
			t.Fatal(err)
		}
		var obj any
		switch tm.Kind {
		case "Namespace":
			m.ns = &corev1.Namespace{}
			obj = m.ns
		case "DaemonSet":
			m.ds = &appsv1.DaemonSet{}
			obj = m.ds
		case "ServiceAccount":
			m.sa = &corev1.ServiceAccount{}
			obj = m.sa
		case "ClusterRole":
			m.role = &rbacv1.ClusterRole{}
			obj = m.role
		case "ClusterRoleBinding":
			m.binding = &rbacv1.ClusterRoleBinding{}
			obj = m.binding
		default:
			t.Fatalf("paddle-node.yaml holds a %q this test does not check", tm.Kind)
		}
		if err := yaml.UnmarshalStrict(part, obj); err != nil {
			t.Fatalf("%s: %v", tm.Kind, err)
		}
	}
	if m.ns == nil || m.ds == nil {
		t.Fatalf("paddle-node.yaml lacks its Namespace or DaemonSet")
	}
	return m
}

// TestNodeAgentRBAC: the agent's ServiceAccount may get, list and watch
// ResourceSlices and ResourceClaims (DRA claims, NODE.md 10) and nothing
// else; the DaemonSet runs as it with the API token mounted where a pod's
// client looks for it, and nothing else automounted.
func TestNodeAgentRBAC(t *testing.T) {
	m := loadNodeAgentAll(t)
	if m.sa == nil || m.role == nil || m.binding == nil {
		t.Fatalf("ServiceAccount %v, ClusterRole %v, ClusterRoleBinding %v", m.sa != nil, m.role != nil, m.binding != nil)
	}
	want := []rbacv1.PolicyRule{{APIGroups: []string{"resource.k8s.io"}, Resources: []string{"resourceslices", "resourceclaims"}, Verbs: []string{"get", "list", "watch"}}}
	if got, _ := json.Marshal(m.role.Rules); string(got) != string(must(json.Marshal(want))) {
		t.Errorf("the agent's rules %s, want exactly %s", got, must(json.Marshal(want)))
	}
	if m.binding.RoleRef.Name != m.role.Name || m.binding.RoleRef.Kind != "ClusterRole" || len(m.binding.Subjects) != 1 ||
		m.binding.Subjects[0].Kind != "ServiceAccount" || m.binding.Subjects[0].Name != m.sa.Name || m.binding.Subjects[0].Namespace != m.ds.Namespace {
		t.Errorf("the binding %+v does not give %s to %s/%s", m.binding, m.role.Name, m.ds.Namespace, m.sa.Name)
	}
	spec := m.ds.Spec.Template.Spec
	if spec.ServiceAccountName != m.sa.Name || spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Errorf("serviceAccountName %q automount %v: want %q, not automounted", spec.ServiceAccountName, spec.AutomountServiceAccountToken, m.sa.Name)
	}
	mounted := false
	for _, vm := range spec.Containers[0].VolumeMounts {
		if vm.MountPath == "/var/run/secrets/kubernetes.io/serviceaccount" && vm.ReadOnly {
			for _, v := range spec.Volumes {
				if v.Name == vm.Name && v.Projected != nil {
					for _, src := range v.Projected.Sources {
						if src.ServiceAccountToken != nil && src.ServiceAccountToken.Path == "token" && src.ServiceAccountToken.Audience == "" {
							mounted = true
						}
					}
				}
			}
		}
	}
	if !mounted {
		t.Error("no projected API server token at /var/run/secrets/kubernetes.io/serviceaccount/token")
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

func TestNodeAgentManifest(t *testing.T) {
	ns, ds := loadNodeAgent(t)
	spec := ds.Spec.Template.Spec
	if ds.Namespace != ns.Name || ns.Labels[psaapi.EnforceLevelLabel] != string(psaapi.LevelPrivileged) {
		t.Errorf("the DaemonSet is in %q; its namespace %q enforces %q, want privileged", ds.Namespace, ns.Name, ns.Labels[psaapi.EnforceLevelLabel])
	}
	if !spec.HostPID || spec.RuntimeClassName == nil || *spec.RuntimeClassName != "nvidia" {
		t.Errorf("hostPID %v, runtimeClassName %v", spec.HostPID, spec.RuntimeClassName)
	}
	if len(spec.Containers) != 1 || len(spec.InitContainers) != 0 {
		t.Fatalf("%d containers, %d init containers, want the agent alone", len(spec.Containers), len(spec.InitContainers))
	}
	c := spec.Containers[0]
	sc := c.SecurityContext
	if sc == nil || sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Add, "SYS_PTRACE") ||
		!slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || sc.Privileged == nil || *sc.Privileged ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.RunAsUser == nil || *sc.RunAsUser != 0 {
		t.Errorf("securityContext %+v: want root with SYS_PTRACE, every other capability dropped, not privileged", sc)
	}
	// It must not take a GPU from training: no nvidia.com resource at all.
	for _, l := range []corev1.ResourceList{c.Resources.Requests, c.Resources.Limits} {
		for r := range l {
			if strings.HasPrefix(string(r), "nvidia.com/") {
				t.Errorf("the agent asks for %s", r)
			}
		}
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources %+v: want CPU and memory requests and a memory limit", c.Resources)
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	if e := env["NODE_NAME"]; e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "spec.nodeName" {
		t.Errorf("NODE_NAME is not the downward API's spec.nodeName: %+v", e)
	}
	if env["NVIDIA_VISIBLE_DEVICES"].Value != "all" {
		t.Errorf("NVIDIA_VISIBLE_DEVICES %q, want all", env["NVIDIA_VISIBLE_DEVICES"].Value)
	}
	if _, ok := env["PADDLE_NODE_FINAL"]; ok {
		t.Error("PADDLE_NODE_FINAL is set: every rolling update would end the nodes' capacity")
	}
	// The preStop hook: the image's paddle-node (the Dockerfile's
	// ENTRYPOINT) marks the report sent at SIGTERM final, beside the spool
	// the agent keeps on the node's hostPath.
	entry := dockerEntrypoint(t, "node/Dockerfile")
	wantHook := []string{entry, "final", "--report-spool", "/var/lib/paddle-node/reports.db"}
	if l := c.Lifecycle; l == nil || l.PreStop == nil || l.PreStop.Exec == nil || !slices.Equal(l.PreStop.Exec.Command, wantHook) {
		t.Errorf("lifecycle %+v: want a preStop exec of %q", l, wantHook)
	}
	// The token: the pod's projected ServiceAccount token for the audience
	// paddle-monitor (bound to the pod, so to its node; NODE.md 11), at the
	// file PADDLE_NODE_TOKEN_FILE names, no API token besides and no
	// shared Secret; the host paths the agent reads and writes.
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Error("the pod mounts the ServiceAccount's API token: only the projected token for the monitor is needed")
	}
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	vols := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		vols[v.Name] = v
	}
	tok := vols["token"]
	projected := tok.Projected != nil && len(tok.Projected.Sources) == 1 && tok.Projected.Sources[0].ServiceAccountToken != nil &&
		tok.Projected.Sources[0].ServiceAccountToken.Audience == "paddle-monitor"
	if !projected || env["PADDLE_NODE_TOKEN_FILE"].Value != mounts["token"]+"/"+tok.Projected.Sources[0].ServiceAccountToken.Path {
		t.Errorf("the token: volume %+v at %q, PADDLE_NODE_TOKEN_FILE %q: want the projected token of audience paddle-monitor",
			tok, mounts["token"], env["PADDLE_NODE_TOKEN_FILE"].Value)
	}
	for _, v := range spec.Volumes {
		if v.Secret != nil {
			t.Errorf("volume %s is a Secret: no token is shared between nodes", v.Name)
		}
	}
	for name, path := range map[string]string{"pod-resources": "/var/lib/kubelet/pod-resources",
		"cri-socket": "/run/containerd/containerd.sock", "spool": "/var/lib/paddle-node"} {
		if v := vols[name]; v.HostPath == nil || v.HostPath.Path != path || mounts[name] != path {
			t.Errorf("volume %s: %+v mounted at %q, want the host's %s at the same path", name, v.HostPath, mounts[name], path)
		}
	}
	if !strings.HasPrefix(wantHook[3], mounts["spool"]+"/") {
		t.Errorf("the hook's spool %s is not on the spool volume at %s", wantHook[3], mounts["spool"])
	}
	tolerates := false
	for _, tl := range spec.Tolerations {
		if tl.Key == "nvidia.com/gpu" && tl.Operator == corev1.TolerationOpExists && tl.Effect == corev1.TaintEffectNoSchedule {
			tolerates = true
		}
	}
	if !tolerates {
		t.Errorf("no toleration of the nvidia.com/gpu NoSchedule taint: %+v", spec.Tolerations)
	}
	if len(c.Ports) != 1 || c.Ports[0].HostPort != 9402 || !slices.Contains(c.Args, "0.0.0.0:9402") {
		t.Errorf("ports %+v, args %q: want --listen on the host's port 9402", c.Ports, c.Args)
	}
	// Prometheus scrapes that port as job paddle-node.
	for _, sc := range loadPromConfig(t).ScrapeConfigs {
		if sc.JobName == "paddle-node" && (len(sc.StaticConfigs) == 0 || !strings.HasSuffix(sc.StaticConfigs[0].Targets[0], ":9402")) {
			t.Errorf("the paddle-node scrape job's targets %+v are not port 9402", sc.StaticConfigs)
		}
	}
}

// Pod Security: the namespace's level admits the agent's pod; restricted
// and baseline, what training namespaces run, refuse it (so it needs the
// namespace of its own the manifest makes).
func TestNodeAgentPodSecurity(t *testing.T) {
	ns, ds := loadNodeAgent(t)
	ev, err := psapolicy.NewEvaluator(psapolicy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := ds.Spec.Template
	check := func(level psaapi.Level) psapolicy.AggregateCheckResult {
		return psapolicy.AggregateCheckResults(ev.EvaluatePod(psaapi.LevelVersion{Level: level, Version: psaapi.LatestVersion()}, &tmpl.ObjectMeta, &tmpl.Spec))
	}
	level, err := psaapi.ParseLevel(ns.Labels[psaapi.EnforceLevelLabel])
	if err != nil {
		t.Fatal(err)
	}
	if r := check(level); !r.Allowed {
		t.Errorf("refused by its namespace's level %s: %s", level, r.ForbiddenDetail())
	}
	for _, l := range []psaapi.Level{psaapi.LevelBaseline, psaapi.LevelRestricted} {
		r := check(l)
		if reason := r.ForbiddenReason(); r.Allowed || !strings.Contains(reason, "host namespaces") ||
			!strings.Contains(reason, "hostPath volumes") && !strings.Contains(reason, "restricted volume types") {
			t.Errorf("at %s: allowed %v (%s), want refused for hostPID and hostPath", l, r.Allowed, r.ForbiddenReason())
		}
	}
}

// dockerEntrypoint is the executable of a Dockerfile's exec-form
// ENTRYPOINT.
func dockerEntrypoint(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "ENTRYPOINT "); ok {
			var argv []string
			if err := json.Unmarshal([]byte(rest), &argv); err != nil || len(argv) == 0 {
				t.Fatalf("%s: ENTRYPOINT %s is not an exec-form list: %v", path, rest, err)
			}
			return argv[0]
		}
	}
	t.Fatalf("%s: no ENTRYPOINT", path)
	return ""
}
