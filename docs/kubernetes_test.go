package docs

// The manifests of kubernetes.md, checked with the libraries clusters use:
// strict decoding into k8s.io/api types, the Pod Security Admission
// evaluator, and the ValidatingAdmissionPolicy's CEL evaluated with cel-go
// against the Job and against Argo- and Kubeflow-like pods. Helpers are
// prefixed k8s: other tests share this package.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/ext"
	"github.com/paddle-entrypoint/paddle-entrypoint/labels"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	psaapi "k8s.io/pod-security-admission/api"
	psapolicy "k8s.io/pod-security-admission/policy"
	"sigs.k8s.io/yaml"
)

// k8sManifests are the objects of kubernetes.md's complete YAML blocks.
type k8sManifests struct {
	job        *batchv1.Job
	daemonSet  *appsv1.DaemonSet
	namespaces map[string]*corev1.Namespace
	configMaps map[string]*corev1.ConfigMap // by namespace/name
	// kueueClasses are Kueue's WorkloadPriorityClasses, by name.
	kueueClasses map[string]*k8sWorkloadPriorityClass
	// policy and binding are paddle-labels; guard and guardBinding the
	// policy that keeps a namespace's paddle-projects list from its users.
	policy, guard         *admissionv1.ValidatingAdmissionPolicy
	binding, guardBinding *admissionv1.ValidatingAdmissionPolicyBinding
}

var k8sYAMLBlock = regexp.MustCompile("(?s)```yaml\n(.*?)```")

// k8sLoad decodes every YAML block of kubernetes.md that is a whole object
// (has apiVersion and kind) strictly: an unknown or misspelt field fails.
// Fragments (a volume to swap in) are decoded as what they claim to be by
// the tests that use them.
func k8sLoad(t *testing.T) k8sManifests {
	t.Helper()
	doc, err := os.ReadFile("kubernetes.md")
	if err != nil {
		t.Fatal(err)
	}
	m := k8sManifests{namespaces: map[string]*corev1.Namespace{}, configMaps: map[string]*corev1.ConfigMap{},
		kueueClasses: map[string]*k8sWorkloadPriorityClass{}}
	for _, block := range k8sYAMLBlock.FindAllSubmatch(doc, -1) {
		if bytes.HasPrefix(block[1], []byte("- ")) {
			continue // a fragment: a list to splice into a manifest
		}
		for _, part := range bytes.Split(block[1], []byte("\n---\n")) {
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal(part, &tm); err != nil {
				t.Fatalf("YAML block does not parse: %v\n%s", err, part)
			}
			if tm.Kind == "" {
				continue
			}
			var obj any
			after := func() {} // files the decoded object
			switch tm.APIVersion + " " + tm.Kind {
			case "batch/v1 Job":
				m.job = &batchv1.Job{}
				obj = m.job
			case "apps/v1 DaemonSet":
				m.daemonSet = &appsv1.DaemonSet{}
				obj = m.daemonSet
			case "v1 Namespace":
				ns := &corev1.Namespace{}
				obj, after = ns, func() { m.namespaces[ns.Name] = ns }
			case "kueue.x-k8s.io/v1beta1 WorkloadPriorityClass":
				c := &k8sWorkloadPriorityClass{}
				obj, after = c, func() { m.kueueClasses[c.Name] = c }
			case "v1 ConfigMap":
				cm := &corev1.ConfigMap{}
				obj, after = cm, func() { m.configMaps[cm.Namespace+"/"+cm.Name] = cm }
			case "admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy":
				p := &admissionv1.ValidatingAdmissionPolicy{}
				obj, after = p, func() {
					if p.Name == "paddle-projects-guard" {
						m.guard = p
					} else {
						m.policy = p
					}
				}
			case "admissionregistration.k8s.io/v1 ValidatingAdmissionPolicyBinding":
				b := &admissionv1.ValidatingAdmissionPolicyBinding{}
				obj, after = b, func() {
					if b.Name == "paddle-projects-guard" {
						m.guardBinding = b
					} else {
						m.binding = b
					}
				}
			default:
				t.Fatalf("kubernetes.md has a %s %s that this test does not check", tm.APIVersion, tm.Kind)
			}
			if err := yaml.UnmarshalStrict(part, obj); err != nil {
				t.Fatalf("%s does not decode strictly: %v", tm.Kind, err)
			}
			after()
		}
	}
	if m.job == nil || m.daemonSet == nil || m.policy == nil || m.binding == nil || m.guard == nil || m.guardBinding == nil {
		t.Fatalf("kubernetes.md lacks a manifest: job %v, daemonset %v, policy %v, binding %v, guard %v, its binding %v",
			m.job != nil, m.daemonSet != nil, m.policy != nil, m.binding != nil, m.guard != nil, m.guardBinding != nil)
	}
	return m
}

