package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
)

// Registration is the body of POST /v1/task/register (docs/contract.md,
// docs/openapi.yaml). The first four fields are the shell script's keys,
// kept first so a monitor written for the script keeps working; the field
// order is the order on the wire. Optional values are pointers or empty
// strings, omitted when unset; StartTime is required.
type Registration struct {
	TaskName      string `json:"task_name"`
	Project       string `json:"project"`
	Owner         string `json:"owner"`
	GPUCount      *int64 `json:"gpu_count,omitempty"` // absent: len(GPUs)
	SchemaVersion *int64 `json:"schema_version,omitempty"`
	TaskID        string `json:"task_id"`
	StartTime     *int64 `json:"start_time,omitempty"`
	SubmitTime    *int64 `json:"submit_time,omitempty"` // never after StartTime
	Hostname      string `json:"hostname"`
	Priority      string `json:"priority,omitempty"`
	Env           string `json:"env,omitempty"`
	DurationEst   *int64 `json:"duration_est,omitempty"`
	// TrainerID and TrainersNum are PaddlePaddle's (PADDLE_TRAINER_ID,
	// PADDLE_TRAINERS_NUM); the monitor keeps them in the body only.
	TrainerID     *int64              `json:"trainer_id,omitempty"`
	TrainersNum   *int64              `json:"trainers_num,omitempty"`
	Pipeline      string              `json:"pipeline,omitempty"`
	PipelineRun   string              `json:"pipeline_run,omitempty"`
	Step          string              `json:"step,omitempty"`
	Orchestrator  string              `json:"orchestrator,omitempty"`
	K8sNamespace  string              `json:"k8s_namespace,omitempty"`
	K8sPod        string              `json:"k8s_pod,omitempty"`
	K8sNode       string              `json:"k8s_node,omitempty"`
	K8sPodUID     string              `json:"k8s_pod_uid,omitempty"`
	K8sJobIndex   *int64              `json:"k8s_job_index,omitempty"`
	SlurmJob      string              `json:"slurm_job,omitempty"`
	InvalidLabels []string            `json:"invalid_labels,omitempty"`
	Labels        Labels              `json:"labels"`
	GPUs          GPUs[RegisteredGPU] `json:"gpus"`
	DriverVersion string              `json:"driver_version,omitempty"`
}

// RegisteredGPU is one entry of a registration's gpus. For a MIG instance
// Index, UUID and Name are the parent GPU's (dcgm-exporter labels MIG
// series with the parent's UUID), MemoryTotalBytes the instance's, and MIG
// says which instance.
type RegisteredGPU struct {
	Index            *int64 `json:"index,omitempty"` // absent: the entry's position
	UUID             string `json:"uuid"`
	Name             string `json:"name"`
	MemoryTotalBytes int64  `json:"memory_total_bytes"`
	// Share is the fraction of the physical GPU the task holds, in (0, 1].
	Share *float64 `json:"share,omitempty"`
	MIG   *MIG     `json:"mig,omitempty"`
}

// MIG identifies a MIG instance of its parent GPU (nvidia-smi's names):
// UUID and GPUInstanceID are required, Slices never exceeds TotalSlices.
type MIG struct {
	UUID              string `json:"uuid"`
	GPUInstanceID     *int64 `json:"gpu_instance_id,omitempty"`
	ComputeInstanceID *int64 `json:"compute_instance_id,omitempty"`
	Profile           string `json:"profile"`
	Slices            *int64 `json:"slices,omitempty"`
	TotalSlices       *int64 `json:"total_slices,omitempty"`
}

// Labels are a registration's extra labels: keys and values follow the
// name rule.
type Labels map[string]string

// UnmarshalJSON reads the labels, naming a value that is not a string by
// its key (labels.team), which encoding/json's errors do not.
func (l *Labels) UnmarshalJSON(b []byte) error {
	if string(bytes.TrimSpace(b)) == "null" {
		*l = nil
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return &FieldError{"labels", ruleStrings}
	}
	out := make(Labels, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) { // the first bad key named is always the same one
		raw := bytes.TrimSpace(m[k])
		if string(raw) == "null" {
			return &FieldError{"labels." + k, ruleRequired}
		}
		var v string
		if err := json.Unmarshal(raw, &v); err != nil {
			return &FieldError{"labels." + k, ruleString}
		}
		out[k] = v
	}
	*l = out
	return nil
}

