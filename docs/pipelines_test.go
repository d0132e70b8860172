package docs

// The examples of pipelines.md, checked as far as this machine can: the
// Argo Workflow decoded strictly (its containers into k8s.io/api's
// Container), its environment read by the real labels package with Argo's
// variables substituted, its gate parsed by the real gate package; the
// GitLab file parsed; the Python and shell snippets compiled. Helpers are
// prefixed pipeline: other tests share this package.

import (
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/paddle-entrypoint/paddle-entrypoint/entrypoint/gate"
	"github.com/paddle-entrypoint/paddle-entrypoint/labels"
	"github.com/paddle-entrypoint/paddle-entrypoint/test/harness"
)

// pipelineBlocks returns the fenced blocks of pipelines.md in language lang.
func pipelineBlocks(t *testing.T, lang string) [][]byte {
	t.Helper()
	doc, err := os.ReadFile("pipelines.md")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile("(?s)```" + lang + "\n(.*?)```")
	var out [][]byte
	for _, m := range re.FindAllSubmatch(doc, -1) {
		out = append(out, m[1])
	}
	return out
}

// pipelineArgoWorkflow is the part of Argo's Workflow the example uses;
// decoding it strictly fails on any other field, and each container is
// k8s.io/api's own type.
type pipelineArgoWorkflow struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       struct {
		Entrypoint string `json:"entrypoint"`
		Templates  []struct {
			Name string `json:"name"`
			DAG  *struct {
				Tasks []struct {
					Name         string   `json:"name"`
					Template     string   `json:"template"`
					Dependencies []string `json:"dependencies"`
					Arguments    struct {
						Parameters []struct {
							Name  string `json:"name"`
							Value string `json:"value"`
						} `json:"parameters"`
					} `json:"arguments"`
				} `json:"tasks"`
			} `json:"dag"`
			Inputs struct {
				Parameters []struct {
					Name    string  `json:"name"`
					Default *string `json:"default"`
				} `json:"parameters"`
			} `json:"inputs"`
			Container *corev1.Container `json:"container"`
		} `json:"templates"`
	} `json:"spec"`
}

func pipelineLoadArgo(t *testing.T) *pipelineArgoWorkflow {
	t.Helper()
	var wf *pipelineArgoWorkflow
	for _, block := range pipelineBlocks(t, "yaml") {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(block, &tm); err != nil {
			t.Fatalf("YAML block does not parse: %v\n%s", err, block)
		}
		if tm.Kind != "Workflow" {
			continue
		}
		if tm.APIVersion != "argoproj.io/v1alpha1" {
			t.Fatalf("Workflow apiVersion %q", tm.APIVersion)
		}
		wf = &pipelineArgoWorkflow{}
		if err := yaml.UnmarshalStrict(block, wf); err != nil {
			t.Fatalf("Argo Workflow does not decode strictly: %v", err)
		}
	}
	if wf == nil {
		t.Fatal("pipelines.md has no Argo Workflow")
	}
	return wf
}

// pipelineFieldValues are what the downward API gives the example's pod.
var pipelineFieldValues = map[string]string{
	"metadata.namespace": "ml",
	"metadata.name":      "ocr-nightly-x7k2p-evaluate-1234567890",
	"spec.nodeName":      "gpu-node-3",
	"metadata.uid":       "6c1f0a52-3b0e-4e4b-9d7a-1f2e3d4c5b6a",
}