// k8sWorkloadPriorityClass is Kueue's WorkloadPriorityClass
// (kueue.x-k8s.io/v1beta1), whose fields are these (Kueue's API is not a
// dependency of this repository).
type k8sWorkloadPriorityClass struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Value             int32  `json:"value"`
	Description       string `json:"description,omitempty"`
}

// The WorkloadPriorityClass the page shows for Kueue has the value of the
// PriorityClass of the same name, so Kueue orders Workloads as the
// scheduler orders their pods.
func TestK8sKueueClassMatchesPriorityClass(t *testing.T) {
	m := k8sLoad(t)
	b, err := os.ReadFile("../deploy/kubernetes/priority.yaml")
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]int32{}
	for _, part := range bytes.Split(b, []byte("\n---\n")) {
		var pc schedulingv1.PriorityClass
		if err := yaml.Unmarshal(part, &pc); err == nil && pc.Kind == "PriorityClass" {
			values[pc.Name] = pc.Value
		}
	}
	if len(m.kueueClasses) == 0 {
		t.Fatal("kubernetes.md shows no WorkloadPriorityClass")
	}
	for name, c := range m.kueueClasses {
		if v, ok := values[name]; !ok || v != c.Value {
			t.Errorf("WorkloadPriorityClass %s has value %d; the PriorityClass of that name: %d (exists %v)", name, c.Value, v, ok)
		}
	}
}

// k8sPSA evaluates a pod template at a Pod Security level, latest version.
func k8sPSA(t *testing.T, level psaapi.Level, tmpl corev1.PodTemplateSpec) psapolicy.AggregateCheckResult {
	t.Helper()
	ev, err := psapolicy.NewEvaluator(psapolicy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	lv := psaapi.LevelVersion{Level: level, Version: psaapi.LatestVersion()}
	return psapolicy.AggregateCheckResults(ev.EvaluatePod(lv, &tmpl.ObjectMeta, &tmpl.Spec))
}

func TestK8sJobPassesRestricted(t *testing.T) {
	m := k8sLoad(t)
	if r := k8sPSA(t, psaapi.LevelRestricted, m.job.Spec.Template); !r.Allowed {
		t.Errorf("the Job's pod is refused by Pod Security restricted: %s", r.ForbiddenDetail())
	}
	for _, v := range m.job.Spec.Template.Spec.Volumes {
		if v.HostPath != nil {
			t.Errorf("the Job mounts a hostPath (%s)", v.Name)
		}
	}
}

// The CSI variant of the spool volume keeps the Job restricted.
func TestK8sCSISpoolPassesRestricted(t *testing.T) {
	doc, _ := os.ReadFile("kubernetes.md")
	var csi *corev1.Volume
	for _, block := range k8sYAMLBlock.FindAllSubmatch(doc, -1) {
		if bytes.HasPrefix(block[1], []byte("- name: spool\n  csi:")) {
			var vols []corev1.Volume
			if err := yaml.UnmarshalStrict(block[1], &vols); err != nil || len(vols) != 1 {
				t.Fatalf("CSI volume block: %v", err)
			}
			csi = &vols[0]
		}
	}
	if csi == nil || csi.CSI == nil {
		t.Fatal("kubernetes.md shows no CSI spool volume")
	}
	tmpl := *k8sLoad(t).job.Spec.Template.DeepCopy()
	for i, v := range tmpl.Spec.Volumes {
		if v.Name == "spool" {
			tmpl.Spec.Volumes[i] = *csi
		}
	}
	if r := k8sPSA(t, psaapi.LevelRestricted, tmpl); !r.Allowed {
		t.Errorf("the Job with the CSI spool is refused by restricted: %s", r.ForbiddenDetail())
	}
}

// The drainer needs more than restricted (hostPath, root): its own
// namespace admits it, and that is what the page says.
func TestK8sDrainerNamespaceAdmitsIt(t *testing.T) {
	m := k8sLoad(t)
	tmpl := m.daemonSet.Spec.Template
	if r := k8sPSA(t, psaapi.LevelRestricted, tmpl); r.Allowed || !strings.Contains(r.ForbiddenReason(), "restricted volume types") {
		t.Errorf("drainer at restricted: allowed %v (%s); the page says it needs more", r.Allowed, r.ForbiddenReason())
	}
	ns, ok := m.namespaces[m.daemonSet.Namespace]
	if !ok {
		t.Fatalf("no Namespace manifest for the drainer's namespace %q", m.daemonSet.Namespace)
	}
	level, err := psaapi.ParseLevel(ns.Labels[psaapi.EnforceLevelLabel])
	if err != nil {
		t.Fatalf("namespace %s: %v", ns.Name, err)
	}
	if r := k8sPSA(t, level, tmpl); !r.Allowed {
		t.Errorf("drainer refused by its namespace's level %s: %s", level, r.ForbiddenDetail())
	}
}

func TestK8sPodFailurePolicy(t *testing.T) {
	job := k8sLoad(t).job
	if job.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("restartPolicy %q: a podFailurePolicy needs Never", job.Spec.Template.Spec.RestartPolicy)
	}
	found := false
	if pfp := job.Spec.PodFailurePolicy; pfp != nil {
		for _, r := range pfp.Rules {
			ec := r.OnExitCodes
			if r.Action == batchv1.PodFailurePolicyActionFailJob && ec != nil &&
				ec.Operator == batchv1.PodFailurePolicyOnExitCodesOpIn && len(ec.Values) == 1 && ec.Values[0] == 65 &&
				ec.ContainerName != nil && *ec.ContainerName == job.Spec.Template.Spec.Containers[0].Name {
				found = true
			}
		}
	}
	if !found {
		t.Error("no podFailurePolicy rule failing the Job on exit 65 of the training container")
	}
}

