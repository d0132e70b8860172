package wire

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
)

// Completion is the body of POST /v1/task/complete (docs/contract.md,
// docs/openapi.yaml); the field order is the order on the wire. TaskID,
// EndTime, DurationSeconds and ExitCode are required.
type Completion struct {
	SchemaVersion *int64 `json:"schema_version,omitempty"`
	TaskID        string `json:"task_id"`
	// StartTime is the registration's: it picks the task among several
	// under TaskID.
	StartTime       *int64   `json:"start_time,omitempty"`
	EndTime         *int64   `json:"end_time,omitempty"`
	DurationSeconds *float64 `json:"duration_seconds,omitempty"`
	ExitCode        *int64   `json:"exit_code,omitempty"`
	// Signal names the signal that killed the command (SIGKILL), if one did.
	Signal string `json:"signal,omitempty"`
	// GPUCount and GPUSeconds (GPUCount × DurationSeconds) are for readers
	// of the body; the monitor counts from the registration.
	GPUCount   *int64         `json:"gpu_count,omitempty"`
	GPUSeconds *float64       `json:"gpu_seconds,omitempty"`
	GPUs       GPUs[GPUUsage] `json:"gpus"`
	Gate       *Gate          `json:"gate,omitempty"`
	Metrics    Metrics        `json:"metrics,omitempty"`
}

// GPUUsage is the completion's summary of one GPU's samples. A MIG entry
// has the parent's UUID and the instance's MIGUUID. The measures are null
// without a sample.
type GPUUsage struct {
	UUID    string   `json:"uuid"`
	MIGUUID string   `json:"mig_uuid,omitempty"`
	Share   *float64 `json:"share,omitempty"` // checked, not kept: the registration's counts
	Samples int64    `json:"samples"`
	Busy
	// EnergyJoules is the GPU's energy over the task (null when the GPU
	// could not tell); EnergyEstimated is true when it is the parent's
	// energy × share (MIG and shared GPUs).
	EnergyJoules    *float64 `json:"energy_joules"`
	EnergyEstimated *bool    `json:"energy_estimated,omitempty"`
}

// Busy is how busy a GPU was over a task, from its samples: what a
// completion reports of each GPU and the monitor keeps of it (both embed
// it, so that the measures have one shape). UtilMean and UtilP95 are
// percent, IdleShare the fraction of samples at 0 %; each is null without
// a sample that carried it.
type Busy struct {
	UtilMean            *float64 `json:"util_mean"`
	UtilP95             *float64 `json:"util_p95"`
	MemoryUsedPeakBytes *int64   `json:"memory_used_peak_bytes"`
	IdleShare           *float64 `json:"idle_share"`
}

// Gate is the quality gate's verdict; Passed is required.
type Gate struct {
	Expr   string `json:"expr"`
	Passed *bool  `json:"passed"`
	Reason string `json:"reason"`
}

// Metrics are the step's numeric metrics the quality gate read: keys
// follow the name rule, at most MaxMetrics of them.
type Metrics map[string]float64

// UnmarshalJSON reads the metrics; any value that is not a number refuses
// the whole object.
func (m *Metrics) UnmarshalJSON(b []byte) error {
	var v map[string]float64
	if err := json.Unmarshal(b, &v); err != nil {
		return &FieldError{"metrics", ruleNumbers}
	}
	if len(v) == 0 {
		v = nil // as none: an empty object is not sent back
	}
	*m = v
	return nil
}

// ReadCompletion decodes a completion body without Validate, as
// ReadRegistration does a registration.
func ReadCompletion(body []byte) (*Completion, error) { return read[Completion](body, "a completion") }

// DecodeCompletion reads a completion body and checks it (Validate).
func DecodeCompletion(body []byte) (*Completion, error) { return checked(ReadCompletion(body)) }

