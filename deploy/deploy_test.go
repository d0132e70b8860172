// Package deploy holds no code: its tests check the files under deploy/
// the way their users run them (promtool on the Prometheus rules, a parse
// of the Grafana dashboard against the series that exist).
package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor"
	"github.com/paddle-entrypoint/paddle-entrypoint/test/harness"
)

const rulesFile = "prometheus/paddle-rules.yml"

// promtool returns the path of promtool (tool, alerts_e2e_test.go).
func promtool(t *testing.T) string { return harness.Tool(t, "promtool") }

// naiveRulesTest runs the unit tests of testsFile against a copy of the
// rule file ruleFile in which old is replaced by new (a rule without one
// of its reductions), and returns promtool's output and error: the caller
// expects them to fail, so that the shipped tests are shown to prove
// something.
func naiveRulesTest(t *testing.T, ruleFile, testsFile, old, new string) ([]byte, error) {
	t.Helper()
	tool := promtool(t)
	rules, err := os.ReadFile(ruleFile)
	if err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(testsFile)
	if err != nil {
		t.Fatal(err)
	}
	naive := strings.Replace(string(rules), old, new, 1)
	if naive == string(rules) {
		t.Fatalf("%s no longer holds %q, where this test expects it", ruleFile, old)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, filepath.Base(ruleFile)), []byte(naive), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "t.yml"), tests, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(tool, "test", "rules", "t.yml")
	cmd.Dir = dir
	return cmd.CombinedOutput()
}

func TestPromtoolCheckRules(t *testing.T) {
	out, err := exec.Command(promtool(t), "check", "rules", rulesFile).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "SUCCESS: 17 rules found") {
		t.Fatalf("promtool check rules: unexpected output:\n%s", out)
	}
}

// The unit tests of the rules: utilisation and GPU-hours by project and
// owner from DCGM series, two monitor replicas, two tasks claiming one GPU;
// MIG instances (engine activity, joined on UUID and GPU_I_ID), both
// spellings of dcgm-exporter's host label and a time-sliced GPU.
func TestPromtoolTestRules(t *testing.T) {
	cmd := exec.Command(promtool(t), "test", "rules", "paddle-rules.test.yml")
	cmd.Dir = "prometheus"
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "SUCCESS") {
		t.Fatalf("promtool test rules: no SUCCESS in:\n%s", out)
	}
}

// The join breaks without the rules' reduction to one series per UUID: the
// same test data on a rule that joins the raw info series must fail with
// many-to-many matching, so the unit test above proves something.
func TestPromtoolRulesNeedTheReduction(t *testing.T) {
	out, err := naiveRulesTest(t, rulesFile, "prometheus/paddle-rules.test.yml",
		"          uuid:paddle_task_gpu_info:one\n", "          paddle_task_gpu_info\n")
	if err == nil {
		t.Fatalf("the naive join passed the unit tests:\n%s", out)
	}
}

// The same for the queue wait: joined with the raw paddle_task_info, two
// monitor replicas serving one task make the join fail, so the unit test
// of the pod-UID reduction proves something.
func TestPromtoolQueueWaitNeedsTheReduction(t *testing.T) {
	out, err := naiveRulesTest(t, rulesFile, "prometheus/paddle-rules.test.yml",
		"            k8s_pod_uid:paddle_task_info:one\n", "            paddle_task_info\n")
	if err == nil || !strings.Contains(string(out), "k8s_pod_uid:paddle_queue_wait_seconds") {
		t.Fatalf("the naive join passed the queue wait tests (or failed elsewhere):\n%s", out)
	}
}

// recorded returns the names the rules file records.
func recorded(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range regexp.MustCompile(`(?m)^\s*- record: (\S+)$`).FindAllStringSubmatch(string(b), -1) {
		names = append(names, m[1])
	}
	if len(names) == 0 {
		t.Fatal("no recording rule found")
	}
	return names
}

// kubeStateMetrics are kube-state-metrics' pod series the queue wait rules
// read (Unix seconds, labelled namespace, pod, uid).
var kubeStateMetrics = []string{"kube_pod_created", "kube_pod_start_time"}

// dcgm are the dcgm-exporter counters the rules and the dashboard read
// (MIG instances have no DCGM_FI_DEV_GPU_UTIL: their engine activity).
var dcgm = []string{"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_GR_ENGINE_ACTIVE"}

// exported are the series that exist without the rules: the names the
// monitor's task collector describes (the node textfile serves the same
// two), and dcgm's.
func exported(t *testing.T) []string {
	t.Helper()
	ch := make(chan *prometheus.Desc, 16)
	monitor.NewTaskCollector(nil, time.Hour, nil).Describe(ch)
	close(ch)
	names := slices.Clone(dcgm)
	for d := range ch {
		m := regexp.MustCompile(`fqName: "([^"]+)"`).FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("no name in %s", d)
		}
		names = append(names, m[1])
	}
	for _, want := range []string{"paddle_task_info", "paddle_task_gpu_info"} {
		if !slices.Contains(names, want) {
			t.Fatalf("the monitor no longer exports %s (it exports %v)", want, names)
		}
	}
	return names
}