func TestK8sBindingNamesThePolicy(t *testing.T) {
	m := k8sLoad(t)
	if m.binding.Spec.PolicyName != m.policy.Name {
		t.Errorf("binding names policy %q, the policy is %q", m.binding.Spec.PolicyName, m.policy.Name)
	}
	if m.guardBinding.Spec.PolicyName != m.guard.Name {
		t.Errorf("guard binding names policy %q, the policy is %q", m.guardBinding.Spec.PolicyName, m.guard.Name)
	}
	// Both act in the same namespaces: the list is guarded wherever it
	// is read.
	if a, b := m.binding.Spec.MatchResources.NamespaceSelector.String(), m.guardBinding.Spec.MatchResources.NamespaceSelector.String(); a != b {
		t.Errorf("the bindings select different namespaces: %s and %s", a, b)
	}
	if ns := m.namespaces["team-a"]; ns == nil || ns.Labels["paddle.example.com/admission"] != "enforce" {
		t.Errorf("kubernetes.md's team-a namespace is not labelled for the bindings: %v", ns)
	}
}

// k8sPolicy is the ValidatingAdmissionPolicy compiled with cel-go, in an
// environment like the API server's for it: object, oldObject,
// namespaceObject and request as dynamic values, variables in order, and
// the Kubernetes string extensions (lowerAscii).
type k8sPolicy struct {
	variables   []k8sProgram
	validations []k8sProgram
}

type k8sProgram struct {
	name       string
	message    string
	prg        cel.Program
	messageExp cel.Program // nil: message
}

