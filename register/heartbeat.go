package register

import (
	"encoding/json"
	"math"
	"strconv"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/gpu"
	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
)

// Heartbeat is the body of POST /v1/task/heartbeat (docs/openapi.yaml):
// the task is still running at Time. With GPU sampling on it also says
// how busy each GPU was over the interval since the previous heartbeat
// (or since the command started), so the monitor sees idle GPUs while
// they are idle.
type Heartbeat struct {
	TaskID string
	Time   int64
	// IntervalSeconds and GPUs are set only with sampling on; GPUs has one
	// entry per GPU of the task, even one without a sample.
	IntervalSeconds *float64
	GPUs            []gpu.GPUInterval
}

// NewHeartbeat is the heartbeat of taskID at now; gpus, when sampling is
// on, covers the interval that began at since.
func NewHeartbeat(taskID string, since, now time.Time, gpus []gpu.GPUInterval) Heartbeat {
	h := Heartbeat{TaskID: taskID, Time: now.Unix()}
	if gpus != nil {
		// Milliseconds: finer than any interval, and short on the wire.
		secs := math.Round(max(now.Sub(since).Seconds(), 0)*1000) / 1000
		h.IntervalSeconds, h.GPUs = &secs, gpus
	}
	return h
}

// Marshal returns the body's bytes: a wire.Heartbeat.
func (h Heartbeat) Marshal() []byte {
	w := wire.Heartbeat{TaskID: h.TaskID, Time: &h.Time, IntervalSeconds: h.IntervalSeconds}
	for _, g := range h.GPUs {
		samples := int64(g.Samples)
		w.GPUs = append(w.GPUs, wire.HeartbeatGPU{UUID: &g.UUID, MIGUUID: g.MIGUUID, Samples: &samples, UtilMean: g.UtilMean})
	}
	out, err := json.Marshal(w)
	if err != nil {
		// Strings, integers and finite means always marshal.
		panic("register: marshalling the heartbeat: " + err.Error())
	}
	return out
}

// Key is the heartbeat's Idempotency-Key: one per task and second.
func (h Heartbeat) Key() string {
	return h.TaskID + "/heartbeat/" + strconv.FormatInt(h.Time, 10)
}
