package wire

import (
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
)

func readFile(t testing.TB, name string) []byte {
	t.Helper()
	b, err := readFileErr(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func readFileErr(name string) ([]byte, error) { return os.ReadFile("testdata/" + name) }

func p64(v int64) *int64    { return &v }
func pf(v float64) *float64 { return &v }
func pb(v bool) *bool       { return &v }
func pstr(v string) *string { return &v }

// TestDecodeRegistration: every field of the sample is read.
func TestDecodeRegistration(t *testing.T) {
	r, err := DecodeRegistration(readFile(t, "registration.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := &Registration{
		TaskName: "resnet50", Project: "vision", Owner: "ann@example.com", GPUCount: p64(2), SchemaVersion: p64(1),
		TaskID: "job-7-worker-0", StartTime: p64(1732950000), SubmitTime: p64(1732948200), Hostname: "job-7-worker-0",
		Priority: "high", Env: "prod", DurationEst: p64(7200), Pipeline: "nightly", PipelineRun: "42", Step: "train",
		Orchestrator: "gitlab", K8sNamespace: "ml", K8sPod: "job-7-0", K8sNode: "gpu-3", K8sPodUID: "1f2e", K8sJobIndex: p64(3),
		Labels: Labels{"cost_center": "cc-1024"},
		GPUs: GPUs[RegisteredGPU]{
			{Index: p64(0), UUID: "GPU-5a3c", Name: "NVIDIA H100 80GB HBM3", MemoryTotalBytes: 85520809984},
			{Index: p64(1), UUID: "GPU-0b1c", Name: "NVIDIA H100 80GB HBM3", MemoryTotalBytes: 42144366592, Share: pf(0.5),
				MIG: &MIG{UUID: "MIG-1", GPUInstanceID: p64(1), ComputeInstanceID: p64(0), Profile: "3g.40gb", Slices: p64(3), TotalSlices: p64(7)}},
		},
		DriverVersion: "550.54.15",
	}
	if !reflect.DeepEqual(r, want) {
		t.Fatalf("decoded\n%+v\nwant\n%+v", r, want)
	}
	if r.Count() != 2 {
		t.Fatalf("Count = %d", r.Count())
	}
}

func TestDecodeCompletionAndHeartbeat(t *testing.T) {
	c, err := DecodeCompletion(readFile(t, "completion.json"))
	if err != nil {
		t.Fatal(err)
	}
	wantC := &Completion{SchemaVersion: p64(1), TaskID: "a", StartTime: p64(1), EndTime: p64(5), DurationSeconds: pf(1.5),
		ExitCode: p64(0), Signal: "SIGKILL", GPUCount: p64(1), GPUSeconds: pf(1.5),
		GPUs: GPUs[GPUUsage]{{UUID: "u", MIGUUID: "MIG-1", Share: pf(0.5), Samples: 3,
			Busy: Busy{UtilMean: pf(5), UtilP95: pf(9), MemoryUsedPeakBytes: p64(7), IdleShare: pf(0.5)}, EnergyJoules: pf(12.5), EnergyEstimated: pb(true)}},
		Gate:    &Gate{Expr: "x>1", Passed: pb(true)},
		Metrics: Metrics{"x": 2},
	}
	if !reflect.DeepEqual(c, wantC) {
		t.Fatalf("decoded\n%+v\nwant\n%+v", c, wantC)
	}
	h, err := DecodeHeartbeat(readFile(t, "heartbeat.json"))
	if err != nil {
		t.Fatal(err)
	}
	wantH := &Heartbeat{TaskID: "a", Time: p64(100), IntervalSeconds: pf(60.5), GPUs: GPUs[HeartbeatGPU]{
		{UUID: pstr("GPU-a"), MIGUUID: "MIG-1", Samples: p64(6), UtilMean: pf(0.5)},
		{UUID: pstr("GPU-b"), Samples: p64(0)},
	}}
	if !reflect.DeepEqual(h, wantH) {
		t.Fatalf("decoded\n%+v\nwant\n%+v", h, wantH)
	}
}

// edit returns the JSON object body with key set to the JSON value v, or
// removed when v is "".
func edit(t *testing.T, body []byte, key, v string) []byte {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	if v == "" {
		delete(m, key)
	} else {
		m[key] = json.RawMessage(v)
	}
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

const nameRule = "must follow the name rule (1 to 63 letters, digits, '.', '_' or '-', beginning with a letter or digit)"

// TestRegistrationErrors: each broken rule is answered with the message
// the monitor gives (a 400's error), naming the field's path.
func TestRegistrationErrors(t *testing.T) {
	base := readFile(t, "registration.json")
	gpu := func(entry string) string { return `[` + entry + `]` }
	tests := []struct{ key, value, want string }{
		{"task_id", "", "field task_id: is required"},
		{"task_id", `null`, "field task_id: is required"},
		{"task_name", "", "field task_name: is required"},
		{"project", "", "field project: is required"},
		{"owner", "", "field owner: is required"},
		{"start_time", "", "field start_time: is required"},
		{"start_time", `null`, "field start_time: is required"},
		{"project", `"a b"`, "field project: " + nameRule},
		{"project", `5`, "field project: must be a string"},
		{"owner", `"a b"`, "field owner: must follow the name rule (1 to 63 letters, digits, '.', '_' or '-', beginning with a letter or digit; '@' and '+' allowed too)"},
		{"hostname", `""`, ""},
		{"hostname", `"-x"`, "field hostname: " + nameRule},
		{"k8s_pod", `"x\ny"`, "field k8s_pod: " + nameRule},
		{"start_time", `"now"`, "field start_time: must be an integer"},
		{"start_time", `1.5`, "field start_time: must be an integer"},
		{"start_time", `1e3`, "field start_time: must be an integer"},
		{"start_time", `99999999999999999999`, "field start_time: must be an integer"},
		{"start_time", `-1`, "field start_time: must be between 0 and 1099511627776"},
		{"submit_time", `1732950001`, "field submit_time: must not be after start_time (a task is submitted before it starts)"},
		{"submit_time", `"900"`, "field submit_time: must be an integer"},
		{"submit_time", `-1`, "field submit_time: must be between 0 and 1099511627776"},
		{"submit_time", `null`, ""},
		{"schema_version", `0`, "field schema_version: must be between 1 and 2147483647"},
		{"schema_version", `7`, ""},
		{"k8s_job_index", `-1`, "field k8s_job_index: must be between 0 and 2147483647"},
		{"duration_est", `0`, "field duration_est: must be between 1 and 31536000"},
		{"labels", `[]`, "field labels: must be an object of strings"},
		{"labels", `{"team":1}`, "field labels.team: must be a string"},
		{"labels", `{"team":null}`, "field labels.team: is required"},
		{"labels", `{"team":"a b"}`, "field labels.team: " + nameRule},
		{"labels", `{"b k":"x","a k":"y"}`, `field labels: key "a k" ` + nameRule},
		{"gpus", `{}`, "field gpus: must be a list of objects"},
		{"gpus", `[1]`, "field gpus[0]: must be an object"},
		{"gpus", `[null]`, "field gpus[0]: must be an object"},
		{"gpus", `[{"uuid":"a"}]`, "field gpu_count: 2 differs from the 1 entries of gpus"},
		{"gpu_count", `1025`, "field gpu_count: must be between 0 and 1024"},
		{"gpu_count", `"2"`, "field gpu_count: must be an integer"},
		{"gpus", gpu(`{"uuid":"a"},{"index":-1}`), "field gpus[1].index: must be between 0 and 2147483647"},
		{"gpus", gpu(`{"uuid":"a"},{"index":"1"}`), "field gpus[1].index: must be an integer"},
		{"gpus", gpu(`{"uuid":"a"},{"uuid":5}`), "field gpus[1].uuid: must be a string"},
		{"gpus", gpu(`{"uuid":"a"},{"uuid":"a\u0007"}`), "field gpus[1].uuid: must be text of at most 128 bytes without control characters"},
		{"gpus", gpu(`{"uuid":"a"},{"name":"` + strings.Repeat("x", 129) + `"}`), "field gpus[1].name: must be text of at most 128 bytes without control characters"},
		{"gpus", gpu(`{"uuid":"a"},{"memory_total_bytes":-1}`), "field gpus[1].memory_total_bytes: must be between 0 and 9223372036854775807"},
		{"gpus", gpu(`{"uuid":"a"},{"share":0}`), "field gpus[1].share: must be a number greater than 0 and at most 1"},
		{"gpus", gpu(`{"uuid":"a"},{"share":1.5}`), "field gpus[1].share: must be between 0 and 1"},
		{"gpus", gpu(`{"uuid":"a"},{"share":"0.5"}`), "field gpus[1].share: must be a number"},
		{"gpus", gpu(`{"uuid":"a"},{"mig":"MIG-1"}`), "field gpus[1].mig: must be an object {uuid, gpu_instance_id, compute_instance_id, profile, slices, total_slices}"},
		{"gpus", gpu(`{"uuid":"a"},{"mig":[1]}`), "field gpus[1].mig: must be an object {uuid, gpu_instance_id, compute_instance_id, profile, slices, total_slices}"},
		{"gpus", gpu(`{"uuid":"a"},{"mig":{"uuid":"MIG-1"}}`), "field gpus[1].mig.gpu_instance_id: is required"},
		{"gpus", gpu(`{"uuid":"a"},{"mig":{"gpu_instance_id":1}}`), "field gpus[1].mig.uuid: is required"},
		{"gpus", gpu(`{"uuid":"a"},{"mig":{"uuid":7,"gpu_instance_id":1}}`), "field gpus[1].mig.uuid: must be a string"},
		{"gpus", gpu(`{"uuid":"a"},{"mig":{"uuid":"M","gpu_instance_id":1.5}}`), "field gpus[1].mig.gpu_instance_id: must be an integer"},
		{"gpus", gpu(`{"uuid":"a"},{"mig":{"uuid":"M","gpu_instance_id":1,"profile":"` + strings.Repeat("g", 65) + `"}}`), "field gpus[1].mig.profile: must be text of at most 64 bytes without control characters"},
		{"gpus", gpu(`{"uuid":"a"},{"mig":{"uuid":"M","gpu_instance_id":1,"slices":0,"total_slices":7}}`), "field gpus[1].mig.slices: must be between 1 and 8"},
		{"gpus", gpu(`{"uuid":"a"},{"mig":{"uuid":"M","gpu_instance_id":1,"slices":1,"total_slices":9}}`), "field gpus[1].mig.total_slices: must be between 1 and 8"},
		{"gpus", gpu(`{"uuid":"a"},{"mig":{"uuid":"M","gpu_instance_id":1,"slices":1,"total_slices":0}}`), "field gpus[1].mig.total_slices: must be between 1 and 8"},
		{"gpus", gpu(`{"uuid":"a"},{"mig":{"uuid":"M","gpu_instance_id":1,"slices":4,"total_slices":3}}`), "field gpus[1].mig.slices: must be at most total_slices (3)"},
		// The bounds of section "What a task declares, checked": a whole
		// GPU declared as a MIG instance of 64 slices, a profile that is
		// not the slices, an instance with a whole GPU's memory, a whole
		// GPU's share below 0.01.
		{"gpus", gpu(`{"uuid":"a"},{"mig":{"uuid":"M","gpu_instance_id":1,"profile":"1g.18gb","slices":1,"total_slices":64}}`), "field gpus[1].mig.total_slices: must be between 1 and 8"},
		{"gpus", gpu(`{"uuid":"a"},{"mig":{"uuid":"M","gpu_instance_id":1,"slices":1}}`), "field gpus[1].mig.total_slices: is required"},
		{"gpus", gpu(`{"uuid":"a"},{"mig":{"uuid":"M","gpu_instance_id":1,"total_slices":7}}`), "field gpus[1].mig.slices: is required"},
		{"gpus", gpu(`{"uuid":"a"},{"mig":{"uuid":"M","gpu_instance_id":1,"slices":1,"total_slices":7}}`), "field gpus[1].mig.profile: must be the instance's slices and memory, 1g.<GiB>gb (such as 1g.10gb), its slices equal to slices"},
		{"gpus", gpu(`{"uuid":"a"},{"mig":{"uuid":"M","gpu_instance_id":1,"profile":"7g.141gb","slices":1,"total_slices":7}}`), "field gpus[1].mig.profile: must be the instance's slices and memory, 1g.<GiB>gb (such as 1g.10gb), its slices equal to slices"},
		{"gpus", gpu(`{"uuid":"a"},{"mig":{"uuid":"M","gpu_instance_id":1,"profile":"1g.18gb+me","slices":1,"total_slices":7}}`), "field gpus[1].mig.profile: must be the instance's slices and memory, 1g.<GiB>gb (such as 1g.10gb), its slices equal to slices"},
		{"gpus", gpu(`{"uuid":"a"},{"mig":{"uuid":"M","gpu_instance_id":1,"profile":"1g.0gb","slices":1,"total_slices":7}}`), "field gpus[1].mig.profile: must be the instance's slices and memory, 1g.<GiB>gb (such as 1g.10gb), its slices equal to slices"},
		{"gpus", gpu(`{"uuid":"a"},{"memory_total_bytes":150754820096,"mig":{"uuid":"M","gpu_instance_id":1,"profile":"1g.18gb","slices":1,"total_slices":7}}`), "field gpus[1].memory_total_bytes: must be at most 20293720473 for a MIG instance of profile 1g.18gb (its 18 GiB × 1.05)"},
		{"gpus", gpu(`{"uuid":"a"},{"memory_total_bytes":20293720473,"mig":{"uuid":"M","gpu_instance_id":1,"profile":"1g.18gb","slices":1,"total_slices":7}}`), ""},
		{"gpus", gpu(`{"uuid":"a"},{"memory_total_bytes":20293720474,"mig":{"uuid":"M","gpu_instance_id":1,"profile":"1g.18gb","slices":1,"total_slices":7}}`), "field gpus[1].memory_total_bytes: must be at most 20293720473 for a MIG instance of profile 1g.18gb (its 18 GiB × 1.05)"},
		{"gpus", gpu(`{"uuid":"a"},{"share":1e-300,"mig":{"uuid":"M","gpu_instance_id":1,"profile":"1g.18gb","slices":1,"total_slices":7}}`), ""},
		{"gpus", gpu(`{"uuid":"a"},{"share":1e-300}`), "field gpus[1].share: must be at least 0.01 for a whole GPU (a GPU shared by more than 100 tasks is not counted by shares)"},
		{"gpus", gpu(`{"uuid":"a"},{"share":0.0099}`), "field gpus[1].share: must be at least 0.01 for a whole GPU (a GPU shared by more than 100 tasks is not counted by shares)"},
		{"gpus", gpu(`{"uuid":"a"},{"share":0.01}`), ""},
		{"gpus", gpu(`{"uuid":"a"},{"uuid":"b","unknown":{"x":[1]}}`), ""},
		{"gpus", `[` + strings.Repeat(`{},`, 256) + `{}]`, "field gpus: must list at most 256 GPUs"},
		{"driver_version", `5`, "field driver_version: must be a string"},
		{"some_later_field", `{"x":[1,2]}`, ""},
	}
	for _, tt := range tests {
		body := edit(t, base, tt.key, tt.value)
		_, err := DecodeRegistration(body)
		checkErr(t, string(body), err, tt.want)
	}
}

func checkErr(t *testing.T, body string, err error, want string) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Errorf("%s: %v", body, err)
		}
		return
	}
	var fe *FieldError
	if err == nil || err.Error() != want {
		t.Errorf("%s:\nerror %v\nwant  %s", body, err, want)
	} else if !errors.As(err, &fe) {
		t.Errorf("%s: error %T, not a *FieldError", body, err)
	}
}

func TestCompletionErrors(t *testing.T) {
	base := readFile(t, "completion.json")
	gpu := func(entry string) string { return `[` + entry + `]` }
	tests := []struct{ key, value, want string }{
		{"task_id", "", "field task_id: is required"},
		{"end_time", "", "field end_time: is required"},
		{"duration_seconds", "", "field duration_seconds: is required"},
		{"exit_code", "", "field exit_code: is required"},
		{"exit_code", `256`, "field exit_code: must be between 0 and 255"},
		{"exit_code", `0.5`, "field exit_code: must be an integer"},
		{"duration_seconds", `"1"`, "field duration_seconds: must be a number"},
		{"duration_seconds", `-1`, "field duration_seconds: must be between 0 and 1.099511627776e+12"},
		{"duration_seconds", `1e400`, "field duration_seconds: must be a number"},
		{"start_time", `null`, ""},
		{"signal", `"SIG KILL"`, "field signal: " + nameRule},
		{"signal", `""`, ""},
		{"gate", `"x"`, "field gate: must be an object {expr, passed, reason}"},
		{"gate", `{"expr":"x","reason":""}`, "field gate.passed: must be true or false"},
		{"gate", `{"expr":"x","passed":"yes"}`, "field gate.passed: must be true or false"},
		{"gate", `{"expr":5,"passed":true}`, "field gate.expr: must be a string"},
		{"gate", `{"expr":"x\u0000","passed":true}`, "field gate.expr: must be text of at most 1024 bytes without control characters"},
		{"gate", `{"reason":"` + strings.Repeat("r", 1025) + `","passed":true}`, "field gate.reason: must be text of at most 1024 bytes without control characters"},
		{"metrics", `[1]`, "field metrics: must be an object of numbers"},
		{"metrics", `{"x":"1"}`, "field metrics: must be an object of numbers"},
		{"metrics", `{"a b":1}`, `field metrics: key "a b" ` + nameRule},
		{"metrics", metrics(33), "field metrics: must hold at most 32 keys"},
		{"metrics", metrics(32), ""},
		{"gpus", `null`, ""},
		{"gpus", gpu(`{"uuid":"u","samples":-1}`), "field gpus[0].samples: must be between 0 and 9223372036854775807"},
		{"gpus", gpu(`{"uuid":"u","util_mean":101}`), "field gpus[0].util_mean: must be between 0 and 100"},
		{"gpus", gpu(`{"uuid":"u","util_p95":"9"}`), "field gpus[0].util_p95: must be a number"},
		{"gpus", gpu(`{"uuid":"u","memory_used_peak_bytes":1.5}`), "field gpus[0].memory_used_peak_bytes: must be an integer"},
		{"gpus", gpu(`{"uuid":"u","idle_share":2}`), "field gpus[0].idle_share: must be between 0 and 1"},
		{"gpus", gpu(`{"uuid":"u","mig_uuid":"\u0001"}`), "field gpus[0].mig_uuid: must be text of at most 128 bytes without control characters"},
		{"gpus", gpu(`{"uuid":"u","energy_joules":"5"}`), "field gpus[0].energy_joules: must be a number"},
		{"gpus", gpu(`{"uuid":"u","energy_joules":2e15}`), "field gpus[0].energy_joules: must be between 0 and 1e+15"},
		{"gpus", gpu(`{"uuid":"u","energy_estimated":"yes"}`), "field gpus[0].energy_estimated: must be true or false"},
		{"gpus", gpu(`{"uuid":"u","share":0}`), "field gpus[0].share: must be a number greater than 0 and at most 1"},
		{"gpus", `[` + strings.Repeat(`{},`, 256) + `{}]`, "field gpus: must list at most 256 GPUs"},
	}
	for _, tt := range tests {
		body := edit(t, base, tt.key, tt.value)
		_, err := DecodeCompletion(body)
		checkErr(t, string(body), err, tt.want)
	}
}

func metrics(n int) string {
	var b strings.Builder
	b.WriteString("{")
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`"m` + strings.Repeat("x", i) + `":1`)
	}
	return b.String() + "}"
}