func k8sCompile(t *testing.T, p *admissionv1.ValidatingAdmissionPolicy) *k8sPolicy {
	t.Helper()
	env, err := cel.NewEnv(
		cel.Variable("object", cel.DynType),
		cel.Variable("oldObject", cel.DynType),
		cel.Variable("namespaceObject", cel.DynType),
		cel.Variable("request", cel.DynType),
		cel.Variable("params", cel.DynType),
		cel.Variable("variables", cel.MapType(cel.StringType, cel.DynType)),
		ext.Strings(),
	)
	if err != nil {
		t.Fatal(err)
	}
	compile := func(what, expr string) cel.Program {
		ast, iss := env.Compile(expr)
		if iss.Err() != nil {
			t.Fatalf("%s does not compile: %v", what, iss.Err())
		}
		prg, err := env.Program(ast)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return prg
	}
	out := &k8sPolicy{}
	for _, v := range p.Spec.Variables {
		out.variables = append(out.variables, k8sProgram{name: v.Name, prg: compile("variable "+v.Name, v.Expression)})
	}
	for i, v := range p.Spec.Validations {
		p := k8sProgram{name: fmt.Sprintf("validation %d", i), message: v.Message, prg: compile(fmt.Sprintf("validation %d", i), v.Expression)}
		if v.MessageExpression != "" {
			p.messageExp = compile("messageExpression", v.MessageExpression)
		}
		if p.message == "" && p.messageExp == nil {
			t.Fatalf("%s has no message", p.name)
		}
		out.validations = append(out.validations, p)
	}
	return out
}

// admit evaluates every validation against obj in a namespace with the
// given labels; it returns the messages of those that failed (an error in
// an expression is a failure too: failurePolicy is Fail).
func (p *k8sPolicy) admit(t *testing.T, obj any, params *corev1.ConfigMap) []string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: params.Namespace}}
	act := map[string]any{
		"object":          k8sUnstructured(t, obj),
		"oldObject":       nil,
		"namespaceObject": k8sUnstructured(t, ns),
		"params":          k8sUnstructured(t, params),
		"request":         map[string]any{"operation": "CREATE"},
	}
	vars := map[string]any{}
	act["variables"] = vars
	for _, v := range p.variables {
		val, _, err := v.prg.Eval(act)
		if err != nil {
			return []string{"variable " + v.name + ": " + err.Error()}
		}
		vars[v.name] = val
	}
	var failed []string
	for _, v := range p.validations {
		val, _, err := v.prg.Eval(act)
		switch {
		case err != nil:
			failed = append(failed, v.name+": "+err.Error())
		case val.Value() != true:
			msg := v.message
			if v.messageExp != nil {
				if m, _, err := v.messageExp.Eval(act); err == nil {
					msg = fmt.Sprint(m.Value())
				}
			}
			failed = append(failed, msg)
		}
	}
	return failed
}

