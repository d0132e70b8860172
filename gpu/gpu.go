// Package gpu counts the GPUs the training command will use.
//
// NVML is asked by a separate cgo executable, the probe
// (cmd/paddle-gpu-probe), never by this package: it is cgo-free, so the
// entrypoint that links it stays a static binary that LD_BIND_NOW, a wrong
// glibc, a crashing or a hung driver library cannot stop. Start runs the
// probe as a child process in the background; Wait returns its answer, or
// what could be learnt without it, at most Options.Timeout after Start.
//
// Guarantees:
//   - A container with no /dev/nvidia<N> device node and no libnvidia-ml.so.1
//     on the loader's search path runs no probe at all (a few system calls).
//   - Wait never returns later than Timeout after Start, and returns at once
//     when Start's context is done; a probe still running then is killed.
//   - A probe that crashes, hangs, fails or cannot start costs only the GPU
//     fields: device nodes are counted instead where they exist (Source
//     "device-nodes"), and the reason is logged.
//   - The devices are filtered by CUDA_VISIBLE_DEVICES as CUDA filters them
//     (see Select and Visible), so the count is what the training will see;
//     a GPU in MIG mode is never counted whole, only as its MIG instances.
//   - Every device carries its share of the physical GPU, in (0, 1].
package gpu

// Device is one GPU as NVML reports it inside the container.
type Device struct {
	// Index is NVML's index inside the container (indices are renumbered
	// per container; use the UUID to join with node-level metrics). For a
	// device counted from its device node, the node's rank by minor number.
	Index int    `json:"index"`
	UUID  string `json:"uuid"` // "GPU-...", "" when unknown
	Name  string `json:"name"` // e.g. "NVIDIA A100-SXM4-80GB"
	// MemoryTotalBytes is the GPU's memory, or a MIG instance's own.
	MemoryTotalBytes uint64 `json:"memory_total_bytes"`
	// Share is the fraction of the physical GPU the task holds, in (0, 1]:
	// slices / total_slices for a MIG instance, PADDLE_GPU_SHARE (default 1)
	// for a whole GPU. The probe leaves it 0 (and out of its report);
	// Probe.Wait sets it.
	Share float64 `json:"share,omitempty"`
	// MIG is set when the entry is a MIG instance: Index, UUID and Name
	// are then its parent GPU's (dcgm-exporter labels MIG series with the
	// parent's UUID), MemoryTotalBytes the instance's.
	MIG *MIG `json:"mig,omitempty"`
}

// MIG describes a MIG instance (a MIG device: one compute instance of one
// GPU instance).
type MIG struct {
	UUID              string `json:"uuid"` // "MIG-..."
	GPUInstanceID     int    `json:"gpu_instance_id"`
	ComputeInstanceID int    `json:"compute_instance_id"`
	// Profile is the GPU instance profile as nvidia-smi and dcgm-exporter's
	// GPU_I_PROFILE spell it, "1g.18gb" (see Profile).
	Profile string `json:"profile"`
	// Slices is the GPU instance's slice count (NVML's
	// gpuInstanceSliceCount); TotalSlices the parent's number of GPU
	// instance slices (7 on A100/H100/H200), which NVML reports as the
	// parent's maximum MIG device count.
	Slices      int `json:"slices"`
	TotalSlices int `json:"total_slices"`
}

// Key is what names the entry in the sampler's lines and the labels file's
// gpu_uuids: the MIG UUID of a MIG instance, else the GPU's UUID.
func (d Device) Key() string {
	if d.MIG != nil {
		return d.MIG.UUID
	}
	return d.UUID
}

// Inventory is what the training will see.
type Inventory struct {
	Devices       []Device
	DriverVersion string // "" when unknown
	// Source says where the count came from: "nvml", "device-nodes" or "none".
	Source string

	// What the probe reported of MIG, until filter has used it.
	mig   []Device
	migOn map[int]bool
}

// Sources of an Inventory.
const (
	SourceNVML        = "nvml"
	SourceDeviceNodes = "device-nodes"
	SourceNone        = "none"
)

// UUIDs returns the devices' keys in order (a MIG instance's MIG UUID, a
// GPU's UUID), leaving out empty ones.
func (inv Inventory) UUIDs() []string {
	var out []string
	for _, d := range inv.Devices {
		if k := d.Key(); k != "" {
			out = append(out, k)
		}
	}
	return out
}