// Validate checks the completion against the contract's rules; the error
// is a *FieldError naming the first field that breaks one. The checks that
// need the server's clock or the registration are the monitor's.
func (c *Completion) Validate() error {
	if err := first(
		name("task_id", c.TaskID, true, ""),
		integer("end_time", c.EndTime, true, 0, MaxUnix),
		integer("start_time", c.StartTime, false, 0, MaxUnix),
		number("duration_seconds", c.DurationSeconds, true, 0, MaxUnix),
		integer("exit_code", c.ExitCode, true, 0, MaxExitCode),
		integer("schema_version", c.SchemaVersion, false, 1, MaxID),
		name("signal", c.Signal, false, ""),
		integer("gpu_count", c.GPUCount, false, 0, MaxGPUCount),
		number("gpu_seconds", c.GPUSeconds, false, 0, MaxUnix*MaxGPUCount),
	); err != nil {
		return err
	}
	if c.Gate != nil {
		if err := freeText("gate.expr", c.Gate.Expr, MaxGateTextBytes); err != nil {
			return err
		}
		if err := freeText("gate.reason", c.Gate.Reason, MaxGateTextBytes); err != nil {
			return err
		}
		if c.Gate.Passed == nil {
			return &FieldError{"gate.passed", ruleBool}
		}
	}
	if len(c.Metrics) > MaxMetrics {
		return &FieldError{"metrics", fmt.Sprintf("must hold at most %d keys", MaxMetrics)}
	}
	for _, k := range slices.Sorted(maps.Keys(c.Metrics)) {
		if !ValidName(k, "") {
			return &FieldError{"metrics", fmt.Sprintf("key %q %s", k, NameRule(""))}
		}
		if v := c.Metrics[k]; math.IsNaN(v) || math.IsInf(v, 0) { // only a Go caller can set these
			return &FieldError{"metrics", ruleNumbers}
		}
	}
	if err := checkGPUCount(len(c.GPUs)); err != nil {
		return err
	}
	for i := range c.GPUs {
		if err := c.GPUs[i].validate(fmt.Sprintf("gpus[%d]", i)); err != nil {
			return err
		}
	}
	return nil
}

func (u *GPUUsage) validate(path string) error {
	return first(
		freeText(path+".uuid", u.UUID, MaxUUIDBytes),
		between(path+".samples", u.Samples, 0, math.MaxInt64),
		number(path+".util_mean", u.UtilMean, false, 0, MaxPercent),
		number(path+".util_p95", u.UtilP95, false, 0, MaxPercent),
		integer(path+".memory_used_peak_bytes", u.MemoryUsedPeakBytes, false, 0, math.MaxInt64),
		number(path+".idle_share", u.IdleShare, false, 0, 1),
		freeText(path+".mig_uuid", u.MIGUUID, MaxUUIDBytes),
		number(path+".energy_joules", u.EnergyJoules, false, 0, MaxEnergyJoules),
		share(path+".share", u.Share),
	)
}

// Heartbeat is the body of POST /v1/task/heartbeat (docs/contract.md,
// docs/openapi.yaml): the task is still running at Time (absent: the
// monitor's clock counts). With GPU sampling on it also says how busy each
// GPU was over the IntervalSeconds before Time.
type Heartbeat struct {
	TaskID          string             `json:"task_id"`
	Time            *int64             `json:"time,omitempty"`
	IntervalSeconds *float64           `json:"interval_seconds,omitempty"`
	GPUs            GPUs[HeartbeatGPU] `json:"gpus,omitempty"`
}

// HeartbeatGPU is one GPU's samples over a heartbeat's interval: UUID (the
// parent's for a MIG instance, whose own is MIGUUID) and Samples are
// required, UtilMean (percent) is null without a sample.
type HeartbeatGPU struct {
	UUID     *string  `json:"uuid,omitempty"`
	MIGUUID  string   `json:"mig_uuid,omitempty"`
	Samples  *int64   `json:"samples,omitempty"`
	UtilMean *float64 `json:"util_mean"`
}

// DecodeHeartbeat reads a heartbeat body and checks it (Validate).
func DecodeHeartbeat(body []byte) (*Heartbeat, error) {
	return checked(read[Heartbeat](body, "a heartbeat"))
}

// Validate checks the heartbeat against the contract's rules; the error
// is a *FieldError naming the first field that breaks one.
func (h *Heartbeat) Validate() error {
	if err := first(
		name("task_id", h.TaskID, true, ""),
		integer("time", h.Time, false, 0, MaxUnix),
		number("interval_seconds", h.IntervalSeconds, false, 0, MaxUnix),
		checkGPUCount(len(h.GPUs)),
	); err != nil {
		return err
	}
	for i, g := range h.GPUs {
		path := fmt.Sprintf("gpus[%d]", i)
		if g.UUID == nil {
			return &FieldError{path + ".uuid", ruleRequired}
		}
		if err := first(
			freeText(path+".uuid", *g.UUID, MaxUUIDBytes),
			freeText(path+".mig_uuid", g.MIGUUID, MaxUUIDBytes),
			integer(path+".samples", g.Samples, true, 0, math.MaxInt64),
			number(path+".util_mean", g.UtilMean, false, 0, MaxPercent),
		); err != nil {
			return err
		}
	}
	return nil
}
