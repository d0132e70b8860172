// Package allocation is what the node's orchestrators say about GPU
// devices: which running containers exist (their names, for the owners of
// GPU processes) and which were given which devices. The kubelet's
// pod-resources API with the runtime's CRI (package podresources) and a
// Docker-compatible API (package dockerapi) answer in these types; the
// agent maps device IDs to GPU instances.
package allocation

import "context"

// Container is a running container a runtime or the kubelet knows.
type Container struct {
	ID, Runtime, PodUID, Namespace, Pod, Name string
}

// Allocation gives a container GPU devices, as the source names them:
// "GPU-<uuid>", "MIG-<uuid>", "MIG-GPU-<uuid>/<gi>/<ci>", a time-slicing or
// MPS replica "<id>::<n>", an NVML index, or "all".
type Allocation struct {
	Container Container
	Devices   []string
	// Claims are the container's Dynamic Resource Allocation devices as
	// the kubelet lists them; the agent resolves them through the node's
	// ResourceSlices into Devices and Grants.
	Claims []ClaimDevice
	// Grants say more about some of Devices than their ID: a DRA claim's
	// or a fractional plugin's device with its part of the device.
	Grants []Grant
}

// ClaimDevice is one device of a DRA claim a container holds
// (pod-resources' dynamic_resources).
type ClaimDevice struct {
	ClaimNamespace, ClaimName string
	Driver, Pool, Device      string
	ShareID                   string // a consumable-capacity share; "" for none
	CDIDevices                []string
}

// Key names the DRA device (driver, pool, device) a share is of.
func (c ClaimDevice) Key() string { return c.Driver + "/" + c.Pool + "/" + c.Device }

// Grant is one device of Devices with what its source says beyond the ID.
type Grant struct {
	Device                    string // as in Devices
	Kind                      string // "dra" or "hami" (wire.AllocationDRA, wire.AllocationHAMi)
	ClaimNamespace, ClaimName string // a DRA claim
	// Capacity is the part of the device given, in (0, 1]; 0 when the
	// source gives none (a whole device, or sharers counted per sample).
	Capacity float64
	// MemoryBytes is the memory a fractional plugin gave: the part is
	// its share of the GPU's memory where Capacity is 0.
	MemoryBytes uint64
	// Shared is the DRA device's key when the device is shared without
	// sizes: its part is 1/n for the n distinct containers holding it.
	Shared string
}

// Snapshot is one answer of a source.
type Snapshot struct {
	Containers  []Container
	Allocations []Allocation
}

// Source is one place allocations come from. A call must end by ctx's
// deadline.
type Source interface {
	Name() string
	Snapshot(ctx context.Context) (Snapshot, error)
}