func k8sUnstructured(t *testing.T, obj any) map[string]any {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// k8sArgoPod is the pod Argo Workflows makes of a template that runs the
// Paddle image with args: its init and wait containers (argoexec), and the
// main container whose command is the emissary wrapping the image's
// entrypoint.
func k8sArgoPod(job *batchv1.Job) *corev1.Pod {
	train := *job.Spec.Template.Spec.Containers[0].DeepCopy()
	train.Name = "main"
	train.Command = []string{"/var/run/argo/argoexec", "emissary", "--", "/usr/local/bin/paddle-entrypoint"}
	argoexec := func(name string, args ...string) corev1.Container {
		return corev1.Container{
			Name: name, Image: "quay.io/argoproj/argoexec:v3.6.2",
			Command: append([]string{"argoexec"}, args...),
			Env: []corev1.EnvVar{
				{Name: "ARGO_POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
				{Name: "ARGO_CONTAINER_NAME", Value: name},
			},
			VolumeMounts: []corev1.VolumeMount{{Name: "var-run-argo", MountPath: "/var/run/argo"}},
		}
	}
	spec := *job.Spec.Template.Spec.DeepCopy()
	spec.InitContainers = []corev1.Container{argoexec("init", "init", "--loglevel", "info")}
	spec.Containers = []corev1.Container{argoexec("wait", "wait", "--loglevel", "info"), train}
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "var-run-argo", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: *job.Spec.Template.ObjectMeta.DeepCopy(),
		Spec:       spec,
	}
}

// k8sKFPPod is a Kubeflow Pipelines v2 step on Argo: the emissary runs
// KFP's launcher, which runs the component's command (the entrypoint).
func k8sKFPPod(job *batchv1.Job) *corev1.Pod {
	pod := k8sArgoPod(job)
	pod.Spec.InitContainers = append(pod.Spec.InitContainers, corev1.Container{
		Name: "kfp-launcher", Image: "ghcr.io/kubeflow/kfp-launcher:2.4.0",
		Command: []string{"launcher-v2", "--copy", "/kfp-launcher/launch"},
	})
	main := &pod.Spec.Containers[1]
	main.Command = []string{"/var/run/argo/argoexec", "emissary", "--", "/kfp-launcher/launch",
		"--pipeline_name", "train-eval", "--run_id", "r-1", "--", "/usr/local/bin/paddle-entrypoint"}
	return pod
}

func TestK8sAdmissionPolicy(t *testing.T) {
	m := k8sLoad(t)
	pol := k8sCompile(t, m.policy)
	// team-a's list, as kubernetes.md gives it (search_ranking, ocr-*), and
	// a namespace whose list is empty.
	bound := m.configMaps["team-a/paddle-projects"]
	if bound == nil {
		t.Fatal("kubernetes.md has no paddle-projects ConfigMap for team-a")
	}
	empty := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "paddle-projects", Namespace: "team-b"}}
	train := func(f func(c *corev1.Container, pod *corev1.PodTemplateSpec)) *batchv1.Job {
		j := m.job.DeepCopy()
		j.TypeMeta = metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"}
		f(&j.Spec.Template.Spec.Containers[0], &j.Spec.Template)
		return j
	}
	setEnv := func(c *corev1.Container, e corev1.EnvVar) {
		for i := range c.Env {
			if c.Env[i].Name == e.Name {
				c.Env[i] = e
				return
			}
		}
		c.Env = append(c.Env, e)
	}
	literal := func(v string) corev1.EnvVar { return corev1.EnvVar{Name: "PADDLE_PROJECT", Value: v} }
	fromSecret := corev1.EnvVar{Name: "PADDLE_PROJECT", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "project"}}}
	job := m.job.DeepCopy()
	job.TypeMeta = metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"}
	const teamA = "PADDLE_PROJECT must be a project namespace team-a may claim: search_ranking, ocr-*"

	tests := []struct {
		name     string
		obj      any
		params   *corev1.ConfigMap
		denyWith string // "" when admitted
	}{
		{"the Job as written", job, bound, ""},
		{"the Job in a namespace that may claim no project", job, empty, "PADDLE_PROJECT must be a project namespace team-b may claim: none"},
		{"the Job's pod", &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: job.Spec.Template.ObjectMeta, Spec: job.Spec.Template.Spec}, bound, ""},
		{"an Argo Workflows pod (init, wait, emissary)", k8sArgoPod(job), bound, ""},
		{"a Kubeflow Pipelines pod (launcher)", k8sKFPPod(job), bound, ""},
		{"PADDLE_PROJECT literal", train(func(c *corev1.Container, _ *corev1.PodTemplateSpec) {
			setEnv(c, literal("search_ranking"))
		}), bound, ""},
		{"PADDLE_PROJECT matching the glob ocr-*, in upper case", train(func(c *corev1.Container, _ *corev1.PodTemplateSpec) {
			setEnv(c, literal("OCR-invoices"))
		}), bound, ""},
		{"forged project=admin, literal", train(func(c *corev1.Container, _ *corev1.PodTemplateSpec) {
			setEnv(c, literal("admin"))
		}), bound, teamA},
		{"forged project=admin through the pod label", train(func(_ *corev1.Container, p *corev1.PodTemplateSpec) {
			p.Labels["paddle.example.com/project"] = "admin"
		}), bound, teamA},
		{"forged project=ADMIN in an Argo pod", func() any {
			p := k8sArgoPod(job)
			setEnv(&p.Spec.Containers[1], literal("ADMIN"))
			return p
		}(), bound, teamA},
		{"a project of another namespace", train(func(c *corev1.Container, _ *corev1.PodTemplateSpec) {
			setEnv(c, literal("document_intelligence"))
		}), bound, teamA},
		{"a glob's dot is a dot", train(func(c *corev1.Container, _ *corev1.PodTemplateSpec) {
			setEnv(c, literal("search-ranking"))
		}), &corev1.ConfigMap{ObjectMeta: bound.ObjectMeta, Data: map[string]string{"projects": "search.ranking"}},
			"PADDLE_PROJECT must be a project namespace team-a may claim: search.ranking"},
		{"a glob with a regular expression in it", job, &corev1.ConfigMap{ObjectMeta: bound.ObjectMeta,
			Data: map[string]string{"projects": "search_ranking, (a|b)"}}, "a project glob holds only"},
		{"PADDLE_PROJECT from a Secret", train(func(c *corev1.Container, _ *corev1.PodTemplateSpec) {
			setEnv(c, fromSecret)
		}), bound, "must be set literally or from the pod's label"},
		{"PADDLE_PROJECT from the label, label missing", train(func(_ *corev1.Container, p *corev1.PodTemplateSpec) {
			delete(p.Labels, "paddle.example.com/project")
		}), bound, "must be set literally or from the pod's label"},
		{"envFrom in the training container", train(func(c *corev1.Container, _ *corev1.PodTemplateSpec) {
			c.EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "x"}}}}
		}), bound, "envFrom"},
		{"command replacing the entrypoint", train(func(c *corev1.Container, _ *corev1.PodTemplateSpec) {
			c.Command = []string{"python", "train.py"}
		}), bound, "may not replace the image's entrypoint"},
		{"emissary wrapping something else", func() any {
			p := k8sArgoPod(job)
			p.Spec.Containers[1].Command = []string{"/var/run/argo/argoexec", "emissary", "--", "python"}
			return p
		}(), bound, "may not replace the image's entrypoint"},
		{"another ConfigMap at /etc/paddle-entrypoint", train(func(_ *corev1.Container, p *corev1.PodTemplateSpec) {
			for i := range p.Spec.Volumes {
				if cm := p.Spec.Volumes[i].ConfigMap; cm != nil {
					cm.Name = "paddle-label-policy"
				}
			}
		}), bound, "only the paddle-entrypoint-policy ConfigMap"},
	}
	for _, tt := range tests {
		failed := pol.admit(t, tt.obj, tt.params)
		switch {
		case tt.denyWith == "" && len(failed) > 0:
			t.Errorf("%s: denied: %q", tt.name, failed)
		case tt.denyWith != "" && (len(failed) == 0 || !strings.Contains(strings.Join(failed, "\n"), tt.denyWith)):
			t.Errorf("%s: failed %q, want a denial naming %q", tt.name, failed, tt.denyWith)
		}
	}
}

