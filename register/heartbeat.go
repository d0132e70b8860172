package register

import (
	"encoding/json"
	"math"
	"strconv"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/gpu"
)

// Heartbeat is the body of POST /v1/task/heartbeat (docs/openapi.yaml):
// the task is still running at Time. With GPU sampling on it also says
// how busy each GPU was over the interval since the previous heartbeat
// (or since the command started), so the monitor sees idle GPUs while
// they are idle.
type Heartbeat struct {
	TaskID string `json:"task_id"`
	Time   int64  `json:"time"`
	// IntervalSeconds and GPUs are set only with sampling on; GPUs has one
	// entry per GPU of the task, even one without a sample.
	IntervalSeconds *float64          `json:"interval_seconds,omitempty"`
	GPUs            []gpu.GPUInterval `json:"gpus,omitempty"`
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

// Marshal returns the body's bytes.
func (h Heartbeat) Marshal() []byte {
	out, err := json.Marshal(h)
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
