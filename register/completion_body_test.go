package register

import (
	"testing"

	"github.com/paddle-entrypoint/paddle-entrypoint/entrypoint/gate"
	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
)

// TestCompletionBody: the completion's bytes, every field set and none,
// and the monitor's decoder accepts both.
func TestCompletionBody(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	peak := int64(1024)
	// body is a completion as the supervisor fills it (launch's
	// completion, then the sampler's summaries and the gate's verdict).
	body := func(start, end int64, dur float64, exit int64, signal string, count int64, secs float64, gpus []wire.GPUUsage, g *gate.Result, metrics map[string]float64) wire.Completion {
		return wire.Completion{TaskID: "t", StartTime: &start, EndTime: &end, DurationSeconds: &dur, ExitCode: &exit,
			Signal: signal, GPUCount: &count, GPUSeconds: &secs, GPUs: Usage(gpus), Gate: Verdict(g), Metrics: metrics}
	}
	tests := []struct {
		name string
		c    wire.Completion
		want string
	}{
		{"everything set", body(100, 160, 59.5, 137, "SIGKILL", 1, 29.75,
			[]wire.GPUUsage{{UUID: "GPU-a", MIGUUID: "MIG-1", Share: f(0.5), Samples: 3, Busy: wire.Busy{UtilMean: f(50), UtilP95: f(90), MemoryUsedPeakBytes: &peak, IdleShare: f(0)}, EnergyJoules: f(12.5), EnergyEstimated: ptr(true)}},
			&gate.Result{Expr: "acc>=0.9", Reason: "acc=0.5"}, map[string]float64{"acc": 0.5}),
			`{"schema_version":1,"task_id":"t","start_time":100,"end_time":160,"duration_seconds":59.5,"exit_code":137,` +
				`"signal":"SIGKILL","gpu_count":1,"gpu_seconds":29.75,"gpus":[{"uuid":"GPU-a","mig_uuid":"MIG-1","share":0.5,` +
				`"samples":3,"util_mean":50,"util_p95":90,"memory_used_peak_bytes":1024,"idle_share":0,"energy_joules":12.5,` +
				`"energy_estimated":true}],"gate":{"expr":"acc\u003e=0.9","passed":false,"reason":"acc=0.5"},"metrics":{"acc":0.5}}`},
		{"nothing set", body(0, 0, 0, 0, "", 0, 0, []wire.GPUUsage{{UUID: "GPU-a", Share: f(1), EnergyEstimated: ptr(false)}}, nil, nil),
			`{"schema_version":1,"task_id":"t","start_time":0,"end_time":0,"duration_seconds":0,"exit_code":0,` +
				`"gpu_count":0,"gpu_seconds":0,"gpus":[{"uuid":"GPU-a","share":1,"samples":0,"util_mean":null,"util_p95":null,` +
				`"memory_used_peak_bytes":null,"idle_share":null,"energy_joules":null,"energy_estimated":false}]}`},
		{"no GPU", body(5, 6, 1, 0, "", 0, 0, nil, nil, nil),
			`{"schema_version":1,"task_id":"t","start_time":5,"end_time":6,"duration_seconds":1,"exit_code":0,` +
				`"gpu_count":0,"gpu_seconds":0,"gpus":[]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := MarshalCompletion(tt.c)
			if string(b) != tt.want {
				t.Errorf("body\n%s\nwant\n%s", b, tt.want)
			}
			if _, err := wire.DecodeCompletion(b); err != nil {
				t.Errorf("the monitor refuses it: %v", err)
			}
		})
	}
}