func TestPipelineArgoWorkflow(t *testing.T) {
	wf := pipelineLoadArgo(t)
	templates := map[string]int{}
	for i, tp := range wf.Spec.Templates {
		templates[tp.Name] = i
	}
	main, ok := templates[wf.Spec.Entrypoint]
	if !ok || wf.Spec.Templates[main].DAG == nil {
		t.Fatalf("entrypoint %q is not a DAG template", wf.Spec.Entrypoint)
	}
	gated := 0
	for _, task := range wf.Spec.Templates[main].DAG.Tasks {
		i, ok := templates[task.Template]
		if !ok {
			t.Fatalf("task %s uses template %q, which does not exist", task.Name, task.Template)
		}
		tp := wf.Spec.Templates[i]
		c := tp.Container
		if c == nil {
			t.Fatalf("template %s has no container", tp.Name)
		}
		// The entrypoint is named: the executor wraps the command.
		if !slices.Equal(c.Command, []string{"paddle-entrypoint"}) {
			t.Errorf("template %s: command %q, want [paddle-entrypoint]", tp.Name, c.Command)
		}
		// Argo's variables, as the controller substitutes them.
		params := map[string]string{}
		for _, p := range tp.Inputs.Parameters {
			if p.Default != nil {
				params[p.Name] = *p.Default
			}
		}
		for _, p := range task.Arguments.Parameters {
			params[p.Name] = p.Value
		}
		subst := func(s string) string {
			s = strings.ReplaceAll(s, "{{workflow.name}}", "ocr-nightly-x7k2p")
			s = strings.ReplaceAll(s, "{{workflow.labels.pipeline}}", wf.Metadata.Labels["pipeline"])
			s = strings.ReplaceAll(s, "{{workflow.creationTimestamp}}", "2026-11-30T08:00:00Z")
			for k, v := range params {
				s = strings.ReplaceAll(s, "{{inputs.parameters."+k+"}}", v)
			}
			if strings.Contains(s, "{{") {
				t.Errorf("template %s: variable left unresolved in %q", tp.Name, s)
			}
			return s
		}
		var environ []string
		env := map[string]string{}
		for _, e := range c.Env {
			v := subst(e.Value)
			if e.ValueFrom != nil {
				if e.ValueFrom.FieldRef == nil {
					t.Fatalf("%s: only fieldRef is expected", e.Name)
				}
				var ok bool
				if v, ok = pipelineFieldValues[e.ValueFrom.FieldRef.FieldPath]; !ok {
					t.Fatalf("%s: field path %q is not one the docs map", e.Name, e.ValueFrom.FieldRef.FieldPath)
				}
			}
			environ = append(environ, e.Name+"="+v)
			env[e.Name] = v
		}
		for _, a := range c.Args {
			subst(a)
		}
		// The step starts an hour after the Workflow was created.
		set, problems := labels.Parse(environ, labels.Options{Hostname: "h", NewID: func() string { return "id" },
			Now: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)})
		if len(problems) != 0 {
			t.Errorf("task %s: the labels package reports %v", task.Name, problems)
		}
		if want := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC).Unix(); set.SubmitTime != want {
			t.Errorf("task %s: submit time %d, want %d (the Workflow's creation)", task.Name, set.SubmitTime, want)
		}
		want := labels.Identity{Pipeline: "ocr-nightly", PipelineRun: "ocr-nightly-x7k2p", Step: task.Name,
			K8sNamespace: "ml", K8sPod: "ocr-nightly-x7k2p-evaluate-1234567890", K8sNode: "gpu-node-3",
			K8sPodUID: "6c1f0a52-3b0e-4e4b-9d7a-1f2e3d4c5b6a"}
		if set.Identity != want {
			t.Errorf("task %s: identity %+v, want %+v", task.Name, set.Identity, want)
		}
		// Supervise mode (the gate needs it) is the image's and the
		// platform policy's; a GPU step setting the mode itself is refused
		// at admission (kubernetes.md).
		if _, ok := env["PADDLE_ENTRYPOINT_MODE"]; ok {
			t.Errorf("task %s sets PADDLE_ENTRYPOINT_MODE, which admission refuses", task.Name)
		}
		if expr := env["PADDLE_GATE"]; expr != "" {
			gated++
			if task.Name != "evaluate" {
				t.Errorf("task %s is gated, want only evaluate", task.Name)
			}
			if _, err := gate.Parse(expr); err != nil || env["PADDLE_GATE_FILE"] == "" {
				t.Errorf("task %s: gate %q: %v (file %q)", task.Name, expr, err, env["PADDLE_GATE_FILE"])
			}
		}
		_, gpu := c.Resources.Limits["nvidia.com/gpu"]
		if gpu != (task.Name == "train" || task.Name == "evaluate") {
			t.Errorf("task %s: GPU limit %v", task.Name, c.Resources.Limits)
		}
	}
	if gated != 1 {
		t.Errorf("%d gated tasks, want the evaluation step", gated)
	}
	// export runs only after the gated evaluate.
	for _, task := range wf.Spec.Templates[main].DAG.Tasks {
		if task.Name == "export" && !slices.Contains(task.Dependencies, "evaluate") {
			t.Error("export does not depend on evaluate: the gate would not stop it")
		}
	}
}