// ReadRegistration decodes a registration body without Validate: the
// types and the shape only. It serves a sender re-reading a body it
// stored itself, whose own checks (the entrypoint's policy) come before
// the monitor's; what it returns may still break a rule of Validate.
func ReadRegistration(body []byte) (*Registration, error) {
	return read[Registration](body, "a registration")
}

// DecodeRegistration reads a registration body and checks it (Validate).
func DecodeRegistration(body []byte) (*Registration, error) { return checked(ReadRegistration(body)) }

// Validate checks the registration against the contract's rules; the
// error is a *FieldError naming the first field that breaks one.
func (r *Registration) Validate() error {
	for _, f := range []struct {
		path, v  string
		required bool
		extra    string
	}{
		{"task_id", r.TaskID, true, ""},
		{"task_name", r.TaskName, true, ""},
		{"project", r.Project, true, ""},
		{"owner", r.Owner, true, "@+"},
		{"hostname", r.Hostname, false, ""},
		{"priority", r.Priority, false, ""},
		{"env", r.Env, false, ""},
		{"pipeline", r.Pipeline, false, ""},
		{"pipeline_run", r.PipelineRun, false, ""},
		{"step", r.Step, false, ""},
		{"orchestrator", r.Orchestrator, false, ""},
		{"k8s_namespace", r.K8sNamespace, false, ""},
		{"k8s_pod", r.K8sPod, false, ""},
		{"k8s_node", r.K8sNode, false, ""},
		{"k8s_pod_uid", r.K8sPodUID, false, ""},
		{"slurm_job", r.SlurmJob, false, ""},
	} {
		if err := name(f.path, f.v, f.required, f.extra); err != nil {
			return err
		}
	}
	if err := first(
		integer("start_time", r.StartTime, true, 0, MaxUnix),
		integer("submit_time", r.SubmitTime, false, 0, MaxUnix),
	); err != nil {
		return err
	}
	if r.SubmitTime != nil && *r.SubmitTime > *r.StartTime {
		return &FieldError{"submit_time", "must not be after start_time (a task is submitted before it starts)"}
	}
	if err := first(
		integer("schema_version", r.SchemaVersion, false, 1, MaxID),
		integer("k8s_job_index", r.K8sJobIndex, false, 0, MaxID),
		integer("duration_est", r.DurationEst, false, 1, MaxDurationEst),
		integer("trainer_id", r.TrainerID, false, 0, MaxID),
		integer("trainers_num", r.TrainersNum, false, 0, MaxID),
		r.Labels.validate(),
		checkGPUCount(len(r.GPUs)),
	); err != nil {
		return err
	}
	for i := range r.GPUs {
		if err := r.GPUs[i].validate(fmt.Sprintf("gpus[%d]", i)); err != nil {
			return err
		}
	}
	if err := integer("gpu_count", r.GPUCount, false, 0, MaxGPUCount); err != nil {
		return err
	}
	if r.GPUCount != nil && len(r.GPUs) > 0 && *r.GPUCount != int64(len(r.GPUs)) {
		return &FieldError{"gpu_count", fmt.Sprintf("%d differs from the %d entries of gpus", *r.GPUCount, len(r.GPUs))}
	}
	return nil
}

// Count is the registration's GPU count: gpu_count, else the entries of
// gpus.
func (r *Registration) Count() int64 {
	if r.GPUCount != nil {
		return *r.GPUCount
	}
	return int64(len(r.GPUs))
}

func (l Labels) validate() error {
	for _, k := range slices.Sorted(maps.Keys(l)) { // the first bad key named is always the same one
		if !ValidName(k, "") {
			return &FieldError{"labels", fmt.Sprintf("key %q %s", k, NameRule(""))}
		}
		if err := name("labels."+k, l[k], true, ""); err != nil {
			return err
		}
	}
	return nil
}