// The Job's environment, resolved as the kubelet would for one of its pods,
// gives the task its Kubernetes identity: run through the real labels
// package, every k8s_* key the downward API can fill is set.
func TestK8sJobMapsIdentity(t *testing.T) {
	job := k8sLoad(t).job
	pod := map[string]string{
		"metadata.namespace": job.Namespace,
		"metadata.name":      job.Name + "-x7k2p",
		"metadata.uid":       "3f1c2a9e-5b7d-4e0f-9a1b-2c3d4e5f6a7b",
		"spec.nodeName":      "gpu-node-7",
	}
	for k, v := range job.Spec.Template.Labels {
		pod["metadata.labels['"+k+"']"] = v
	}
	var environ []string
	for _, e := range job.Spec.Template.Spec.Containers[0].Env {
		v := e.Value
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			var ok bool
			if v, ok = pod[e.ValueFrom.FieldRef.FieldPath]; !ok {
				t.Fatalf("%s: fieldPath %q is not one this test resolves", e.Name, e.ValueFrom.FieldRef.FieldPath)
			}
		}
		environ = append(environ, e.Name+"="+v)
	}
	set, problems := labels.Parse(environ, labels.Options{Hostname: "h", Now: time.Unix(1796000000, 0)})
	if len(problems) > 0 {
		t.Errorf("problems with the Job's labels: %v", problems)
	}
	got := map[string]string{}
	for _, p := range set.Pairs() {
		got[p.Key] = p.Value
	}
	for key, want := range map[string]string{
		"k8s_namespace": job.Namespace,
		"k8s_pod":       pod["metadata.name"],
		"k8s_node":      "gpu-node-7",
		"k8s_pod_uid":   pod["metadata.uid"],
		"project":       "search_ranking",
		"task_id":       pod["metadata.uid"],
	} {
		if got[key] != want {
			t.Errorf("%s = %q, want %q", key, got[key], want)
		}
	}
}
