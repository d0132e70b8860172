package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/access"
)

// Errors of the write methods, for errors.Is.
var (
	// ErrConflict: a different body under a task_id already stored (the
	// stored one is kept).
	ErrConflict = errors.New("store: a different body is already stored under this task_id")
	// ErrNotFound: no such task (or none the caller may see).
	ErrNotFound = errors.New("store: no such task")
	// ErrStartMismatch: the sender sees several tasks under the
	// completion's task_id and none has its start_time.
	ErrStartMismatch = fmt.Errorf("%w: several tasks under this task_id, none with the completion's start_time", ErrConflict)
	// ErrTooManyOpen: the sending token already has its bound of open
	// tasks and pending completions (Options.MaxOpenPerToken).
	ErrTooManyOpen = errors.New("store: the token has too many open tasks")
)

// BadCompletionError is a completion whose times do not fit its task
// (checks that need the registration): the API answers 400 with it.
type BadCompletionError struct{ Field, Rule string }

func (e *BadCompletionError) Error() string { return "field " + e.Field + ": " + e.Rule }

// Sender is who sends a write: the scope of its token (nil: every task, an
// admin token or no tokens file), the token's name (” without a tokens
// file) and whether the bound on open tasks applies to it (not to an
// admin).
type Sender struct {
	Scope     *access.Scope
	Token     string
	Unbounded bool
}

// MIG identifies a MIG instance of its parent GPU, as the entrypoint's
// probe reports it (nvidia-smi's names).
type MIG struct {
	UUID              string `json:"uuid"`
	GPUInstanceID     int64  `json:"gpu_instance_id"`
	ComputeInstanceID *int64 `json:"compute_instance_id"`
	Profile           string `json:"profile"`
	Slices            *int64 `json:"slices"`
	TotalSlices       *int64 `json:"total_slices"`
}

// wholeInstance reports whether a claim with share holds all of its GPU
// instance: a whole GPU at share 1, or a MIG instance at (at least) its
// slices' share of the parent. Only such a claim ends older claims on the
// same instance whatever their share.
func wholeInstance(share float64, m *wire.MIG) bool {
	const eps = 1e-9
	if m == nil || m.Slices == nil || m.TotalSlices == nil || *m.TotalSlices <= 0 {
		return share >= 1-eps
	}
	return share >= float64(*m.Slices)/float64(*m.TotalSlices)-eps
}

// Task is one stored task as the API shows it.
type Task struct {
	TaskID       string            `json:"task_id"`
	TaskName     string            `json:"task_name"`
	Project      string            `json:"project"`
	Owner        string            `json:"owner"`
	Priority     string            `json:"priority"`
	Env          string            `json:"env"`
	Pipeline     string            `json:"pipeline"`
	PipelineRun  string            `json:"pipeline_run"`
	Step         string            `json:"step"`
	Orchestrator string            `json:"orchestrator"`
	K8sNamespace string            `json:"k8s_namespace"`
	K8sPod       string            `json:"k8s_pod"`
	K8sNode      string            `json:"k8s_node"`
	K8sPodUID    string            `json:"k8s_pod_uid"`
	K8sJobIndex  *int64            `json:"k8s_job_index"`
	SlurmJob     string            `json:"slurm_job"`
	Hostname     string            `json:"hostname"`
	StartTime    int64             `json:"start_time"`
	SubmitTime   *int64            `json:"submit_time"`
	GPUCount     int64             `json:"gpu_count"`
	DurationEst  *int64            `json:"duration_est"`
	Labels       map[string]string `json:"labels"`
	RegisteredAt int64             `json:"registered_at"`
	LastSeen     *int64            `json:"last_seen"`
	// IdleSince is when the current run of idle heartbeats began (every
	// sampled GPU below 1 %); null while busy, completed, or never sampled.
	IdleSince *int64 `json:"idle_since"`
	// State is running (no completion), completed (exit 0 and no failed
	// gate) or failed.
	State      string          `json:"state"`
	GPUs       []TaskGPU       `json:"gpus"`
	Completion *TaskCompletion `json:"completion"`
	Efficiency Efficiency      `json:"efficiency"`
	// SameTaskID lists the other tasks under this task_id the reader sees
	// (GET /v1/tasks/{task_id} only; absent when there are none).
	SameTaskID []SameTask `json:"same_task_id,omitempty"`

	key int64 // tasks.id
}

// SameTask names another task stored under the same task_id.
type SameTask struct {
	Project   string `json:"project"`
	Owner     string `json:"owner"`
	StartTime int64  `json:"start_time"`
}

// TaskGPU is one GPU of a task with its usage summary.
type TaskGPU struct {
	Index            int64  `json:"index"`
	UUID             string `json:"uuid"`
	Name             string `json:"name"`
	MemoryTotalBytes int64  `json:"memory_total_bytes"`
	Samples          *int64 `json:"samples"`
	wire.Busy
	// Share is the fraction of the physical GPU the task held; MIG the
	// instance (null for a whole GPU).
	Share           float64  `json:"share"`
	MIG             *MIG     `json:"mig"`
	EnergyJoules    *float64 `json:"energy_joules"`
	EnergyEstimated *bool    `json:"energy_estimated"`
	// LatestSamples and LatestUtilMean are the newest sampled heartbeat's
	// interval for this GPU (null before one came).
	LatestSamples  *int64   `json:"latest_samples"`
	LatestUtilMean *float64 `json:"latest_util_mean"`
	// ClaimEnded is when a newer task took over this GPU (instance) while
	// this task had no completion (one GPU instance runs one task).
	ClaimEnded *int64 `json:"claim_ended"`
}

// TaskCompletion is how a task ended. Its gate is the completion body's
// (Passed always set: the body's is required).
type TaskCompletion struct {
	EndTime         int64              `json:"end_time"`
	DurationSeconds float64            `json:"duration_seconds"`
	ExitCode        int64              `json:"exit_code"`
	Signal          string             `json:"signal"`
	Gate            *wire.Gate         `json:"gate"`
	Metrics         map[string]float64 `json:"metrics"`
	CompletedAt     int64              `json:"completed_at"`
}

// Efficiency summarises a completed task's GPUs.
type Efficiency struct {
	// GPUSeconds is Σ over the GPUs of share × duration_seconds, GPUs
	// counted but not listed at 1 (gpu_count × duration_seconds for whole
	// GPUs; null while running).
	GPUSeconds *float64 `json:"gpu_seconds"`
	// UtilMean is the mean of the sampled GPUs' util_mean (null when none
	// was sampled); IdleShare likewise of their idle_share.
	UtilMean  *float64 `json:"util_mean"`
	IdleShare *float64 `json:"idle_share"`
}

// sameJSON reports whether a and b are the same JSON value (key order and
// whitespace aside; numbers compared as written).
func sameJSON(a, b []byte) bool {
	va, errA := decodeAny(a)
	vb, errB := decodeAny(b)
	return errA == nil && errB == nil && reflect.DeepEqual(va, vb)
}

func decodeAny(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	err := d.Decode(&v)
	return v, err
}
