package register

import (
	"encoding/json"
	"math"
	"strconv"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/gpu"
	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
)

// Heartbeat is the body of POST /v1/task/heartbeat (a wire.Heartbeat,
// docs/openapi.yaml) with its Idempotency-Key: the task is still running
// at Time. With GPU sampling on it also says how busy each GPU was over the
// interval since the previous heartbeat (or since the command started), so
// the monitor sees idle GPUs while they are idle.
type Heartbeat struct{ wire.Heartbeat }

// NewHeartbeat is the heartbeat of taskID at now; gpus, when sampling is
// on, covers the interval that began at since, one entry per GPU of the
// task, even one without a sample. The sampler's type becomes the
// contract's here, once.
func NewHeartbeat(taskID string, since, now time.Time, gpus []gpu.GPUInterval) Heartbeat {
	t := now.Unix()
	h := Heartbeat{wire.Heartbeat{TaskID: taskID, Time: &t}}
	if gpus != nil {
		// Milliseconds: finer than any interval, and short on the wire.
		secs := math.Round(max(now.Sub(since).Seconds(), 0)*1000) / 1000
		h.IntervalSeconds = &secs
		for _, g := range gpus {
			samples := int64(g.Samples)
			h.GPUs = append(h.GPUs, wire.HeartbeatGPU{UUID: &g.UUID, MIGUUID: g.MIGUUID, Samples: &samples, UtilMean: g.UtilMean})
		}
	}
	return h
}

// Marshal returns the body's bytes.
func (h Heartbeat) Marshal() []byte {
	out, err := json.Marshal(h.Heartbeat)
	if err != nil {
		// Strings, integers and finite means always marshal.
		panic("register: marshalling the heartbeat: " + err.Error())
	}
	return out
}

// Key is the heartbeat's Idempotency-Key: one per task and second.
func (h Heartbeat) Key() string {
	return h.TaskID + "/heartbeat/" + strconv.FormatInt(*h.Time, 10)
}
