package entrypoint

// Black-box tests of the task identity exports (docs/pipelines.md): the
// pipeline and Kubernetes keys in the labels file and the registration
// body, and OTEL_RESOURCE_ATTRIBUTES in the command's environment.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// pipeSetenv sets KEY=VALUE pairs on k.
func pipeSetenv(k *task, kvs ...string) {
	for _, kv := range kvs {
		name, value, _ := strings.Cut(kv, "=")
		k.Setenv(name, value)
	}
}

// pipeAfter returns the labels file's lines after trainers_num (or after
// hostname when there is none).
func pipeAfter(t *testing.T, k *task) string {
	t.Helper()
	lines := readLabels(t, k.LabelsFile())
	for i, l := range lines {
		if strings.HasPrefix(l, "hostname=") {
			return strings.Join(lines[i+1:], "\n")
		}
	}
	t.Fatalf("no hostname line in %q", lines)
	return ""
}

func TestPipelineLabelsFileAndBody(t *testing.T) {
	m := newRegMonitor(t, "201")
	k := regTask(t, m.URL, 5*time.Second)
	pipeSetenv(k,
		"PADDLE_TASK_ID=job-1", "PADDLE_TRAINERS_NUM=2", "PADDLE_LABEL_TEAM=cv",
		"CI_PROJECT_NAME=ocr", "CI_PIPELINE_ID=991", "CI_JOB_NAME=evaluate",
		"GITHUB_WORKFLOW=ignored", "SLURM_JOB_ID=1",
		"POD_NAMESPACE=ml-prod", "POD_NAME=eval-7xk2p", "NODE_NAME=gpu-node-3",
		"POD_UID=6c1f0a52-3b0e-4e4b-9d7a-1f2e3d4c5b6a", "JOB_COMPLETION_INDEX=4",
	)
	r := k.Run()
	if r.Code != 0 {
		t.Fatalf("exit %d:\n%s", r.Code, r.Stderr)
	}
	want := strings.Join([]string{"trainers_num=2",
		"pipeline=ocr", "pipeline_run=991", "step=evaluate", "orchestrator=gitlab",
		"k8s_namespace=ml-prod", "k8s_pod=eval-7xk2p", "k8s_node=gpu-node-3",
		"k8s_pod_uid=6c1f0a52-3b0e-4e4b-9d7a-1f2e3d4c5b6a", "k8s_job_index=4", "slurm_job=1", "team=cv"}, "\n")
	if got := pipeAfter(t, k); got != want {
		t.Errorf("labels file after hostname:\n%s\nwant\n%s", got, want)
	}
	reqs := m.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d registrations, want 1", len(reqs))
	}
	var body map[string]any
	if err := json.Unmarshal(reqs[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	wantBody := map[string]any{"pipeline": "ocr", "pipeline_run": "991", "step": "evaluate", "orchestrator": "gitlab",
		"k8s_namespace": "ml-prod", "k8s_pod": "eval-7xk2p", "k8s_node": "gpu-node-3",
		"k8s_pod_uid": "6c1f0a52-3b0e-4e4b-9d7a-1f2e3d4c5b6a", "k8s_job_index": 4.0, "slurm_job": "1"}
	for key, v := range wantBody {
		if body[key] != v {
			t.Errorf("body %s = %#v, want %#v", key, body[key], v)
		}
	}
	if labels := body["labels"].(map[string]any); len(labels) != 1 || labels["team"] != "cv" {
		t.Errorf("body labels = %v, want only team", labels)
	}
}

// A Slurm job: SLURM_JOB_ID is slurm_job in the labels file and the body
// (besides pipeline_run, which the task may set itself), so that the node
// agent's observations of the job are tied to the task; a value that is not
// digits is dropped with a warning, never a refusal.
func TestPipelineSlurmJob(t *testing.T) {
	m := newRegMonitor(t, "201")
	k := regTask(t, m.URL, 5*time.Second)
	pipeSetenv(k, "PADDLE_PIPELINE_RUN=own-run", "SLURM_JOB_NAME=pretrain", "SLURM_JOB_ID=4242", "SLURM_STEP_ID=0")
	if r := k.Run(); r.Code != 0 {
		t.Fatalf("exit %d:\n%s", r.Code, r.Stderr)
	}
	if got, want := pipeAfter(t, k), "pipeline=pretrain\npipeline_run=own-run\nstep=0\norchestrator=slurm\nslurm_job=4242"; got != want {
		t.Errorf("labels file after hostname:\n%s\nwant\n%s", got, want)
	}
	reqs := m.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d registrations, want 1", len(reqs))
	}
	var body map[string]any
	if err := json.Unmarshal(reqs[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	if body["slurm_job"] != "4242" || body["pipeline_run"] != "own-run" {
		t.Errorf("body slurm_job %#v, pipeline_run %#v; want \"4242\" and \"own-run\"", body["slurm_job"], body["pipeline_run"])
	}

	polNoSystemPolicy(t)
	k = newTask(t, "/bin/true")
	pipeSetenv(k, "PADDLE_LABELS_MODE=enforce", "SLURM_JOB_ID=42;rm")
	r := k.Run()
	if r.Code != 0 {
		t.Fatalf("exit %d, want 0:\n%s", r.Code, r.Stderr)
	}
	if strings.Contains(strings.Join(readLabels(t, k.LabelsFile()), "\n"), "slurm_job=") {
		t.Errorf("a SLURM_JOB_ID that is not digits was written")
	}
	if logLine(r.Stderr, "WARN", "label note", "var=SLURM_JOB_ID") == "" {
		t.Errorf("no warning names SLURM_JOB_ID:\n%s", r.Stderr)
	}
}

// An orchestrator's value that breaks the name rule is dropped with a
// warning and never stops a start, even in enforce mode; an old extra label
// of a new built-in key fills it, with a warning to rename it.
func TestPipelineOrchestratorValuesNeverRefuse(t *testing.T) {
	polNoSystemPolicy(t)
	k := newTask(t, "/bin/true")
	pipeSetenv(k, "PADDLE_LABELS_MODE=enforce",
		"GITHUB_WORKFLOW=Nightly Build", "GITHUB_RUN_ID=8812", "GITHUB_JOB=train",
		"POD_NAME="+strings.Repeat("a", 64), "PADDLE_LABEL_STEP=old-step", "PADDLE_LABEL_K8S_NODE=n-1")
	r := k.Run()
	if r.Code != 0 {
		t.Fatalf("exit %d, want 0 (nothing the task's author wrote is wrong):\n%s", r.Code, r.Stderr)
	}
	want := "pipeline_run=8812\nstep=old-step\norchestrator=github\nk8s_node=n-1"
	if got := pipeAfter(t, k); got != want {
		t.Errorf("labels file after hostname:\n%s\nwant\n%s", got, want)
	}
	for _, v := range []string{"GITHUB_WORKFLOW", "POD_NAME", "PADDLE_LABEL_STEP", "PADDLE_LABEL_K8S_NODE"} {
		n := 0
		for _, line := range strings.Split(r.Stderr, "\n") {
			if strings.Contains(line, "level=WARN msg=\"label note\"") && strings.Contains(line, " var="+v+" ") {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%d warnings name %s, want 1:\n%s", n, v, r.Stderr)
		}
	}
	if !strings.Contains(r.Stderr, "rename PADDLE_LABEL_STEP to PADDLE_STEP") {
		t.Errorf("no advice to rename PADDLE_LABEL_STEP:\n%s", r.Stderr)
	}
	if strings.Contains(r.Stderr, "level=ERROR") {
		t.Errorf("an error was logged:\n%s", r.Stderr)
	}

	// The task's own PADDLE_STEP breaking the rule is still refused.
	k.Setenv("PADDLE_STEP", "eval step")
	if r := k.Run(); r.Code != 65 || !strings.Contains(r.Stderr, "var=PADDLE_STEP") {
		t.Errorf("exit %d, want 65 naming PADDLE_STEP:\n%s", r.Code, r.Stderr)
	}
}

func TestPipelineOTelResourceAttributes(t *testing.T) {
	tests := []struct {
		name   string
		env    []string
		want   string // the command's OTEL_RESOURCE_ATTRIBUTES; "-" for unset
		absent bool
	}{
		{"added", []string{"PADDLE_TASK_NAME=训练", "PADDLE_OWNER=ann+ml@example.com", "PADDLE_PIPELINE=ocr", "PADDLE_STEP=eval", "POD_NAME=eval-1", "POD_UID=u-1"},
			"paddle.task.id=job-1,paddle.task.name=%E8%AE%AD%E7%BB%83,paddle.project=default,paddle.owner=ann%2Bml@example.com," +
				"cicd.pipeline.name=ocr,cicd.pipeline.task.name=eval,k8s.pod.name=eval-1,k8s.pod.uid=u-1", false},
		{"the caller's keys win", []string{"OTEL_RESOURCE_ATTRIBUTES=service.name=trainer,k8s.pod.name=mine", "POD_NAME=eval-1", "PADDLE_PROJECT=cv"},
			"service.name=trainer,k8s.pod.name=mine,paddle.task.id=job-1,paddle.task.name=unknown_task,paddle.project=cv,paddle.owner=anonymous", false},
		{"off leaves it unset", []string{"PADDLE_OTEL=off", "POD_NAME=eval-1"}, "", true},
		{"off leaves it as it was", []string{"PADDLE_OTEL=off", "OTEL_RESOURCE_ATTRIBUTES=a=b"}, "a=b", false},
		{"a malformed PADDLE_OTEL keeps the default", []string{"PADDLE_OTEL=maybe"},
			"paddle.task.id=job-1,paddle.task.name=unknown_task,paddle.project=default,paddle.owner=anonymous", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := newTask(t, bin.report)
			pipeSetenv(k, append([]string{"PADDLE_TASK_ID=job-1"}, tt.env...)...)
			r := k.Run()
			if r.Code != 0 {
				t.Fatalf("exit %d:\n%s", r.Code, r.Stderr)
			}
			rep := parseReport(t, r.Stdout)
			got, ok := rep.Getenv("OTEL_RESOURCE_ATTRIBUTES")
			if ok == tt.absent || got != tt.want {
				t.Errorf("OTEL_RESOURCE_ATTRIBUTES = %q (set %v), want %q (set %v)", got, ok, tt.want, !tt.absent)
			}
			n := 0
			for _, kv := range rep.Env {
				if strings.HasPrefix(kv, "OTEL_RESOURCE_ATTRIBUTES=") {
					n++
				}
			}
			if n > 1 {
				t.Errorf("OTEL_RESOURCE_ATTRIBUTES appears %d times", n)
			}
		})
	}
}

// pipeTextfileTask is a GPU task whose textfile directory is dir.
func pipeTextfileTask(t *testing.T, dir string, gpus int, id string) *task {
	k := gpuTask(t, gpus, "/bin/true")
	pipeSetenv(k, "PADDLE_TEXTFILE_DIR="+dir, "PADDLE_TASK_ID="+id, "PADDLE_PROJECT=vision",
		"PADDLE_OWNER=ann@example.com", "PADDLE_PIPELINE=ocr", "PADDLE_STEP=train")
	return k
}

func TestPipelineTextfileExecMode(t *testing.T) {
	dir := t.TempDir()
	// A task that ran on GPU 1 before and left its file (exec mode).
	old := pipeTextfileTask(t, dir, 2, "old-task")
	if r := old.Run(); r.Code != 0 {
		t.Fatalf("exit %d:\n%s", r.Code, r.Stderr)
	}
	oldFile := filepath.Join(dir, "paddle-task-old-task.prom")
	if _, err := os.Stat(oldFile); err != nil {
		t.Fatalf("exec mode with GPUs wrote no textfile: %v", err)
	}

	k := pipeTextfileTask(t, dir, 1, "new-task")
	r := k.Run()
	if r.Code != 0 {
		t.Fatalf("exit %d:\n%s", r.Code, r.Stderr)
	}
	host, _ := os.Hostname()
	m := labelMap(t, k.LabelsFile())
	want := fmt.Sprintf(`# HELP paddle_task_info Labels of a task started by paddle-entrypoint; always 1.
# TYPE paddle_task_info gauge
paddle_task_info{task_id="new-task",task_name="unknown_task",project="vision",owner="ann@example.com",priority="",env="",pipeline="ocr",step="train",hostname="%s"} 1
# HELP paddle_task_gpu_info One series per GPU of a task, by the GPU's UUID as dcgm-exporter labels it; always 1.
# TYPE paddle_task_gpu_info gauge
paddle_task_gpu_info{task_id="new-task",project="vision",owner="ann@example.com",hostname="%s",UUID="%s",gpu_model="NVIDIA A100-SXM4-80GB"} 1
# HELP paddle_task_gpu_share The fraction of the physical GPU the task holds on this GPU (instance): 1 for a whole GPU, slices / total slices for a MIG instance, the platform's share for a time-sliced or MPS GPU.
# TYPE paddle_task_gpu_share gauge
paddle_task_gpu_share{task_id="new-task",project="vision",owner="ann@example.com",UUID="%s",GPU_I_ID=""} 1
# HELP paddle_task_start_time_seconds When the task started, in Unix seconds.
# TYPE paddle_task_start_time_seconds gauge
paddle_task_start_time_seconds{task_id="new-task"} %s
`, host, host, fakeUUID(0), fakeUUID(0), pipeFloat(t, m["start_time"]))
	got, err := os.ReadFile(filepath.Join(dir, "paddle-task-new-task.prom"))
	if err != nil || string(got) != want {
		t.Errorf("textfile (%v):\n%s\nwant\n%s", err, got, want)
	}
	if _, err := os.Stat(oldFile); !os.IsNotExist(err) {
		t.Errorf("the old task's file claiming GPU 0 is still there: %v", err)
	}
	if logLine(r.Stderr, "INFO", "stale textfile removed", "paddle-task-old-task.prom", fakeUUID(0)) == "" {
		t.Errorf("no log line about the stale file:\n%s", r.Stderr)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only the new file", len(entries))
	}

	// Shared GPUs: another task's claim is not stale.
	shared := pipeTextfileTask(t, dir, 1, "shared-task")
	shared.Setenv("PADDLE_GPU_SHARED", "1")
	if r := shared.Run(); r.Code != 0 {
		t.Fatalf("exit %d:\n%s", r.Code, r.Stderr)
	}
	for _, id := range []string{"new-task", "shared-task"} {
		if _, err := os.Stat(filepath.Join(dir, "paddle-task-"+id+".prom")); err != nil {
			t.Errorf("with PADDLE_GPU_SHARED=1: %v", err)
		}
	}

	// A fraction of a GPU (PADDLE_GPU_SHARE below 1) is a shared GPU, even
	// with PADDLE_GPU_SHARED=0.
	quarter := pipeTextfileTask(t, dir, 1, "quarter-task")
	quarter.Setenv("PADDLE_GPU_SHARE", "0.25")
	quarter.Setenv("PADDLE_GPU_SHARED", "0")
	if r := quarter.Run(); r.Code != 0 {
		t.Fatalf("exit %d:\n%s", r.Code, r.Stderr)
	}
	for _, id := range []string{"new-task", "shared-task", "quarter-task"} {
		if _, err := os.Stat(filepath.Join(dir, "paddle-task-"+id+".prom")); err != nil {
			t.Errorf("with PADDLE_GPU_SHARE=0.25: %v", err)
		}
	}

	// A CPU task in exec mode writes nothing: nothing would remove it.
	cpu := pipeTextfileTask(t, dir, 0, "cpu-task")
	if r := cpu.Run(); r.Code != 0 {
		t.Fatalf("exit %d:\n%s", r.Code, r.Stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "paddle-task-cpu-task.prom")); !os.IsNotExist(err) {
		t.Errorf("CPU task in exec mode wrote a textfile: %v", err)
	}
}

// pipeFloat is how the exposition format writes a Unix time.
func pipeFloat(t *testing.T, s string) string {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatal(err)
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// A directory the task may not write, and a stale file it may not remove
// (another user's, in a sticky directory): warnings, and the command runs.
func TestPipelineTextfileFaults(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run the entrypoint as another user")
	}
	dir := t.TempDir()
	os.Chmod(filepath.Dir(dir), 0o755)
	if err := os.Chmod(dir, os.ModeSticky|0o777); err != nil {
		t.Fatal(err)
	}
	old := pipeTextfileTask(t, dir, 1, "roots-task")
	if r := old.Run(); r.Code != 0 {
		t.Fatalf("exit %d:\n%s", r.Code, r.Stderr)
	}
	k := pipeTextfileTask(t, dir, 1, "nobody-task")
	pipeAsNobody(t, k)
	r := k.Run()
	if r.Code != 0 {
		t.Fatalf("exit %d:\n%s", r.Code, r.Stderr)
	}
	if logLine(r.Stderr, "WARN", "cannot be removed", "paddle-task-roots-task.prom") == "" {
		t.Errorf("no warning about the file it may not remove:\n%s", r.Stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "paddle-task-nobody-task.prom")); err != nil {
		t.Errorf("own file not written: %v", err)
	}

	ro := t.TempDir()
	os.Chmod(ro, 0o555)
	k = pipeTextfileTask(t, ro, 1, "ro-task")
	pipeAsNobody(t, k)
	r = k.Run()
	if r.Code != 0 || logLine(r.Stderr, "WARN", "textfile not written") == "" {
		t.Errorf("exit %d, want 0 and a warning:\n%s", r.Code, r.Stderr)
	}
}

// pipeAsNobody runs k as user nobody, with its labels file and spool in a
// directory nobody may write.
func pipeAsNobody(t *testing.T, k *task) {
	t.Helper()
	own := filepath.Join(k.Dir, "nobody")
	if err := os.Mkdir(own, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(own, 0o777)
	// The built binaries' directory is private (os.MkdirTemp): let
	// nobody run them, as an image's /usr/local/bin would.
	for _, d := range []string{bin.dir, k.Dir, filepath.Dir(k.Dir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	k.Setenv("PADDLE_LABELS_FILE", filepath.Join(own, "labels"))
	k.Setenv("PADDLE_SPOOL_PATH", "off")
	k.Setup = func(c *exec.Cmd) {
		c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
}

// PADDLE_GATE_FILE alone (a template setting it for every step) does
// nothing: the command runs as usual.
func TestPipelineGateFileAlone(t *testing.T) {
	k := newTask(t, "/bin/true")
	k.Setenv("PADDLE_GATE_FILE", filepath.Join(k.Dir, "missing.json"))
	if r := k.Run(); r.Code != 0 {
		t.Errorf("exit %d:\n%s", r.Code, r.Stderr)
	}
}

func TestPipelineGateUsageErrors(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	tests := []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"malformed", []string{"PADDLE_GATE=accuracy=>0.95", "PADDLE_GATE_FILE=m.json"}, nil, `PADDLE_GATE: malformed gate: comparison 1 "accuracy=>0.95"`},
		{"trailing comma", []string{"PADDLE_GATE=accuracy>=0.95,", "PADDLE_GATE_FILE=m.json"}, nil, "comparison 2"},
		{"malformed flag", nil, []string{"--gate", "acc>>1", "--gate-file", "m.json"}, "PADDLE_GATE: malformed gate"},
		{"no file", []string{"PADDLE_GATE=accuracy>=0.95"}, nil, "PADDLE_GATE_FILE is not"},
		{"exec mode", []string{"PADDLE_GATE=accuracy>=0.95", "PADDLE_GATE_FILE=m.json"}, nil, "PADDLE_GATE needs supervise mode"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append(append([]string{}, tt.args...), "/bin/sh", "-c", "touch "+marker)
			k := newTask(t, args...)
			pipeSetenv(k, tt.env...)
			r := k.Run()
			if r.Code != 2 || !strings.Contains(r.Stderr, tt.want) {
				t.Errorf("exit %d, want 2 with %q:\n%s", r.Code, tt.want, r.Stderr)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatal("the command ran")
			}
			if _, err := os.Stat(k.LabelsFile()); err == nil {
				t.Error("labels file written before a usage error")
			}
		})
	}
}
