package register

import (
	"encoding/json"
	"slices"
	"strconv"

	"github.com/paddle-entrypoint/paddle-entrypoint/gpu"
	"github.com/paddle-entrypoint/paddle-entrypoint/labels"
)

// SchemaVersion is the version of the registration body.
const SchemaVersion = 1

// body is the registration body, schema version 1 (docs/openapi.yaml). The
// first four fields are the shell script's keys, kept at the top level so a
// monitor written for the script keeps working. Every value goes through
// encoding/json, so no label value can add a key or close a string.
type body struct {
	TaskName      string            `json:"task_name"`
	Project       string            `json:"project"`
	Owner         string            `json:"owner"`
	GPUCount      int               `json:"gpu_count"`
	SchemaVersion int               `json:"schema_version"`
	TaskID        string            `json:"task_id"`
	StartTime     int64             `json:"start_time"`
	SubmitTime    int64             `json:"submit_time,omitempty"`
	Hostname      string            `json:"hostname"`
	Priority      string            `json:"priority,omitempty"`
	Env           string            `json:"env,omitempty"`
	DurationEst   int64             `json:"duration_est,omitempty"`
	TrainerID     *int              `json:"trainer_id,omitempty"`
	TrainersNum   *int              `json:"trainers_num,omitempty"`
	Pipeline      string            `json:"pipeline,omitempty"`
	PipelineRun   string            `json:"pipeline_run,omitempty"`
	Step          string            `json:"step,omitempty"`
	Orchestrator  string            `json:"orchestrator,omitempty"`
	K8sNamespace  string            `json:"k8s_namespace,omitempty"`
	K8sPod        string            `json:"k8s_pod,omitempty"`
	K8sNode       string            `json:"k8s_node,omitempty"`
	K8sPodUID     string            `json:"k8s_pod_uid,omitempty"`
	K8sJobIndex   *int              `json:"k8s_job_index,omitempty"`
	InvalidLabels []string          `json:"invalid_labels,omitempty"`
	Labels        map[string]string `json:"labels"`
	GPUs          []gpu.Device      `json:"gpus"`
	DriverVersion string            `json:"driver_version,omitempty"`
}

// Body returns the registration body (schema version 1) for the labels and
// the GPUs. The GPUs' UUIDs are in gpus; the labels file's comma-separated
// gpu_uuids is not repeated.
func Body(s *labels.Set, inv gpu.Inventory) []byte {
	b := body{
		TaskName:      s.TaskName,
		Project:       s.Project,
		Owner:         s.Owner,
		GPUCount:      s.GPUCount,
		SchemaVersion: SchemaVersion,
		TaskID:        s.TaskID,
		StartTime:     s.StartTime,
		SubmitTime:    s.SubmitTime,
		Hostname:      s.Hostname,
		Priority:      s.Priority,
		Env:           s.Env,
		DurationEst:   s.DurationEst,
		TrainerID:     number(s.TrainerID),
		TrainersNum:   number(s.TrainersNum),
		Pipeline:      s.Pipeline,
		PipelineRun:   s.PipelineRun,
		Step:          s.Step,
		Orchestrator:  s.Orchestrator,
		K8sNamespace:  s.K8sNamespace,
		K8sPod:        s.K8sPod,
		K8sNode:       s.K8sNode,
		K8sPodUID:     s.K8sPodUID,
		K8sJobIndex:   number(s.K8sJobIndex),
		InvalidLabels: s.Invalid,
		Labels:        s.Extra,
		GPUs:          inv.Devices,
		DriverVersion: inv.DriverVersion,
	}
	if b.Labels == nil {
		b.Labels = map[string]string{}
	}
	if b.GPUs == nil {
		b.GPUs = []gpu.Device{}
	}
	for i, d := range b.GPUs {
		if d.Share <= 0 {
			// Every entry carries its share: an inventory built without
			// one (not by gpu.Probe) holds whole GPUs.
			b.GPUs = slices.Clone(b.GPUs)
			b.GPUs[i].Share = gpu.ShareOf(d, 1)
		}
	}
	out, err := json.Marshal(b)
	if err != nil {
		// Strings, numbers, a string map and a slice of plain structs
		// always marshal.
		panic("register: marshalling the body: " + err.Error())
	}
	return out
}

// number converts a label that the labels package checked to be a decimal
// integer of at most nine digits; nil when it is not set.
func number(s string) *int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return nil
	}
	return &n
}
