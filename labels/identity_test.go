package labels

import (
	"strings"
	"testing"

	"github.com/paddle-entrypoint/paddle-entrypoint/entrypoint/policy"
)

// identityLines returns the labels file's lines from "trainers_num" on,
// without the five leading keys and task_id/hostname, so the identity keys'
// order can be read.
func identityLines(s *Set) string {
	var out []string
	for _, p := range s.Pairs() {
		switch p.Key {
		case "task_name", "project", "owner", "gpu_count", "start_time", "task_id", "hostname":
			continue
		}
		out = append(out, p.Key+"="+p.Value)
	}
	return strings.Join(out, "\n")
}

func TestIdentityFileOrder(t *testing.T) {
	s, problems := parse(
		"PADDLE_TRAINERS_NUM=2",
		"PADDLE_LABEL_TEAM=vision",
		"JOB_COMPLETION_INDEX=3",
		"POD_UID=0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b",
		"NODE_NAME=gpu-node-7",
		"POD_NAME=train-abc12",
		"POD_NAMESPACE=ml-prod",
		"CI_JOB_NAME=evaluate",
		"CI_PIPELINE_ID=991",
		"CI_PROJECT_NAME=ocr",
		"PADDLE_PRIORITY=bogus",
	)
	if len(problems) != 1 || problems[0].Var != "PADDLE_PRIORITY" {
		t.Fatalf("problems = %v, want only PADDLE_PRIORITY", problems)
	}
	want := strings.Join([]string{
		"trainers_num=2",
		"pipeline=ocr", "pipeline_run=991", "step=evaluate", "orchestrator=gitlab",
		"k8s_namespace=ml-prod", "k8s_pod=train-abc12", "k8s_node=gpu-node-7",
		"k8s_pod_uid=0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b", "k8s_job_index=3",
		"team=vision", "invalid_labels=priority",
	}, "\n")
	if got := identityLines(s); got != want {
		t.Errorf("labels =\n%s\nwant\n%s", got, want)
	}
}

