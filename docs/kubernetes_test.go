package docs

// The manifests of kubernetes.md and deploy/kubernetes/admission.yaml,
// checked with the libraries clusters use: strict decoding into k8s.io/api
// types, the Pod Security Admission evaluator, and the
// ValidatingAdmissionPolicy's CEL evaluated with cel-go (with the CEL
// libraries the API server gives policies) against the Job, against Argo-
// and Kubeflow-like pods and against the ways around it that a review
// found. Helpers are prefixed k8s: other tests share this package.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
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
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
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
	// claimsGuard keeps a claim template listed as no GPU from asking
	// for one.
	claimsGuard        *admissionv1.ValidatingAdmissionPolicy
	claimsGuardBinding *admissionv1.ValidatingAdmissionPolicyBinding
	// claimTemplates are the page's DRA claim templates (its "DRA claims").
	claimTemplates []*resourcev1.ResourceClaimTemplate
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
	admission, err := os.ReadFile("../deploy/kubernetes/admission.yaml")
	if err != nil {
		t.Fatal(err)
	}
	blocks := [][]byte{admission}
	for _, block := range k8sYAMLBlock.FindAllSubmatch(doc, -1) {
		if bytes.HasPrefix(block[1], []byte("- ")) {
			continue // a fragment: a list to splice into a manifest
		}
		if bytes.Contains(block[1], []byte("kind: ValidatingAdmissionPolicy")) {
			t.Fatal("kubernetes.md holds a ValidatingAdmissionPolicy: the policies live in deploy/kubernetes/admission.yaml")
		}
		blocks = append(blocks, block[1])
	}
	for _, block := range blocks {
		for _, part := range bytes.Split(block, []byte("\n---\n")) {
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
			case "resource.k8s.io/v1 ResourceClaimTemplate":
				ct := &resourcev1.ResourceClaimTemplate{}
				obj, after = ct, func() { m.claimTemplates = append(m.claimTemplates, ct) }
			case "v1 ConfigMap":
				cm := &corev1.ConfigMap{}
				obj, after = cm, func() { m.configMaps[cm.Namespace+"/"+cm.Name] = cm }
			case "admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy":
				p := &admissionv1.ValidatingAdmissionPolicy{}
				obj, after = p, func() {
					switch p.Name {
					case "paddle-projects-guard":
						m.guard = p
					case "paddle-claims-guard":
						m.claimsGuard = p
					default:
						m.policy = p
					}
				}
			case "admissionregistration.k8s.io/v1 ValidatingAdmissionPolicyBinding":
				b := &admissionv1.ValidatingAdmissionPolicyBinding{}
				obj, after = b, func() {
					switch b.Name {
					case "paddle-projects-guard":
						m.guardBinding = b
					case "paddle-claims-guard":
						m.claimsGuardBinding = b
					default:
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
	if m.job == nil || m.daemonSet == nil || m.policy == nil || m.binding == nil || m.guard == nil || m.guardBinding == nil ||
		m.claimsGuard == nil || m.claimsGuardBinding == nil {
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
		// The libraries and options the API server's policy environment
		// has (k8s.io/apiserver/pkg/cel/environment), as far as cel-go
		// holds them.
		cel.HomogeneousAggregateLiterals(),
		cel.OptionalTypes(),
		cel.CrossTypeNumericComparisons(true),
		ext.Strings(ext.StringsVersion(2)),
		ext.Sets(),
		ext.TwoVarComprehensions(),
		ext.Lists(ext.ListsVersion(3)),
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

// k8sCase is a pod or Job created in a namespace with its paddle-projects
// list: admitted (deny "") or refused with a message containing deny.
// class is the priority class the admitted pod ends up with ("-": not
// checked).
type k8sCase struct {
	name  string
	obj   any // *corev1.Pod or *batchv1.Job, its namespace set
	deny  string
	class string
}

// k8sParams are the paddle-projects lists of the namespaces the cases use:
// team-a's as kubernetes.md gives it (search_ranking, ocr-*, with
// paddle-high); team-b may claim search_ranking with the default classes;
// team-c also allows two settings; ml is the pipelines' namespace (ocr).
func k8sParams(t *testing.T, m k8sManifests) map[string]*corev1.ConfigMap {
	t.Helper()
	a := m.configMaps["team-a/paddle-projects"]
	if a == nil {
		t.Fatal("kubernetes.md has no paddle-projects ConfigMap for team-a")
	}
	cm := func(ns string, data map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Name: "paddle-projects", Namespace: ns}, Data: data}
	}
	return map[string]*corev1.ConfigMap{
		"team-a": a,
		"team-b": cm("team-b", map[string]string{"projects": "search_ranking"}),
		"team-c": cm("team-c", map[string]string{"projects": "search_ranking", "allowSettings": "PADDLE_HEARTBEAT, PADDLE_GPU_TIMEOUT"}),
		"ml":     cm("ml", map[string]string{"projects": "ocr"}),
	}
}

// k8sPipelinePods are the pods the examples of pipelines.md make, in
// namespace ml, as their orchestrators create them: the Argo Workflow's
// evaluate step (init, wait, and the main container behind the emissary),
// the Airflow KubernetesPodOperator's evaluate pod (the image's ENTRYPOINT
// with arguments), and the Kubeflow Pipelines component (the launcher
// behind the emissary, then the entrypoint).
func k8sPipelinePods(t *testing.T) []*corev1.Pod {
	t.Helper()
	wf := pipelineLoadArgo(t)
	var step *corev1.Container
	for _, tp := range wf.Spec.Templates {
		if tp.Name == "gpu-step" {
			step = tp.Container
		}
	}
	if step == nil {
		t.Fatal("pipelines.md's Workflow has no gpu-step template")
	}
	field := func(name, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
	}
	identity := []corev1.EnvVar{{Name: "PADDLE_PIPELINE", Value: "ocr_nightly"}, {Name: "PADDLE_PIPELINE_RUN", Value: "20261130T020000"},
		{Name: "PADDLE_STEP", Value: "evaluate"}, {Name: "PADDLE_PROJECT", Value: "ocr"},
		field("POD_NAMESPACE", "metadata.namespace"), field("POD_NAME", "metadata.name"),
		field("NODE_NAME", "spec.nodeName"), field("POD_UID", "metadata.uid")}
	gpu1 := corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}
	job := &batchv1.Job{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"workflows.argoproj.io/workflow": "ocr-nightly-x7k2p"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{*step.DeepCopy()}}}}}
	argo := k8sArgoPod(job)
	argo.Name = "ocr-nightly-x7k2p-evaluate-1234567890"
	argo.Spec.Containers[1].Command = []string{"/var/run/argo/argoexec", "emissary", "--loglevel", "info", "--log-format", "text", "--",
		step.Command[0]}
	airflow := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "evaluate-k3j9d"},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
			Name: "base", Image: "my-registry/paddle:2.6.1-gpu-cuda12.0-cudnn8.9-trt8.6-labelled",
			Args: []string{"python", "/app/evaluate.py"},
			Env: append(slices.Clone(identity), corev1.EnvVar{Name: "PADDLE_GATE", Value: "accuracy>=0.95"},
				corev1.EnvVar{Name: "PADDLE_GATE_FILE", Value: "/tmp/metrics.json"}),
			Resources: gpu1}}}}
	kfpJob := &batchv1.Job{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"workflows.argoproj.io/workflow": "ocr-nightly-8k2lq"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "main", Image: "my-registry/paddle:2.6.1-gpu-cuda12.0-cudnn8.9-trt8.6-labelled",
			Env: append([]corev1.EnvVar{{Name: "PADDLE_PIPELINE", Value: "ocr-nightly"}, {Name: "PADDLE_STEP", Value: "evaluate"},
				{Name: "PADDLE_PROJECT", Value: "ocr"}, {Name: "PADDLE_GATE", Value: "accuracy>=0.95"},
				{Name: "PADDLE_GATE_FILE", Value: "/tmp/metrics.json"},
				field("PADDLE_PIPELINE_RUN", "metadata.labels['workflows.argoproj.io/workflow']")}, identity[4:]...),
			Resources: gpu1}}}}}}
	kfp := k8sKFPPod(kfpJob)
	kfp.Name = "ocr-nightly-8k2lq-system-container-impl-123"
	kfp.Spec.Containers[1].Command = []string{"/var/run/argo/argoexec", "emissary", "--loglevel", "info", "--",
		"/kfp-launcher/launch", "--pipeline_name", "ocr-nightly", "--run_id", "8e3f", "--executor_input", "{}",
		"--component_spec", "{}", "--", "paddle-entrypoint", "python", "/app/evaluate.py"}
	pods := []*corev1.Pod{argo, airflow, kfp}
	for _, p := range pods {
		p.Namespace = "ml"
	}
	return pods
}