func TestHeartbeatErrors(t *testing.T) {
	base := readFile(t, "heartbeat.json")
	tests := []struct{ key, value, want string }{
		{"task_id", "", "field task_id: is required"},
		{"time", `"5"`, "field time: must be an integer"},
		{"time", "", ""},
		{"interval_seconds", `"60"`, "field interval_seconds: must be a number"},
		{"interval_seconds", `-1`, "field interval_seconds: must be between 0 and 1.099511627776e+12"},
		{"gpus", `[1]`, "field gpus[0]: must be an object"},
		{"gpus", `[{"samples":6,"util_mean":0}]`, "field gpus[0].uuid: is required"},
		{"gpus", `[{"uuid":"GPU-bad-0","util_mean":0}]`, "field gpus[0].samples: is required"},
		{"gpus", `[{"uuid":"","samples":0}]`, ""},
		{"gpus", `[{"uuid":"a","samples":1,"util_mean":-1}]`, "field gpus[0].util_mean: must be between 0 and 100"},
		{"gpus", `[{"uuid":"a","mig_uuid":7,"samples":1}]`, "field gpus[0].mig_uuid: must be a string"},
		{"gpus", `[` + strings.Repeat(`{"uuid":"a","samples":1},`, 256) + `{}]`, "field gpus: must list at most 256 GPUs"},
	}
	for _, tt := range tests {
		body := edit(t, base, tt.key, tt.value)
		_, err := DecodeHeartbeat(body)
		checkErr(t, string(body), err, tt.want)
	}
}