func TestIdentitySources(t *testing.T) {
	gitlab := []string{"CI_PROJECT_NAME=ocr", "CI_PIPELINE_ID=991", "CI_JOB_NAME=train"}
	github := []string{"GITHUB_WORKFLOW=nightly", "GITHUB_RUN_ID=123456", "GITHUB_JOB=evaluate"}
	slurm := []string{"SLURM_JOB_NAME=pretrain", "SLURM_JOB_ID=4242", "SLURM_STEP_ID=0"}
	join := func(a ...[]string) []string {
		var out []string
		for _, x := range a {
			out = append(out, x...)
		}
		return out
	}
	tests := []struct {
		name string
		env  []string
		want string // pipeline/pipeline_run/step/orchestrator
	}{
		{"none", nil, "///"},
		{"gitlab", gitlab, "ocr/991/train/gitlab"},
		{"github", github, "nightly/123456/evaluate/github"},
		{"slurm", slurm, "pretrain/4242/0/slurm"},
		{"gitlab before github and slurm", join(slurm, github, gitlab), "ocr/991/train/gitlab"},
		{"github before slurm", join(slurm, github), "nightly/123456/evaluate/github"},
		{"explicit wins, the rest filled", join(gitlab, []string{"PADDLE_PIPELINE=search", "PADDLE_STEP=export"}), "search/991/export/gitlab"},
		{"all explicit: no orchestrator", join(gitlab, []string{"PADDLE_PIPELINE=a", "PADDLE_PIPELINE_RUN=b", "PADDLE_STEP=c"}), "a/b/c/"},
		{"first found is used even when partial", join([]string{"SLURM_JOB_ID=7"}, github[:0]), "/7//slurm"},
		{"partial gitlab hides github", join([]string{"CI_PIPELINE_ID=5"}, github), "/5//gitlab"},
		{"explicit only", []string{"PADDLE_PIPELINE=p", "PADDLE_PIPELINE_RUN=r-1", "PADDLE_STEP=s"}, "p/r-1/s/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, problems := parse(tt.env...)
			if len(problems) != 0 {
				t.Fatalf("problems: %v", problems)
			}
			got := strings.Join([]string{s.Pipeline, s.PipelineRun, s.Step, s.Orchestrator}, "/")
			if got != tt.want {
				t.Errorf("pipeline/run/step/orchestrator = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestIdentityOrchestratorValuesNeverReject(t *testing.T) {
	long := strings.Repeat("p", 64)
	tests := []struct {
		name    string
		env     []string
		wantVar string
		check   func(*Set) bool
	}{
		{"workflow name with spaces", []string{"GITHUB_WORKFLOW=Nightly Build", "GITHUB_RUN_ID=77"}, "GITHUB_WORKFLOW",
			func(s *Set) bool { return s.Pipeline == "" && s.PipelineRun == "77" && s.Orchestrator == "github" }},
		{"pod name over 63 characters", []string{"POD_NAME=" + long, "POD_NAMESPACE=ml"}, "POD_NAME",
			func(s *Set) bool { return s.K8sPod == "" && s.K8sNamespace == "ml" }},
		{"job index not a number", []string{"JOB_COMPLETION_INDEX=x1"}, "JOB_COMPLETION_INDEX",
			func(s *Set) bool { return s.K8sJobIndex == "" }},
		{"sensitive job name", []string{"CI_JOB_NAME=password=hunter2"}, "CI_JOB_NAME",
			func(s *Set) bool { return s.Step == "" && s.Orchestrator == "" }},
		{"newline in a node name", []string{"NODE_NAME=n1\nproject=admin"}, "NODE_NAME",
			func(s *Set) bool { return s.K8sNode == "" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, problems := parse(tt.env...)
			if len(problems) != 1 {
				t.Fatalf("problems = %v, want one", problems)
			}
			p := problems[0]
			if p.Var != tt.wantVar || !p.Notice {
				t.Errorf("problem = %+v, want a notice naming %s", p, tt.wantVar)
			}
			if len(s.Invalid) != 0 {
				t.Errorf("invalid_labels = %v, want none (the author did not write it)", s.Invalid)
			}
			if !tt.check(s) {
				t.Errorf("set = %+v", s.Identity)
			}
			if strings.Contains(p.Rule, "hunter2") {
				t.Errorf("notice repeats the sensitive value: %q", p.Rule)
			}
			assertOneLinePerKey(t, s.Format())
		})
	}
}

func TestIdentityExplicitBadValueIsAProblem(t *testing.T) {
	s, problems := parse("PADDLE_STEP=eval step", "CI_JOB_NAME=evaluate")
	if len(problems) != 1 || problems[0].Notice || problems[0].Var != "PADDLE_STEP" {
		t.Fatalf("problems = %+v, want one rejecting problem for PADDLE_STEP", problems)
	}
	if s.Step != "" || strings.Join(s.Invalid, ",") != "step" {
		t.Errorf("step = %q, invalid = %v; want the bad value dropped and recorded, the orchestrator not used", s.Step, s.Invalid)
	}
}

func TestIdentityOldExtraLabels(t *testing.T) {
	tests := []struct {
		name    string
		env     []string
		want    string // pipeline/step/orchestrator/k8s_pod
		extra   string // the extra labels left
		notices []string
	}{
		{"fills its key", []string{"PADDLE_LABEL_STEP=train", "PADDLE_LABEL_TEAM=cv"}, "/train//", "team=cv",
			[]string{"PADDLE_LABEL_STEP: step is now a built-in key: rename PADDLE_LABEL_STEP to PADDLE_STEP"}},
		{"dropped when its own variable is set", []string{"PADDLE_LABEL_STEP=train", "PADDLE_STEP=eval"}, "/eval//", "",
			[]string{"PADDLE_LABEL_STEP: step is now a built-in key set by PADDLE_STEP; this label is dropped: remove it"}},
		{"wins over the orchestrator", []string{"PADDLE_LABEL_PIPELINE=ocr", "GITHUB_WORKFLOW=nightly", "GITHUB_JOB=eval"}, "ocr/eval/github/", "",
			[]string{"PADDLE_LABEL_PIPELINE: pipeline is now a built-in key: rename PADDLE_LABEL_PIPELINE to PADDLE_PIPELINE"}},
		{"kubernetes key", []string{"PADDLE_LABEL_K8S_POD=p-1"}, "///p-1", "",
			[]string{"PADDLE_LABEL_K8S_POD: k8s_pod is now a built-in key: rename PADDLE_LABEL_K8S_POD to POD_NAME"}},
		{"kubernetes key set by the downward API", []string{"PADDLE_LABEL_K8S_POD=p-1", "POD_NAME=p-2"}, "///p-2", "",
			[]string{"PADDLE_LABEL_K8S_POD: k8s_pod is now a built-in key set by POD_NAME; this label is dropped: remove it"}},
		{"orchestrator kept when nothing computed it", []string{"PADDLE_LABEL_ORCHESTRATOR=argo"}, "//argo/", "",
			[]string{"PADDLE_LABEL_ORCHESTRATOR: orchestrator is now a built-in key: rename PADDLE_LABEL_ORCHESTRATOR to nothing: it is computed (remove it)"}},
		{"orchestrator computed wins", []string{"PADDLE_LABEL_ORCHESTRATOR=argo", "SLURM_JOB_NAME=pre"}, "pre//slurm/", "",
			[]string{"PADDLE_LABEL_ORCHESTRATOR: orchestrator is now a built-in key (here slurm); this label is dropped: remove it"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, problems := parse(tt.env...)
			var notes []string
			for _, p := range problems {
				if !p.Notice {
					t.Errorf("rejecting problem %v: an old extra label is never a rejection", p)
				}
				notes = append(notes, p.Error())
			}
			if strings.Join(notes, "|") != strings.Join(tt.notices, "|") {
				t.Errorf("notices =\n%q\nwant\n%q", notes, tt.notices)
			}
			got := strings.Join([]string{s.Pipeline, s.Step, s.Orchestrator, s.K8sPod}, "/")
			if got != tt.want {
				t.Errorf("pipeline/step/orchestrator/k8s_pod = %q, want %q", got, tt.want)
			}
			var extra []string
			for k, v := range s.Extra {
				extra = append(extra, k+"="+v)
			}
			if strings.Join(extra, ",") != tt.extra {
				t.Errorf("extra labels = %v, want %q", extra, tt.extra)
			}
		})
	}
}

func TestIdentityUnderPolicy(t *testing.T) {
	pol, err := policy.Parse([]byte(`{"mode": "enforce", "required": ["pipeline"],
		"labels": {"step": {"allow": ["train", "eval*"]}}, "extra_labels": ["step", "team"]}`))
	if err != nil {
		t.Fatalf("a policy listing a now built-in key in extra_labels must stay valid: %v", err)
	}
	opt := Options{Policy: pol, Hostname: "h", Now: now, NewID: func() string { return "id" }}

	// The orchestrator's step breaks the allow-list: a notice, not a refusal.
	s, problems := Parse([]string{"CI_PROJECT_NAME=ocr", "CI_JOB_NAME=deploy"}, opt)
	if len(problems) != 1 || !problems[0].Notice || problems[0].Var != "CI_JOB_NAME" {
		t.Fatalf("problems = %+v, want one notice for CI_JOB_NAME", problems)
	}
	if s.Pipeline != "ocr" || s.Step != "" {
		t.Errorf("pipeline=%q step=%q", s.Pipeline, s.Step)
	}

	// The task's own step breaks it: a rejecting problem.
	_, problems = Parse([]string{"PADDLE_PIPELINE=ocr", "PADDLE_STEP=deploy"}, opt)
	if len(problems) != 1 || problems[0].Notice || problems[0].Var != "PADDLE_STEP" {
		t.Fatalf("problems = %+v, want one rejecting problem for PADDLE_STEP", problems)
	}

	// required pipeline, not set: named by its own variable.
	_, problems = Parse([]string{"PADDLE_STEP=train"}, opt)
	if len(problems) != 1 || problems[0].Var != "PADDLE_PIPELINE" || problems[0].Notice {
		t.Fatalf("problems = %+v, want PADDLE_PIPELINE required", problems)
	}
}
