package register

import (
	"encoding/json"
	"strconv"

	"github.com/paddle-entrypoint/paddle-entrypoint/gpu"
	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
	"github.com/paddle-entrypoint/paddle-entrypoint/labels"
)

// SchemaVersion is the version of the registration body.
const SchemaVersion = wire.SchemaVersion

// Body returns the registration body (schema version 1, a
// wire.Registration) for the labels and the GPUs. The GPUs' UUIDs are in
// gpus; the labels file's comma-separated gpu_uuids is not repeated. Every
// value goes through encoding/json, so no label value can add a key or
// close a string.
func Body(s *labels.Set, inv gpu.Inventory) []byte {
	b := wire.Registration{
		TaskName:      s.TaskName,
		Project:       s.Project,
		Owner:         s.Owner,
		GPUCount:      ptr(int64(s.GPUCount)),
		SchemaVersion: ptr(int64(SchemaVersion)),
		TaskID:        s.TaskID,
		StartTime:     ptr(s.StartTime),
		SubmitTime:    positive(s.SubmitTime),
		Hostname:      s.Hostname,
		Priority:      s.Priority,
		Env:           s.Env,
		DurationEst:   positive(s.DurationEst),
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
		SlurmJob:      s.SlurmJob,
		InvalidLabels: s.Invalid,
		Labels:        s.Extra,
		GPUs:          make(wire.GPUs[wire.RegisteredGPU], 0, len(inv.Devices)),
		DriverVersion: inv.DriverVersion,
	}
	if b.Labels == nil {
		b.Labels = wire.Labels{}
	}
	for _, d := range inv.Devices {
		g := wire.RegisteredGPU{Index: ptr(int64(d.Index)), UUID: d.UUID, Name: d.Name,
			MemoryTotalBytes: int64(d.MemoryTotalBytes), Share: ptr(d.Share)}
		if d.Share <= 0 {
			// Every entry carries its share: an inventory built without
			// one (not by gpu.Probe) holds whole GPUs.
			g.Share = ptr(gpu.ShareOf(d, 1))
		}
		if m := d.MIG; m != nil {
			g.MIG = &wire.MIG{UUID: m.UUID, GPUInstanceID: ptr(int64(m.GPUInstanceID)),
				ComputeInstanceID: ptr(int64(m.ComputeInstanceID)), Profile: m.Profile,
				Slices: ptr(int64(m.Slices)), TotalSlices: ptr(int64(m.TotalSlices))}
		}
		b.GPUs = append(b.GPUs, g)
	}
	out, err := json.Marshal(b)
	if err != nil {
		// Strings, numbers, a string map and a slice of plain structs
		// always marshal.
		panic("register: marshalling the body: " + err.Error())
	}
	return out
}

// positive is v, nil when it is not set (0).
func positive(v int64) *int64 {
	if v == 0 {
		return nil
	}
	return &v
}

// number converts a label that the labels package checked to be a decimal
// integer of at most nine digits; nil when it is not set.
func number(s string) *int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return nil
	}
	return &n
}