// TestNotAnObject: a body that is not one JSON object is refused as a
// whole, a *BodyError.
func TestNotAnObject(t *testing.T) {
	tests := []struct{ body, want string }{
		{`{"task_id":`, "the body is not a JSON object (a heartbeat)"},
		{`[1,2]`, "the body is not a JSON object (a heartbeat)"},
		{`null`, "the body is not a JSON object (a heartbeat)"},
		{``, "the body is not a JSON object (a heartbeat)"},
		{`"x"`, "the body is not a JSON object (a heartbeat)"},
		{`{"task_id":"a"} {"task_id":"b"}`, "the body holds more than one JSON value (a heartbeat)"},
		{`{"task_id":"a"} x`, "the body holds more than one JSON value (a heartbeat)"},
	}
	for _, tt := range tests {
		_, err := DecodeHeartbeat([]byte(tt.body))
		var be *BodyError
		if err == nil || err.Error() != tt.want || !errors.As(err, &be) {
			t.Errorf("%q: error %v, want %q", tt.body, err, tt.want)
		}
	}
}

// TestNamesAreCaseSensitive: a key that names a field only when case is
// ignored is a field this version does not know, ignored like the others
// (encoding/json alone would take "Task_ID" for task_id), at any depth.
func TestNamesAreCaseSensitive(t *testing.T) {
	tests := []struct{ body, want string }{
		{`{"tAsk_id":"a"}`, "field task_id: is required"},
		{`{"task_id":"a","TASK_ID":"b"}`, ""},
		{`{"task_id":"a","gpus":[{"UUID":"x","samples":1}]}`, "field gpus[0].uuid: is required"},
		{`{"task_id":"a","gpus":[{"uuid":"x","ſamples":1}]}`, "field gpus[0].samples: is required"},
		{`{"task_id":"a","time":5,"Time":"x"}`, ""},
	}
	for _, tt := range tests {
		h, err := DecodeHeartbeat([]byte(tt.body))
		checkErr(t, tt.body, err, tt.want)
		if err == nil && h.TaskID != "a" {
			t.Errorf("%s: task_id %q", tt.body, h.TaskID)
		}
	}
	c, err := DecodeCompletion([]byte(`{"task_id":"a","end_time":5,"duration_seconds":1,"exit_code":0,"Gate":{"expr":"x"},"metrics":{"Acc":1}}`))
	if err != nil || c.Gate != nil || c.Metrics["Acc"] != 1 {
		t.Errorf("completion %+v, %v", c, err)
	}
}
