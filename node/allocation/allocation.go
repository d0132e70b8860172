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
