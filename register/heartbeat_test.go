package register

import (
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/gpu"
)

func TestHeartbeatBody(t *testing.T) {
	start := time.Unix(1796084686, 250e6)
	now := start.Add(60*time.Second + 1234567*time.Nanosecond)
	mean := 37.5
	for _, tt := range []struct {
		name string
		gpus []gpu.GPUInterval
		want string
	}{
		{"sampling off", nil, `{"task_id":"job-7","time":1796084746}`},
		{"samples", []gpu.GPUInterval{{UUID: "GPU-a", Samples: 6, UtilMean: &mean}, {UUID: "GPU-b"}},
			`{"task_id":"job-7","time":1796084746,"interval_seconds":60.001,` +
				`"gpus":[{"uuid":"GPU-a","samples":6,"util_mean":37.5},{"uuid":"GPU-b","samples":0,"util_mean":null}]}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := NewHeartbeat("job-7", start, now, tt.gpus)
			if got := string(h.Marshal()); got != tt.want {
				t.Errorf("body %s\nwant %s", got, tt.want)
			}
			if k := h.Key(); k != "job-7/heartbeat/1796084746" {
				t.Errorf("key %q", k)
			}
		})
	}
	// A clock that stepped back gives an empty interval, never a negative one.
	h := NewHeartbeat("job-7", now, start, []gpu.GPUInterval{{UUID: "GPU-a"}})
	if *h.IntervalSeconds != 0 {
		t.Errorf("interval_seconds %v", *h.IntervalSeconds)
	}
}
