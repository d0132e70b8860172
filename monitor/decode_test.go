package monitor

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/paddle-entrypoint/paddle-entrypoint/labels"
	"github.com/paddle-entrypoint/paddle-entrypoint/store"
)

const sampleRegistration = `{"task_name":"resnet50","project":"vision","owner":"ann@example.com","gpu_count":2,"schema_version":1,
"task_id":"job-7-worker-0","start_time":1732950000,"submit_time":1732948200,"hostname":"job-7-worker-0","priority":"high","env":"prod","duration_est":7200,
"pipeline":"nightly","pipeline_run":"42","step":"train","orchestrator":"gitlab","k8s_namespace":"ml","k8s_pod":"job-7-0",
"k8s_node":"gpu-3","k8s_pod_uid":"1f2e","k8s_job_index":3,"labels":{"cost_center":"cc-1024"},
"gpus":[{"index":0,"uuid":"GPU-5a3c","name":"NVIDIA H100 80GB HBM3","memory_total_bytes":85520809984},
        {"index":1,"uuid":"GPU-0b1c","name":"NVIDIA H100 80GB HBM3","memory_total_bytes":85520809984}],
"driver_version":"550.54.15"}`

// TestDecodeRegistration: every field the store keeps is read.
func TestDecodeRegistration(t *testing.T) {
	r, err := decodeRegistration([]byte(sampleRegistration))
	if err != nil {
		t.Fatal(err)
	}
	if r.TaskID != "job-7-worker-0" || r.Project != "vision" || r.Owner != "ann@example.com" || r.StartTime != 1732950000 ||
		r.Pipeline != "nightly" || r.PipelineRun != "42" || r.Step != "train" || r.Orchestrator != "gitlab" ||
		r.K8sNamespace != "ml" || r.K8sPod != "job-7-0" || r.K8sNode != "gpu-3" || r.K8sPodUID != "1f2e" ||
		r.K8sJobIndex == nil || *r.K8sJobIndex != 3 || *r.DurationEst != 7200 || r.GPUCount != 2 ||
		r.Labels["cost_center"] != "cc-1024" || len(r.GPUs) != 2 || r.GPUs[1].UUID != "GPU-0b1c" ||
		r.GPUs[1].Model != "NVIDIA H100 80GB HBM3" || r.GPUs[1].MemoryTotal != 85520809984 || r.Priority != "high" || r.Env != "prod" ||
		r.SubmitTime == nil || *r.SubmitTime != 1732948200 {
		t.Fatalf("decoded %+v", r)
	}
}

// TestDecodeSubmitTime: submit_time is optional, whole Unix seconds, and
// never after start_time; a refusal names the field and the rule.
func TestDecodeSubmitTime(t *testing.T) {
	base := `{"task_id":"a","task_name":"b","project":"c","owner":"d","start_time":1000`
	tests := []struct {
		field string
		want  *int64 // nil with err ""
		err   string
	}{
		{``, nil, ""},
		{`,"submit_time":null`, nil, ""},
		{`,"submit_time":1000`, ptr(1000), ""},
		{`,"submit_time":0`, ptr(0), ""},
		{`,"submit_time":1001`, nil, "field submit_time: must not be after start_time (a task is submitted before it starts)"},
		{`,"submit_time":"900"`, nil, "field submit_time: must be an integer"},
		{`,"submit_time":900.5`, nil, "field submit_time: must be an integer"},
		{`,"submit_time":-1`, nil, "field submit_time: must be between 0 and 1099511627776"},
	}
	for _, tt := range tests {
		r, err := decodeRegistration([]byte(base + tt.field + "}"))
		switch {
		case tt.err != "":
			if err == nil || err.Error() != tt.err {
				t.Errorf("%s: error %v, want %q", tt.field, err, tt.err)
			}
		case err != nil:
			t.Errorf("%s: %v", tt.field, err)
		case (r.SubmitTime == nil) != (tt.want == nil) || r.SubmitTime != nil && *r.SubmitTime != *tt.want:
			t.Errorf("%s: submit_time %v", tt.field, r.SubmitTime)
		}
	}
}

func ptr(v int64) *int64 { return &v }

// FuzzDecodeRegistration: whatever comes in, an accepted registration holds
// only values that follow the name rule (nothing can forge a label, a line
// or a key downstream), and a refusal names a field or the body.
func FuzzDecodeRegistration(f *testing.F) {
	f.Add([]byte(sampleRegistration))
	f.Add([]byte(`{"task_id":"a","task_name":"b","project":"c","owner":"d","start_time":1}`))
	f.Add([]byte(`{"task_id":"a\n","task_name":"b","project":"c\"","owner":"d","start_time":-1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeRegistration(b)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "field ") && !strings.Contains(err.Error(), "body") {
				t.Fatalf("error names no field: %v", err)
			}
			return
		}
		for _, v := range []string{r.TaskID, r.TaskName, r.Project} {
			if !labels.ValidName(v, "") {
				t.Fatalf("accepted %q", v)
			}
		}
		if !labels.ValidName(r.Owner, "@+") {
			t.Fatalf("accepted owner %q", r.Owner)
		}
		for k, v := range r.Labels {
			if !labels.ValidName(k, "") || !labels.ValidName(v, "") {
				t.Fatalf("accepted label %q=%q", k, v)
			}
		}
	})
}

// FuzzDecodeCompletion: an accepted completion decodes again, as the store
// does when it joins a completion that came before its registration.
func FuzzDecodeCompletion(f *testing.F) {
	f.Add([]byte(`{"task_id":"a","end_time":5,"duration_seconds":1.5,"exit_code":0,"gate":{"expr":"x>1","passed":true,"reason":""},
"metrics":{"x":2},"gpus":[{"uuid":"u","samples":3,"util_mean":5,"util_p95":9,"memory_used_peak_bytes":7,"idle_share":0.5}]}`))
	f.Add([]byte(`{"task_id":"a","end_time":5,"duration_seconds":1,"exit_code":0,"signal":null,"gpus":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := decodeCompletion(b)
		if err != nil {
			return
		}
		var again store.Completion
		if err := json.Unmarshal(b, &again); err != nil {
			t.Fatalf("accepted a completion the store cannot decode again: %v", err)
		}
		if again.TaskID != c.TaskID || again.EndTime != c.EndTime || again.ExitCode != c.ExitCode {
			t.Fatalf("decoded differently: %+v vs %+v", again, c)
		}
	})
}
