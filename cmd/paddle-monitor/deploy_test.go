package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/ledger"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/report"
	"github.com/paddle-entrypoint/paddle-entrypoint/test/harness"
)

// TestKubernetesManifest: deploy/kubernetes decodes strictly into the
// Kubernetes types (a misspelt field fails), takes the database URL from a
// Secret and the prices and budgets from its ConfigMap (files the report
// package accepts), protects /metrics, probes /healthz, serves on the
// Service's port 8080, and its settings are ones serve knows.
func TestKubernetesManifest(t *testing.T) {
	b, err := os.ReadFile("../../deploy/kubernetes/paddle-monitor.yaml")
	if err != nil {
		t.Fatal(err)
	}
	docs := bytes.Split(b, []byte("\n---\n"))
	if len(docs) != 6 {
		t.Fatalf("%d documents, want a Deployment, a Service, a ConfigMap, a ServiceAccount, a ClusterRole and its binding", len(docs))
	}
	checkMonitorRBAC(t, docs[3:])
	var cm corev1.ConfigMap
	if err := yaml.UnmarshalStrict(docs[2], &cm); err != nil || cm.Kind != "ConfigMap" {
		t.Fatalf("ConfigMap: %v (%s)", err, cm.Kind)
	}
	var d appsv1.Deployment
	if err := yaml.UnmarshalStrict(docs[0], &d); err != nil {
		t.Fatalf("Deployment: %v", err)
	}
	var svc corev1.Service
	if err := yaml.UnmarshalStrict(docs[1], &svc); err != nil {
		t.Fatalf("Service: %v", err)
	}
	if d.Kind != "Deployment" || svc.Kind != "Service" || svc.Spec.Selector["app.kubernetes.io/name"] != d.Spec.Template.Labels["app.kubernetes.io/name"] {
		t.Fatalf("kinds %s %s, or the Service selects other pods", d.Kind, svc.Kind)
	}
	c := d.Spec.Template.Spec.Containers[0]
	var db *corev1.EnvVar
	for i, e := range c.Env {
		if e.Name == "PADDLE_MONITOR_DB" {
			db = &c.Env[i]
		}
		if !strings.HasPrefix(e.Name, "PADDLE_MONITOR_") {
			t.Errorf("unexpected variable %s", e.Name)
		}
	}
	if db == nil || db.ValueFrom == nil || db.ValueFrom.SecretKeyRef == nil || db.Value != "" {
		t.Fatalf("PADDLE_MONITOR_DB must come from a Secret: %+v", db)
	}
	if c.ReadinessProbe.HTTPGet.Path != "/healthz" || c.LivenessProbe.HTTPGet.Path != "/healthz" {
		t.Errorf("probes do not use /healthz")
	}
	if !slices.Contains(c.Args, "--metrics-auth") {
		t.Errorf("serve %q: /metrics without --metrics-auth tells anyone who runs what and what each project spends", c.Args)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 8080 || svc.Name != "paddle-monitor" || svc.Namespace != "paddle" {
		t.Errorf("Service %s/%s ports %+v, want paddle/paddle-monitor on 8080", svc.Namespace, svc.Name, svc.Spec.Ports)
	}
	// The prices and budgets: the ConfigMap mounted where the arguments
	// look, holding files the report package loads together.
	var mountPath string
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.ConfigMap != nil && v.ConfigMap.Name == cm.Name {
			for _, m := range c.VolumeMounts {
				if m.Name == v.Name {
					mountPath = m.MountPath
				}
			}
		}
	}
	if mountPath == "" {
		t.Fatalf("the ConfigMap %s is not mounted", cm.Name)
	}
	dir := t.TempDir()
	args := slices.Clone(c.Args)
	for i, a := range args {
		if strings.HasPrefix(a, mountPath+"/") {
			name := strings.TrimPrefix(a, mountPath+"/")
			if _, ok := cm.Data[name]; !ok {
				t.Errorf("argument %s names a file the ConfigMap does not hold", a)
			}
			args[i] = filepath.Join(dir, name)
		}
	}
	for name, data := range cm.Data {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	prices, err := report.LoadPrices(filepath.Join(dir, "prices.json"))
	if err != nil {
		t.Errorf("the ConfigMap's prices: %v", err)
	}
	if _, err := report.LoadBudgets(filepath.Join(dir, "budgets.json"), prices, "prices.json"); err != nil {
		t.Errorf("the ConfigMap's budgets: %v", err)
	}
	// No free pod (NODE.md 11, F9): the namespace mapping has a catch-all
	// "unassigned", and serve is given it.
	ns, err := ledger.LoadNamespaceProjects(filepath.Join(dir, "namespaces.json"))
	if p, ok := ns.Project("any-team-namespace"); err != nil || !ok || p != "unassigned" {
		t.Errorf("the ConfigMap's namespaces.json: %v, a namespace not named maps to %q, want unassigned", err, p)
	}
	if i := slices.Index(c.Args, "--namespace-projects"); i < 0 || c.Args[i+1] != mountPath+"/namespaces.json" {
		t.Errorf("serve %q: no --namespace-projects %s/namespaces.json", c.Args, mountPath)
	}
	// The node agents' identity from the cluster, and no shared token.
	if i := slices.Index(c.Args, "--kube-tokenreview"); i < 0 || c.Args[i+1] != "in-cluster" ||
		!slices.Contains(c.Args, "paddle-node/paddle-node") || d.Spec.Template.Spec.ServiceAccountName != "paddle-monitor" {
		t.Errorf("serve %q as %q: want --kube-tokenreview in-cluster --node-service-account paddle-node/paddle-node as paddle-monitor",
			c.Args, d.Spec.Template.Spec.ServiceAccountName)
	}
	// The arguments are accepted by the real binary: serve with them and
	// the variables that are not secrets parses (it then fails on the
	// tokens file, which does not exist here).
	r := runMonitorEnv(t, t.TempDir(), []string{"PADDLE_MONITOR_LOG_FORMAT=json"}, args...)
	if r.code != 1 || !strings.Contains(r.stderr, "tokens file /etc/paddle-monitor/tokens.json: no such file or directory") {
		t.Errorf("serve %v: exit %d %s", c.Args, r.code, r.stderr)
	}
}

// checkMonitorRBAC: the monitor's ServiceAccount may create TokenReviews
// and nothing else (NODE.md 11).
func checkMonitorRBAC(t *testing.T, docs [][]byte) {
	t.Helper()
	var sa corev1.ServiceAccount
	var role rbacv1.ClusterRole
	var bind rbacv1.ClusterRoleBinding
	for i, into := range []any{&sa, &role, &bind} {
		if err := yaml.UnmarshalStrict(docs[i], into); err != nil {
			t.Fatalf("document %d: %v", i+4, err)
		}
	}
	want := []rbacv1.PolicyRule{{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}}}
	if sa.Kind != "ServiceAccount" || role.Kind != "ClusterRole" || fmt.Sprint(role.Rules) != fmt.Sprint(want) {
		t.Errorf("the monitor's rules %+v, want %+v", role.Rules, want)
	}
	if bind.RoleRef.Name != role.Name || len(bind.Subjects) != 1 || bind.Subjects[0].Name != sa.Name || bind.Subjects[0].Namespace != sa.Namespace {
		t.Errorf("the binding %+v does not give %s to %s/%s", bind, role.Name, sa.Namespace, sa.Name)
	}
}

// TestSystemdUnit: systemd-analyze verify accepts the unit (with the binary
// where ExecStart says, in a copy).
func TestSystemdUnit(t *testing.T) {
	analyze := harness.Tool(t, "systemd-analyze")
	b, err := os.ReadFile("../../deploy/systemd/paddle-monitor.service")
	if err != nil {
		t.Fatal(err)
	}
	unit := strings.ReplaceAll(string(b), "/usr/local/bin/paddle-monitor", bin.monitor)
	path := filepath.Join(t.TempDir(), "paddle-monitor.service")
	if err := os.WriteFile(path, []byte(unit), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", path).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}