var (
	quoted   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	braces   = regexp.MustCompile(`\{[^}]*\}`)
	brackets = regexp.MustCompile(`\[[^\]]*\]`)
	ident    = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*`)
)

// labelLists are the PromQL keywords followed by a list of label names.
var labelLists = []string{"by", "without", "on", "ignoring", "group_left", "group_right"}

// keywords are PromQL's binary keywords and its aggregation operators (which
// may take their by clause before the parenthesis).
var keywords = []string{"bool", "offset", "and", "or", "unless", "inf", "nan",
	"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
	"bottomk", "topk", "quantile"}

// metricNames returns the metric names a PromQL expression reads: every
// identifier that is not a function or aggregation (followed by "("), not
// a keyword, not inside a label list, a selector's braces, a range or a
// string.
func metricNames(expr string) []string {
	s := quoted.ReplaceAllString(expr, `""`)
	s = braces.ReplaceAllString(s, " ")
	s = brackets.ReplaceAllString(s, " ")
	var names []string
	for i := 0; i < len(s); {
		loc := ident.FindStringIndex(s[i:])
		if loc == nil {
			break
		}
		start, end := i+loc[0], i+loc[1]
		word := s[start:end]
		i = end
		if start > 0 && (s[start-1] >= '0' && s[start-1] <= '9' || s[start-1] == '.') {
			continue // the tail of a number such as 1e3
		}
		rest := strings.TrimLeft(s[end:], " \t\n")
		if slices.Contains(labelLists, strings.ToLower(word)) && strings.HasPrefix(rest, "(") {
			close := strings.IndexByte(rest, ')')
			i = len(s) - len(rest) + close + 1
			continue
		}
		if strings.HasPrefix(rest, "(") || slices.Contains(keywords, strings.ToLower(word)) {
			continue
		}
		names = append(names, word)
	}
	return names
}

func TestMetricNames(t *testing.T) {
	for expr, want := range map[string][]string{
		`sum by (project, owner) (sum_over_time(a:b:c{project=~"x|y"}[$__range:1h]))`:   {"a:b:c"},
		`count(DCGM_FI_DEV_GPU_UTIL unless on (UUID) x_one)`:                            {"DCGM_FI_DEV_GPU_UTIL", "x_one"},
		`max by (UUID) (m) * on (UUID) group_left (task_id, project) n / 60 > bool 1e3`: {"m", "n"},
		`rate(http_requests_total{code="by(x)"}[5m]) offset 5m`:                         {"http_requests_total"},
	} {
		if got := metricNames(expr); !slices.Equal(got, want) {
			t.Errorf("metricNames(%q) = %q, want %q", expr, got, want)
		}
	}
}

// The rules read only series that exist.
func TestRulesReadExistingSeries(t *testing.T) {
	b, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	known := append(append(append(recorded(t), exported(t)...), kubeStateMetrics...), "up")
	exprs := regexp.MustCompile(`(?s)expr: \|?\n?(.*?)(?:\n\s*\n|\n\s*- record:|\z)`).FindAllStringSubmatch(string(b), -1)
	if len(exprs) != 17 {
		t.Fatalf("found %d rule expressions, want 17", len(exprs))
	}
	for _, m := range exprs {
		for _, name := range metricNames(m[1]) {
			if !slices.Contains(known, name) {
				t.Errorf("rule expression reads %q, which nothing exports:\n%s", name, m[1])
			}
		}
	}
}

type dashboard struct {
	Title      string  `json:"title"`
	UID        string  `json:"uid"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID      int    `json:"id"`
	Title   string `json:"title"`
	Type    string `json:"type"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

// The dashboard parses, every panel has a query, and every query reads only
// recorded rules and exported series; promtool accepts every query (as a
// recording rule, with Grafana's variables given values).
func TestGrafanaDashboard(t *testing.T) {
	b, err := os.ReadFile("grafana/paddle-gpu.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	dec := json.NewDecoder(strings.NewReader(string(b)))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("grafana/paddle-gpu.json: %v", err)
	}
	if d.Title == "" || d.UID == "" || len(d.Panels) < 5 {
		t.Fatalf("dashboard: title %q, uid %q, %d panels", d.Title, d.UID, len(d.Panels))
	}
	known := append(recorded(t), exported(t)...)
	var exprs []string
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel %q: id %d used twice", p.Title, p.ID)
		}
		ids[p.ID] = true
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			if len(metricNames(tg.Expr)) == 0 {
				t.Errorf("panel %q: query %q reads no series", p.Title, tg.Expr)
			}
			for _, name := range metricNames(tg.Expr) {
				if !slices.Contains(known, name) {
					t.Errorf("panel %q: query reads %q, which no rule records and nothing exports", p.Title, name)
				}
			}
			exprs = append(exprs, tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if q, ok := v.Query.(map[string]any); ok {
			m := regexp.MustCompile(`label_values\(([^,]+),`).FindStringSubmatch(q["query"].(string))
			if m == nil || !slices.Contains(known, m[1]) {
				t.Errorf("variable %s: query %v reads no known series", v.Name, q["query"])
			}
		}
	}

	tool := promtool(t)
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	vars := strings.NewReplacer("$__range", "30d", `"$project"`, `".*"`)
	for i, e := range exprs {
		q, _ := json.Marshal(vars.Replace(e))
		rules.WriteString("      - record: dashboard:query" + string(rune('a'+i)) + "\n        expr: " + string(q) + "\n")
	}
	file := filepath.Join(t.TempDir(), "dashboard-queries.yml")
	if err := os.WriteFile(file, []byte(rules.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(tool, "check", "rules", file).CombinedOutput(); err != nil {
		t.Fatalf("promtool rejects a dashboard query: %v\n%s\n%s", err, out, rules.String())
	}
}

// priority.yaml decoded strictly with k8s.io/api: the three classes (low
// never preempts), and the mutation's own copy of their names, values and
// preemption policies agrees with them (the real API server refuses a pod
// whose priority disagrees with its class: docs/kubernetes_apiserver_test.go).
func TestPriorityManifest(t *testing.T) {
	b, err := os.ReadFile("kubernetes/priority.yaml")
	if err != nil {
		t.Fatal(err)
	}
	classes := map[string]*schedulingv1.PriorityClass{}
	var policy *admissionv1.MutatingAdmissionPolicy
	var binding *admissionv1.MutatingAdmissionPolicyBinding
	for _, part := range strings.Split(string(b), "\n---\n") {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(part), &tm); err != nil {
			t.Fatalf("does not parse: %v", err)
		}
		var obj any
		pc := &schedulingv1.PriorityClass{}
		switch tm.APIVersion + " " + tm.Kind {
		case "scheduling.k8s.io/v1 PriorityClass":
			obj = pc
		case "admissionregistration.k8s.io/v1 MutatingAdmissionPolicy":
			policy = &admissionv1.MutatingAdmissionPolicy{}
			obj = policy
		case "admissionregistration.k8s.io/v1 MutatingAdmissionPolicyBinding":
			binding = &admissionv1.MutatingAdmissionPolicyBinding{}
			obj = binding
		default:
			t.Fatalf("priority.yaml has a %s %s this test does not check", tm.APIVersion, tm.Kind)
		}
		if err := yaml.UnmarshalStrict([]byte(part), obj); err != nil {
			t.Fatalf("%s does not decode strictly: %v", tm.Kind, err)
		}
		if obj == pc {
			classes[pc.Name] = pc
		}
	}
	if policy == nil || binding == nil || binding.Spec.PolicyName != policy.Name {
		t.Fatalf("no MutatingAdmissionPolicy with its binding (policy %v, binding %v)", policy != nil, binding)
	}
	if len(classes) != 3 {
		t.Errorf("%d PriorityClasses, want 3", len(classes))
	}
	vars := map[string]string{}
	for _, v := range policy.Spec.Variables {
		vars[v.Name] = v.Expression
	}
	for _, c := range []struct {
		level, name string
		value       int32
		preempt     corev1.PreemptionPolicy
	}{
		{"high", "paddle-high", 100000, corev1.PreemptLowerPriority},
		{"medium", "paddle-medium", 10000, corev1.PreemptLowerPriority},
		{"low", "paddle-low", 1000, corev1.PreemptNever},
	} {
		pc := classes[c.name]
		if pc == nil {
			t.Errorf("no PriorityClass %s", c.name)
			continue
		}
		if pc.Value != c.value || pc.PreemptionPolicy == nil || *pc.PreemptionPolicy != c.preempt || pc.GlobalDefault {
			t.Errorf("%s: value %d, preemptionPolicy %v, globalDefault %v; want %d, %s, false",
				c.name, pc.Value, pc.PreemptionPolicy, pc.GlobalDefault, c.value, c.preempt)
		}
		for v, want := range map[string]string{"className": "'" + c.name + "'", "value": fmt.Sprint(c.value), "preemptionPolicy": "'" + string(c.preempt) + "'"} {
			if !strings.Contains(vars[v], "'"+c.level+"': "+want) {
				t.Errorf("variable %s does not map %s to %s: %s", v, c.level, want, vars[v])
			}
		}
	}
}