// k8sCases are the pods and Jobs both the CEL evaluation and the real API
// server judge: kubernetes.md's Job and the pods orchestrators make of it
// and of pipelines.md, admitted; every way around the rules that a review
// found, refused.
func k8sCases(t *testing.T, m k8sManifests) []k8sCase {
	t.Helper()
	job := m.job.DeepCopy()
	job.TypeMeta = metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"}
	job.Namespace = "team-a"
	// pod is the Job's pod in namespace ns, changed by f.
	pod := func(name, ns string, f func(p *corev1.Pod, c *corev1.Container)) *corev1.Pod {
		p := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: *job.Spec.Template.ObjectMeta.DeepCopy(), Spec: *job.Spec.Template.Spec.DeepCopy()}
		p.Name, p.Namespace = name, ns
		if f != nil {
			f(p, &p.Spec.Containers[0])
		}
		return p
	}
	setEnv := func(c *corev1.Container, name, value string) {
		for i := range c.Env {
			if c.Env[i].Name == name {
				c.Env[i] = corev1.EnvVar{Name: name, Value: value}
				return
			}
		}
		c.Env = append(c.Env, corev1.EnvVar{Name: name, Value: value})
	}
	gpus := func(n string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse(n)}}
	}
	mount := func(path, subPath string) func(p *corev1.Pod, c *corev1.Container) {
		return func(p *corev1.Pod, c *corev1.Container) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "over", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "over", MountPath: path, SubPath: subPath})
		}
	}
	args := func(a ...string) func(p *corev1.Pod, c *corev1.Container) {
		return func(_ *corev1.Pod, c *corev1.Container) { c.Args = a }
	}
	env := func(name, value string) func(p *corev1.Pod, c *corev1.Container) {
		return func(_ *corev1.Pod, c *corev1.Container) { setEnv(c, name, value) }
	}
	const keeps = ", a setting the platform keeps in namespace "
	argo := k8sArgoPod(job)
	argo.Name, argo.Namespace = "p-argo", "team-a"
	kfp := k8sKFPPod(job)
	kfp.Name, kfp.Namespace = "p-kfp", "team-a"
	cases := []k8sCase{
		{name: "kubernetes.md's Job", obj: job, class: "-"},
		{name: "the Job's pod (PADDLE_PRIORITY=high, allowed in team-a)", obj: pod("p-job", "team-a", nil), class: "paddle-high"},
		{name: "an Argo Workflows pod (init, wait first, emissary): the GPU container's class", obj: argo, class: "paddle-high"},
		{name: "a Kubeflow Pipelines pod (launcher, then the entrypoint)", obj: kfp, class: "paddle-high"},
		{name: "emissary with its own flags", obj: pod("p-emissary-flags", "team-a", func(_ *corev1.Pod, c *corev1.Container) {
			c.Command = []string{"/var/run/argo/argoexec", "emissary", "--loglevel", "info", "--", "/usr/local/bin/paddle-entrypoint"}
		}), class: "paddle-high"},
		{name: "the training script's own --mode", obj: pod("p-script-mode", "team-a", args("python", "train.py", "--mode", "finetune")), class: "paddle-high"},
		{name: "a flag after --", obj: pod("p-after-dashes", "team-a", args("--", "python", "train.py", "--gpu-share=1")), class: "paddle-high"},
		{name: "the entrypoint's flags that are the task's", obj: pod("p-own-flags", "team-a", args("--labels-mode", "enforce", "python", "train.py")), class: "paddle-high"},
		{name: "settings the namespace allows", obj: pod("p-allowed", "team-c", func(p *corev1.Pod, c *corev1.Container) {
			setEnv(c, "PADDLE_PRIORITY", "medium")
			setEnv(c, "PADDLE_HEARTBEAT", "30s")
			c.Args = []string{"--gpu-timeout=20s", "python", "train.py"}
		}), class: "paddle-medium"},
		{name: "a mount beside the entrypoint", obj: pod("p-beside", "team-a", mount("/usr/local/bin/tools", "")), class: "paddle-high"},
		{name: "a container without GPUs replacing the entrypoint", obj: pod("p-cpu", "team-a", func(p *corev1.Pod, c *corev1.Container) {
			c.Resources = corev1.ResourceRequirements{}
			c.Command = []string{"python", "prepare.py"}
			c.EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "x"}}}}
			setEnv(c, "PADDLE_ENTRYPOINT_MODE", "exec")
		}), class: "-"},
		{name: "two GPU containers disagreeing: the lowest level wins", obj: pod("p-lowest", "team-b", func(p *corev1.Pod, c *corev1.Container) {
			setEnv(c, "PADDLE_PRIORITY", "low")
			side := *c.DeepCopy()
			side.Name = "second"
			setEnv(&side, "PADDLE_PRIORITY", "high")
			p.Spec.Containers = append(p.Spec.Containers, side)
		}), class: "paddle-low"},

		// Ways around the rules.
		{name: "an image by digest with its own command", obj: pod("p-digest", "team-a", func(_ *corev1.Pod, c *corev1.Container) {
			c.Image = "my-registry/paddle@sha256:0b1c2d3e4f5061728394a5b6c7d8e9f00b1c2d3e4f5061728394a5b6c7d8e9f0"
			c.Command = []string{"python", "train.py"}
		}), deny: "container train runs python instead of the entrypoint (namespace team-a)"},
		{name: "an image through another registry setting the share", obj: pod("p-registry", "team-a", func(_ *corev1.Pod, c *corev1.Container) {
			c.Image = "registry.example.com/my-registry/paddle:2.6.1-gpu-cuda12.0-cudnn8.9-trt8.6-labelled"
			setEnv(c, "PADDLE_GPU_SHARE", "0.001")
		}), deny: "container train sets PADDLE_GPU_SHARE" + keeps + "team-a (allowSettings of its paddle-projects ConfigMap: none)"},
		{name: "a second container with 8 GPUs and its own image", obj: pod("p-second", "team-a", func(p *corev1.Pod, _ *corev1.Container) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "extra", Image: "nvcr.io/nvidia/pytorch:24.10-py3",
				Command: []string{"torchrun", "--nproc-per-node=8", "mine.py"}, Resources: gpus("8")})
		}), deny: "container extra runs torchrun instead of the entrypoint"},
		{name: "a second container with 8 GPUs in exec mode", obj: pod("p-second-exec", "team-a", func(p *corev1.Pod, _ *corev1.Container) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "extra", Image: "my-registry/paddle:2.6.1-gpu",
				Args: []string{"python", "mine.py"}, Env: []corev1.EnvVar{{Name: "PADDLE_ENTRYPOINT_MODE", Value: "exec"}}, Resources: gpus("8")})
		}), deny: "container extra sets PADDLE_ENTRYPOINT_MODE" + keeps + "team-a"},
		{name: "an init container with a GPU", obj: pod("p-init", "team-a", func(p *corev1.Pod, _ *corev1.Container) {
			p.Spec.InitContainers = []corev1.Container{{Name: "warmup", Image: "busybox:1.36", Command: []string{"sh", "-c", "train"}, Resources: gpus("1")}}
		}), deny: "container warmup runs sh instead of the entrypoint"},
		{name: "a MIG instance with its own command", obj: pod("p-mig", "team-a", func(_ *corev1.Pod, c *corev1.Container) {
			c.Resources = corev1.ResourceRequirements{Requests: corev1.ResourceList{"nvidia.com/mig-1g.10gb": resource.MustParse("1")},
				Limits: corev1.ResourceList{"nvidia.com/mig-1g.10gb": resource.MustParse("1")}}
			c.Command = []string{"python", "train.py"}
		}), deny: "container train runs python instead of the entrypoint"},
		{name: "--gpu-share=0.001", obj: pod("p-flag-share", "team-a", args("--gpu-share=0.001", "python", "train.py")),
			deny: "container train gives the entrypoint --gpu-share=0.001 (PADDLE_GPU_SHARE)" + keeps + "team-a"},
		{name: "--mode exec", obj: pod("p-flag-mode", "team-a", args("--mode", "exec", "python", "train.py")),
			deny: "container train gives the entrypoint --mode (PADDLE_ENTRYPOINT_MODE)"},
		{name: "--monitor-url=", obj: pod("p-flag-url", "team-a", args("--monitor-url=", "python", "train.py")),
			deny: "container train gives the entrypoint --monitor-url= (PADDLE_MONITOR_URL)"},
		{name: "a locked flag after one of the task's", obj: pod("p-flag-probe", "team-a", args("--labels-mode", "warn", "--gpu-probe", "/bin/true", "python")),
			deny: "container train gives the entrypoint --gpu-probe (PADDLE_ENTRYPOINT_GPU_PROBE)"},
		{name: "the entrypoint as the command, with a flag", obj: pod("p-flag-command", "team-a", func(_ *corev1.Pod, c *corev1.Container) {
			c.Command = []string{"paddle-entrypoint", "--spool-path=off"}
		}), deny: "container train gives the entrypoint --spool-path=off (PADDLE_SPOOL_PATH)"},
		{name: "a flag behind Argo's emissary", obj: func() *corev1.Pod {
			p := k8sArgoPod(job)
			p.Name, p.Namespace = "p-flag-argo", "team-a"
			p.Spec.Containers[1].Args = []string{"--gpu-timeout=0", "python", "train.py"}
			return p
		}(), deny: "container main gives the entrypoint --gpu-timeout=0 (PADDLE_GPU_TIMEOUT)"},
		{name: "PADDLE_GPU_SHARE=0.001", obj: pod("p-env-share", "team-a", env("PADDLE_GPU_SHARE", "0.001")), deny: "container train sets PADDLE_GPU_SHARE" + keeps + "team-a"},
		{name: "PADDLE_ENTRYPOINT_MODE=exec", obj: pod("p-env-mode", "team-a", env("PADDLE_ENTRYPOINT_MODE", "exec")), deny: "container train sets PADDLE_ENTRYPOINT_MODE" + keeps},
		{name: "PADDLE_ENTRYPOINT_GPU_PROBE=/bin/true", obj: pod("p-env-probe", "team-a", env("PADDLE_ENTRYPOINT_GPU_PROBE", "/bin/true")), deny: "container train sets PADDLE_ENTRYPOINT_GPU_PROBE" + keeps},
		{name: "PADDLE_GPU_TIMEOUT=0", obj: pod("p-env-timeout", "team-a", env("PADDLE_GPU_TIMEOUT", "0")), deny: "container train sets PADDLE_GPU_TIMEOUT" + keeps},
		{name: "PADDLE_MONITOR_URL empty", obj: pod("p-env-url", "team-a", env("PADDLE_MONITOR_URL", "")), deny: "container train sets PADDLE_MONITOR_URL" + keeps},
		{name: "a setting the namespace does not allow", obj: pod("p-env-not-allowed", "team-c", func(_ *corev1.Pod, c *corev1.Container) {
			setEnv(c, "PADDLE_PRIORITY", "low")
			setEnv(c, "PADDLE_GPU_SHARE", "0.5")
		}), deny: "container train sets PADDLE_GPU_SHARE" + keeps + "team-c (allowSettings of its paddle-projects ConfigMap: PADDLE_HEARTBEAT, PADDLE_GPU_TIMEOUT)"},
		{name: "envFrom in a GPU container", obj: pod("p-envfrom", "team-a", func(_ *corev1.Pod, c *corev1.Container) {
			c.EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "x"}}}}
		}), deny: "container train uses GPUs and envFrom"},
		{name: "an emptyDir over /usr/local/bin", obj: pod("p-mount-bin", "team-a", mount("/usr/local/bin", "")), deny: "container train mounts over at /usr/local/bin (namespace team-a)"},
		{name: "a mount over /", obj: pod("p-mount-root", "team-a", mount("/", "")), deny: "container train mounts over at / "},
		{name: "a mount over /etc", obj: pod("p-mount-etc", "team-a", mount("/etc", "")), deny: "container train mounts over at /etc "},
		{name: "a ConfigMap over the policy directory", obj: pod("p-mount-policy", "team-a", func(p *corev1.Pod, c *corev1.Container) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "label-policy", VolumeSource: corev1.VolumeSource{
				ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "paddle-entrypoint-policy"}}}})
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "label-policy", MountPath: "/etc/paddle-entrypoint", ReadOnly: true})
		}), deny: "container train mounts label-policy at /etc/paddle-entrypoint "},
		{name: "a file over the policy", obj: pod("p-mount-policy-file", "team-a", mount("/etc/paddle-entrypoint/policy.json", "policy.json")), deny: "mounts over at /etc/paddle-entrypoint/policy.json"},
		{name: "a file over the entrypoint", obj: pod("p-mount-entrypoint", "team-a", mount("/usr/local/bin/paddle-entrypoint", "x")), deny: "mounts over at /usr/local/bin/paddle-entrypoint "},
		{name: "a file over the GPU probe", obj: pod("p-mount-probe", "team-a", mount("/usr/local/bin/paddle-gpu-probe", "probe")), deny: "mounts over at /usr/local/bin/paddle-gpu-probe"},
		{name: "/usr/local/bin/ with a slash", obj: pod("p-mount-slash", "team-a", mount("/usr/local/bin/", "")), deny: "mounts over at /usr/local/bin/ "},
		{name: "/usr//local/bin", obj: pod("p-mount-double", "team-a", mount("/usr//local/bin", "")), deny: "mounts over at /usr//local/bin"},
		{name: "paddle-high through PADDLE_PRIORITY in a namespace not allowed it", obj: pod("p-high", "team-b", nil),
			deny: "priority class paddle-high is not one namespace team-b may use: paddle-low, paddle-medium (priorityClasses of its paddle-projects ConfigMap)"},
		{name: "paddle-high by name in a namespace not allowed it", obj: pod("p-high-named", "team-b", func(p *corev1.Pod, c *corev1.Container) {
			setEnv(c, "PADDLE_PRIORITY", "low")
			p.Spec.PriorityClassName = "paddle-high"
		}), deny: "priority class paddle-high is not one namespace team-b may use"},
		{name: "paddle-high from the GPU container behind Argo's wait", obj: func() *corev1.Pod {
			p := k8sArgoPod(job)
			p.Name, p.Namespace = "p-argo-high", "team-b"
			return p
		}(), deny: "priority class paddle-high is not one namespace team-b may use"},
		{name: "a Job asking for paddle-high in a namespace not allowed it", obj: func() *batchv1.Job {
			j := job.DeepCopy()
			j.Name, j.Namespace = "forged-high", "team-b"
			return j
		}(), deny: "priority class paddle-high is not one namespace team-b may use"},
		{name: "the launcher with the entrypoint as a trailing argument", obj: func() *corev1.Pod {
			p := k8sKFPPod(job)
			p.Name, p.Namespace = "p-kfp-trailing", "team-a"
			p.Spec.Containers[1].Command = []string{"/var/run/argo/argoexec", "emissary", "--", "/kfp-launcher/launch",
				"--pipeline_name", "train-eval", "--run_id", "r-1", "--", "python", "train.py", "/usr/local/bin/paddle-entrypoint"}
			return p
		}(), deny: "container main runs /var/run/argo/argoexec instead of the entrypoint"},
		{name: "the launcher's end of flags made a flag's value", obj: func() *corev1.Pod {
			p := k8sKFPPod(job)
			p.Name, p.Namespace = "p-kfp-value", "team-a"
			p.Spec.Containers[1].Command = []string{"/var/run/argo/argoexec", "emissary", "--", "/kfp-launcher/launch",
				"--pipeline_name", "--", "paddle-entrypoint", "--run_id", "r", "--", "python", "train.py"}
			return p
		}(), deny: "container main runs /var/run/argo/argoexec instead of the entrypoint"},
		{name: "the entrypoint inside a shell", obj: pod("p-shell", "team-a", func(_ *corev1.Pod, c *corev1.Container) {
			c.Command = []string{"sh", "-c", "PADDLE_GPU_SHARE=0.001 exec paddle-entrypoint python train.py"}
		}), deny: "container train runs sh instead of the entrypoint"},
		{name: "emissary wrapping something else", obj: func() *corev1.Pod {
			p := k8sArgoPod(job)
			p.Name, p.Namespace = "p-argo-python", "team-a"
			p.Spec.Containers[1].Command = []string{"/var/run/argo/argoexec", "emissary", "--", "python"}
			return p
		}(), deny: "container main runs /var/run/argo/argoexec instead of the entrypoint"},
		{name: "team-a claiming admin", obj: pod("p-admin", "team-a", env("PADDLE_PROJECT", "admin")),
			deny: "PADDLE_PROJECT must be a project namespace team-a may claim: search_ranking, ocr-*"},
		{name: "team-a claiming admin through the pod's label", obj: pod("p-admin-label", "team-a", func(p *corev1.Pod, _ *corev1.Container) {
			p.Labels["paddle.example.com/project"] = "admin"
		}), deny: "PADDLE_PROJECT must be a project namespace team-a may claim: search_ranking, ocr-*"},
	}
	for _, p := range k8sPipelinePods(t) {
		cases = append(cases, k8sCase{name: "pipelines.md: " + p.Name, obj: p, class: ""})
	}
	return cases
}

