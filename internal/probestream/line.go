// Package probestream is the node agent's side of the GPU probe's streaming
// mode (`paddle-gpu-probe node --interval D`): the JSON line the probe writes
// once per sample (Line), and Child, which keeps one probe process running,
// hands each of its lines to the agent, and kills and restarts it (with
// backoff) when it misses two samples in a row.
//
// Guarantees: the agent stays static and cgo-free (it only reads lines); a
// line is either decoded whole or counted as a failed sample; a probe that
// hangs, crashes or cannot start costs samples, never the agent.
package probestream

// Line is one sample of every GPU of the node, as the probe saw it.
// Optional readings are pointers: nil means NVML gave no value (a call the
// driver lacks, NOT_SUPPORTED, or a failure, reported on the probe's
// stderr).
type Line struct {
	// Time is when the probe took the sample (Unix nanoseconds).
	Time int64 `json:"time"`
	// Error is set when NVML could not be used for this sample at all
	// (nvmlInit failed, no device count); GPUs is then empty.
	Error string `json:"error,omitempty"`
	GPUs  []GPU  `json:"gpus"`
}

// GPU is one GPU NVML enumerates.
type GPU struct {
	Index            int     `json:"index"`
	UUID             string  `json:"uuid"`
	Name             string  `json:"name"`
	MemoryTotalBytes uint64  `json:"memory_total_bytes"`
	MIGMode          bool    `json:"mig_mode"`
	TotalSlices      int     `json:"total_slices,omitempty"` // MIG mode: the GPU's slices
	Util             *uint32 `json:"util"`                   // device utilisation, whole GPUs
	EnergyMillijoule *uint64 `json:"energy_mj"`              // the counter, since the driver loaded
	// ProcessUtil says whether per-process SM utilisation has values on
	// this GPU: false when NVML answered NOT_SUPPORTED (or lacks the call).
	ProcessUtil bool       `json:"process_util"`
	Processes   []Process  `json:"processes"` // whole GPUs only
	Instances   []Instance `json:"instances"` // MIG mode only
}

// Instance is one MIG GPU instance: its compute instances (MIG devices)
// merged.
type Instance struct {
	GPUInstanceID    int      `json:"gpu_instance_id"`
	Profile          string   `json:"profile"`
	Slices           int      `json:"slices"`
	MIGUUIDs         []string `json:"mig_uuids"`
	MemoryTotalBytes uint64   `json:"memory_total_bytes"`
	// PlacementStart is the GPU instance's first memory slice
	// (nvmlGpuInstanceGetInfo's placement), nil where NVML does not say: a
	// DRA-created partition names it in its device name.
	PlacementStart *int      `json:"placement_start,omitempty"`
	Util           *float64  `json:"util"` // GPM SM activity, where supported
	Processes      []Process `json:"processes"`
}

// Process is one process on a GPU or instance, de-duplicated by PID across
// NVML's compute, MPS-compute and graphics lists.
type Process struct {
	PID             uint32  `json:"pid"`
	UsedMemoryBytes uint64  `json:"used_memory_bytes"`
	SMUtil          *uint32 `json:"sm_util"` // nil without a value (ProcessUtil false)
}
