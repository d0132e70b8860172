package register

import (
	"encoding/json"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/paddle-entrypoint/paddle-entrypoint/gpu"
	"github.com/paddle-entrypoint/paddle-entrypoint/labels"
)

func TestBody(t *testing.T) {
	full := &labels.Set{
		TaskName: "resnet50", Project: "vision", Owner: "ann@example.com",
		Priority: "high", Env: "prod", DurationEst: 7200,
		TaskID: "task-1", Hostname: "node-7", StartTime: 1732950000, SubmitTime: 1732946400,
		TrainerID: "0", TrainersNum: "8", GPUCount: 2,
		GPUUUIDs: []string{"GPU-a", "GPU-b"},
		Extra:    map[string]string{"cost_center": "cc-1024"},
		Invalid:  []string{"env", "team"},
		Identity: labels.Identity{Pipeline: "ocr", PipelineRun: "991", Step: "train", Orchestrator: "gitlab",
			K8sNamespace: "ml", K8sPod: "train-0", K8sNode: "gpu-7", K8sPodUID: "0f1e2d3c", K8sJobIndex: "0"},
	}
	inv := gpu.Inventory{
		Devices: []gpu.Device{
			{Index: 0, UUID: "GPU-a", Name: "NVIDIA H100", MemoryTotalBytes: 85520809984},
			{Index: 1, UUID: "GPU-b", Name: "NVIDIA H100", MemoryTotalBytes: 85520809984},
		},
		DriverVersion: "550.54.15", Source: "nvml",
	}
	tests := []struct {
		name string
		set  *labels.Set
		inv  gpu.Inventory
		want string
	}{
		{"everything set", full, inv,
			`{"task_name":"resnet50","project":"vision","owner":"ann@example.com","gpu_count":2,` +
				`"schema_version":1,"task_id":"task-1","start_time":1732950000,"submit_time":1732946400,"hostname":"node-7",` +
				`"priority":"high","env":"prod","duration_est":7200,"trainer_id":0,"trainers_num":8,` +
				`"pipeline":"ocr","pipeline_run":"991","step":"train","orchestrator":"gitlab",` +
				`"k8s_namespace":"ml","k8s_pod":"train-0","k8s_node":"gpu-7","k8s_pod_uid":"0f1e2d3c","k8s_job_index":0,` +
				`"invalid_labels":["env","team"],"labels":{"cost_center":"cc-1024"},` +
				`"gpus":[{"index":0,"uuid":"GPU-a","name":"NVIDIA H100","memory_total_bytes":85520809984,"share":1},` +
				`{"index":1,"uuid":"GPU-b","name":"NVIDIA H100","memory_total_bytes":85520809984,"share":1}],` +
				`"driver_version":"550.54.15"}`},
		{"defaults, no GPU, no extras", &labels.Set{
			TaskName: "unknown_task", Project: "default", Owner: "anonymous",
			TaskID: "t", Hostname: "h", StartTime: 1,
		}, gpu.Inventory{Source: "none"},
			`{"task_name":"unknown_task","project":"default","owner":"anonymous","gpu_count":0,` +
				`"schema_version":1,"task_id":"t","start_time":1,"hostname":"h","labels":{},"gpus":[]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(Body(tt.set, tt.inv)); got != tt.want {
				t.Errorf("Body =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

// FuzzBody: whatever the strings, the body is one JSON object with exactly
// the expected keys and the values given; no value can forge a key.
func FuzzBody(f *testing.F) {
	f.Add("t", "p", "o", "k", "v", "GPU-1", `","owner":"root`)
	f.Add("a\"b", "\n}", "\\", "x\u2028", "\x00", "\xff", "550")
	f.Fuzz(func(t *testing.T, name, project, owner, key, value, uuid, driver string) {
		s := &labels.Set{TaskName: name, Project: project, Owner: owner, TaskID: "id", Hostname: "h",
			Extra: map[string]string{key: value}}
		inv := gpu.Inventory{Devices: []gpu.Device{{UUID: uuid, Name: name}}, DriverVersion: driver}
		var got map[string]json.RawMessage
		if err := json.Unmarshal(Body(s, inv), &got); err != nil {
			t.Fatalf("body is not JSON: %v", err)
		}
		keys := slices.Sorted(maps.Keys(got))
		want := []string{"gpu_count", "gpus", "hostname", "labels", "owner", "project", "schema_version", "start_time", "task_id", "task_name"}
		if driver != "" {
			want = append(want, "driver_version")
			slices.Sort(want)
		}
		if !slices.Equal(keys, want) {
			t.Fatalf("keys %v, want %v", keys, want)
		}
		var extras map[string]string
		json.Unmarshal(got["labels"], &extras)
		if len(extras) != 1 {
			t.Fatalf("labels %v, want one", extras)
		}
		var gotOwner string
		json.Unmarshal(got["owner"], &gotOwner)
		if want := toValid(owner); gotOwner != want {
			t.Fatalf("owner %q, want %q", gotOwner, want)
		}
	})
}

// toValid is what encoding/json makes of a string: invalid UTF-8 replaced.
func toValid(s string) string {
	b, _ := json.Marshal(s)
	var out string
	json.Unmarshal(b, &out)
	return out
}

// The OpenAPI file documents every key the body can hold, and says which
// are always there.
func TestOpenAPIDocumentsBody(t *testing.T) {
	spec, err := os.ReadFile("../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	text := string(spec)
	start := strings.Index(text, "    RegistrationV1:\n")
	end := strings.Index(text, "    GPU:\n")
	if start < 0 || end < start {
		t.Fatal("docs/openapi.yaml: no RegistrationV1 schema followed by GPU")
	}
	schema := text[start:end]
	full := &labels.Set{TaskName: "t", Project: "p", Owner: "o", Priority: "low", Env: "dev", DurationEst: 1,
		TaskID: "i", Hostname: "h", StartTime: 1, TrainerID: "0", TrainersNum: "1", Invalid: []string{"x"},
		Extra: map[string]string{"k": "v"}, Identity: labels.Identity{Pipeline: "p", PipelineRun: "r", Step: "s",
			Orchestrator: "slurm", K8sNamespace: "n", K8sPod: "p", K8sNode: "n", K8sPodUID: "u", K8sJobIndex: "1"}}
	inv := gpu.Inventory{Devices: []gpu.Device{{UUID: "GPU-1"}}, DriverVersion: "1"}
	var all, minimal map[string]json.RawMessage
	json.Unmarshal(Body(full, inv), &all)
	json.Unmarshal(Body(&labels.Set{}, gpu.Inventory{}), &minimal)
	for key := range all {
		if !strings.Contains(schema, "\n        "+key+":\n") {
			t.Errorf("docs/openapi.yaml: RegistrationV1 does not document %q", key)
		}
	}
	// Required are the keys the monitor requires (wire's tests hold the
	// schema to them); the others always sent are named in the schema's
	// description.
	head := schema[:strings.Index(schema, "properties:")]
	for key := range minimal {
		if !strings.Contains(head, "`"+key+"`") {
			t.Errorf("docs/openapi.yaml: %q is always sent but the schema's description does not say so", key)
		}
	}
	var gpus []map[string]any
	json.Unmarshal(all["gpus"], &gpus)
	for key := range gpus[0] {
		if !strings.Contains(text[end:], "\n        "+key+":\n") {
			t.Errorf("docs/openapi.yaml: GPU does not document %q", key)
		}
	}
}