func (g *RegisteredGPU) validate(path string) error {
	if err := first(
		integer(path+".index", g.Index, false, 0, MaxID),
		freeText(path+".uuid", g.UUID, MaxUUIDBytes),
		freeText(path+".name", g.Name, MaxUUIDBytes),
		between(path+".memory_total_bytes", g.MemoryTotalBytes, 0, 1<<63-1),
		share(path+".share", g.Share),
	); err != nil {
		return err
	}
	if g.MIG == nil {
		// The bound is on the share the store keeps: a MIG entry's is
		// slices / total_slices, whatever its share says.
		if g.Share != nil && *g.Share < MinWholeGPUShare {
			return &FieldError{path + ".share", fmt.Sprintf("must be at least %g for a whole GPU (a GPU shared by more than %d tasks is not counted by shares)",
				MinWholeGPUShare, int(1/MinWholeGPUShare))}
		}
		return nil
	}
	if err := g.MIG.validate(path + ".mig"); err != nil {
		return err
	}
	if maxMem := g.MIG.MaxMemoryBytes(); g.MemoryTotalBytes > maxMem {
		return &FieldError{path + ".memory_total_bytes", fmt.Sprintf("must be at most %d for a MIG instance of profile %s (its %d GiB × 1.05)",
			maxMem, g.MIG.Profile, g.MIG.profileGiB())}
	}
	return nil
}

func (m *MIG) validate(path string) error {
	if m.UUID == "" {
		return &FieldError{path + ".uuid", ruleRequired}
	}
	if err := first(
		freeText(path+".uuid", m.UUID, MaxUUIDBytes),
		integer(path+".gpu_instance_id", m.GPUInstanceID, true, 0, MaxID),
		integer(path+".compute_instance_id", m.ComputeInstanceID, false, 0, MaxID),
		freeText(path+".profile", m.Profile, MaxProfileBytes),
		integer(path+".total_slices", m.TotalSlices, true, 1, MaxTotalSlices),
		integer(path+".slices", m.Slices, true, 1, MaxTotalSlices),
	); err != nil {
		return err
	}
	if *m.Slices > *m.TotalSlices {
		return &FieldError{path + ".slices", fmt.Sprintf("must be at most total_slices (%d)", *m.TotalSlices)}
	}
	if n, _, ok := profileSize(m.Profile); !ok || n != *m.Slices {
		return &FieldError{path + ".profile", fmt.Sprintf("must be the instance's slices and memory, %dg.<GiB>gb (such as %dg.10gb), its slices equal to slices", *m.Slices, *m.Slices)}
	}
	return nil
}

// profileSize reads a GPU instance profile's slices and memory,
// "<slices>g.<GiB>gb" as nvidia-smi and dcgm-exporter spell it ("1g.18gb");
// ok is false for any other name.
func profileSize(profile string) (slices, gib int64, ok bool) {
	m := profileName.FindStringSubmatch(profile)
	if m == nil {
		return 0, 0, false
	}
	slices, err1 := strconv.ParseInt(m[1], 10, 64)
	gib, err2 := strconv.ParseInt(m[2], 10, 64)
	return slices, gib, err1 == nil && err2 == nil
}

var profileName = regexp.MustCompile(`^([1-9][0-9]?)g\.([1-9][0-9]{0,3})gb$`)

// Share is the fraction of the physical GPU a valid MIG entry stands for:
// slices / total_slices, the share the monitor stores whatever the entry's
// own share says.
func (m *MIG) Share() float64 {
	return float64(*m.Slices) / float64(*m.TotalSlices)
}

// MaxMemoryBytes is the most memory a valid MIG entry's instance may have:
// its profile's GiB × 1.05 (NVML's instance memory, rounded up to whole
// GiB, is the profile's number).
func (m *MIG) MaxMemoryBytes() int64 {
	return m.profileGiB() * (1 << 30) * 105 / 100
}

func (m *MIG) profileGiB() int64 {
	_, gib, _ := profileSize(m.Profile)
	return gib
}