// TestPipelineGitLab checks the GitLab file's shape: the feature flag as a
// string (GitLab variables are strings), and every job with an image and a
// script.
func TestPipelineGitLab(t *testing.T) {
	var found bool
	for _, block := range pipelineBlocks(t, "yaml") {
		if !bytes.Contains(block, []byte("FF_KUBERNETES_HONOR_ENTRYPOINT")) || bytes.Contains(block, []byte("kind:")) {
			continue
		}
		found = true
		var ci map[string]any
		if err := yaml.Unmarshal(block, &ci); err != nil {
			t.Fatal(err)
		}
		vars, _ := ci["variables"].(map[string]any)
		if vars["FF_KUBERNETES_HONOR_ENTRYPOINT"] != "true" {
			t.Errorf("FF_KUBERNETES_HONOR_ENTRYPOINT = %#v, want the string \"true\"", vars["FF_KUBERNETES_HONOR_ENTRYPOINT"])
		}
		jobs := 0
		for name, v := range ci {
			if name == "variables" {
				continue
			}
			job, _ := v.(map[string]any)
			if job["image"] == nil || job["script"] == nil {
				t.Errorf("job %s has no image or script", name)
			}
			jobs++
			script, _ := job["script"].([]any)
			for _, line := range script {
				s, _ := line.(string)
				if i := strings.Index(s, "--gate '"); i >= 0 {
					expr := s[i+len("--gate '"):]
					expr = expr[:strings.Index(expr, "'")]
					if _, err := gate.Parse(expr); err != nil {
						t.Errorf("job %s: %v", name, err)
					}
				}
			}
		}
		if jobs < 2 {
			t.Errorf("%d jobs", jobs)
		}
	}
	if !found {
		t.Fatal("no GitLab CI example")
	}
}

func TestPipelinePythonSnippetsCompile(t *testing.T) {
	python := harness.Tool(t, "python3")
	blocks := pipelineBlocks(t, "python")
	if len(blocks) < 4 {
		t.Fatalf("%d Python blocks, want the OTel, logging, Airflow and KFP examples", len(blocks))
	}
	for _, b := range blocks {
		cmd := exec.Command(python, "-c", "import ast, sys; ast.parse(sys.stdin.read())")
		cmd.Stdin = bytes.NewReader(b)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("Python block does not parse: %v\n%s\n%s", err, out, b)
		}
		text := string(b)
		if strings.Contains(text, "KubernetesPodOperator(") && (strings.Contains(text, "cmds=") || !strings.Contains(text, "arguments=")) {
			t.Error("the Airflow example must pass the command as arguments, not cmds")
		}
		if strings.Contains(text, "dsl.ContainerSpec(") && !strings.Contains(text, "paddle-entrypoint") {
			t.Error("the KFP component must call paddle-entrypoint itself")
		}
	}
}

// The logging snippet runs: with the variable the entrypoint sets, each
// line carries the task and the step.
func TestPipelineLoggingSnippetRuns(t *testing.T) {
	python := harness.Tool(t, "python3")
	for _, b := range pipelineBlocks(t, "python") {
		if !bytes.Contains(b, []byte("class TaskFilter")) {
			continue
		}
		cmd := exec.Command(python, "-")
		cmd.Stdin = bytes.NewReader(b)
		cmd.Env = []string{"OTEL_RESOURCE_ATTRIBUTES=paddle.task.id=t-1,cicd.pipeline.task.name=%E8%AF%84%E4%BC%B0", "PYTHONIOENCODING=utf-8"}
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "task=t-1 step=评估 INFO epoch 1 done") {
			t.Errorf("logging snippet: %v\n%s", err, out)
		}
		return
	}
	t.Fatal("no logging snippet")
}

func TestPipelineShellSnippetsParse(t *testing.T) {
	bash := harness.Tool(t, "bash")
	for _, b := range pipelineBlocks(t, "bash") {
		cmd := exec.Command(bash, "-n")
		cmd.Stdin = bytes.NewReader(b)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("shell block: %v\n%s", err, out)
		}
		if !bytes.Contains(b, []byte("paddle-entrypoint")) {
			t.Error("the Slurm example must call paddle-entrypoint explicitly")
		}
	}
}