func TestK8sAdmissionPolicy(t *testing.T) {
	m := k8sLoad(t)
	pol := k8sCompile(t, m.policy)
	params := k8sParams(t, m)
	for _, c := range k8sCases(t, m) {
		ns := k8sUnstructured(t, c.obj)["metadata"].(map[string]any)["namespace"].(string)
		failed := pol.admit(t, c.obj, params[ns])
		switch {
		case c.deny == "" && len(failed) > 0:
			t.Errorf("%s: denied: %q", c.name, failed)
		case c.deny != "" && (len(failed) == 0 || !strings.Contains(strings.Join(failed, "\n"), c.deny)):
			t.Errorf("%s: failed %q, want a denial naming %q", c.name, failed, c.deny)
		}
	}

	// The project rules on their own (the namespace's list).
	bound := params["team-a"]
	empty := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "paddle-projects", Namespace: "team-b"}}
	train := func(f func(c *corev1.Container, pod *corev1.PodTemplateSpec)) *batchv1.Job {
		j := m.job.DeepCopy()
		j.TypeMeta = metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"}
		f(&j.Spec.Template.Spec.Containers[0], &j.Spec.Template)
		return j
	}
	literal := func(v string) func(c *corev1.Container, _ *corev1.PodTemplateSpec) {
		return func(c *corev1.Container, _ *corev1.PodTemplateSpec) {
			for i := range c.Env {
				if c.Env[i].Name == "PADDLE_PROJECT" {
					c.Env[i] = corev1.EnvVar{Name: "PADDLE_PROJECT", Value: v}
				}
			}
		}
	}
	fromSecret := func(c *corev1.Container, _ *corev1.PodTemplateSpec) {
		for i := range c.Env {
			if c.Env[i].Name == "PADDLE_PROJECT" {
				c.Env[i] = corev1.EnvVar{Name: "PADDLE_PROJECT", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "project"}}}
			}
		}
	}
	const teamA = "PADDLE_PROJECT must be a project namespace team-a may claim: search_ranking, ocr-*"
	for _, tt := range []struct {
		name     string
		obj      any
		params   *corev1.ConfigMap
		denyWith string
	}{
		{"the Job in a namespace that may claim no project", train(func(*corev1.Container, *corev1.PodTemplateSpec) {}), empty,
			"PADDLE_PROJECT must be a project namespace team-b may claim: none"},
		{"PADDLE_PROJECT literal", train(literal("search_ranking")), bound, ""},
		{"PADDLE_PROJECT matching the glob ocr-*, in upper case", train(literal("OCR-invoices")), bound, ""},
		{"a project of another namespace", train(literal("document_intelligence")), bound, teamA},
		{"a glob's dot is a dot", train(literal("search-ranking")),
			&corev1.ConfigMap{ObjectMeta: bound.ObjectMeta, Data: map[string]string{"projects": "search.ranking", "priorityClasses": "paddle-high"}},
			"PADDLE_PROJECT must be a project namespace team-a may claim: search.ranking"},
		{"a glob with a regular expression in it", train(literal("search_ranking")), &corev1.ConfigMap{ObjectMeta: bound.ObjectMeta,
			Data: map[string]string{"projects": "search_ranking, (a|b)", "priorityClasses": "paddle-high"}}, "a project glob holds only"},
		{"PADDLE_PROJECT from a Secret", train(fromSecret), bound, "must be set literally or from the pod's label"},
		{"PADDLE_PROJECT from the label, label missing", train(func(_ *corev1.Container, p *corev1.PodTemplateSpec) {
			delete(p.Labels, "paddle.example.com/project")
		}), bound, "must be set literally or from the pod's label"},
	} {
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
