// Package hami reads the devices HAMi (a fractional GPU device plugin)
// gave a pod, from the annotation its scheduler writes on the pod and the
// container runtime keeps on the pod's sandbox:
//
//	hami.io/vgpu-devices-allocated: GPU-<uuid>,NVIDIA,<memory MiB>,<core %>:<next device>:;<next container>;
//
// Containers are separated by ";" in the order of the pod's
// spec.containers (an entry for each, empty for one without devices; a
// trailing ";" ends the list); a container's devices by ":" (with a
// trailing ":"), each "UUID,type,used memory in MiB,used cores in percent"
// (later HAMi versions may add fields after these four; they are ignored).
// Cores 0 means no core limit: the memory share is the part then.
// testdata/ holds annotations of real HAMi versions.
//
// The agent reads the annotation from the CRI sandbox, set when the pod was
// created, never from the API server: a team that patches its pod's
// annotations later changes nothing here.
package hami

import (
	"fmt"
	"strconv"
	"strings"
)

// Annotation is the key HAMi writes the allocation under.
const Annotation = "hami.io/vgpu-devices-allocated"

// Device is one GPU given to a container.
type Device struct {
	UUID      string
	Type      string // "NVIDIA"
	MemoryMiB uint64 // the memory given
	Cores     int    // percent of the GPU's cores; 0: no limit
}

// Parse reads the annotation's value: the devices of each container, by
// its index in the pod's spec.containers.
func Parse(v string) ([][]Device, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return nil, nil
	}
	v = strings.TrimSuffix(v, ";")
	var out [][]Device
	for i, c := range strings.Split(v, ";") {
		var devs []Device
		for _, d := range strings.Split(c, ":") {
			if strings.TrimSpace(d) == "" {
				continue
			}
			f := strings.Split(d, ",")
			if len(f) < 4 {
				return nil, fmt.Errorf("%s: container %d: device %q has %d fields, want UUID,type,memory,cores", Annotation, i, d, len(f))
			}
			mem, err := strconv.ParseUint(strings.TrimSpace(f[2]), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%s: container %d: device %q: memory %q is not a number of MiB", Annotation, i, d, f[2])
			}
			cores, err := strconv.Atoi(strings.TrimSpace(f[3]))
			if err != nil || cores < 0 || cores > 100 {
				return nil, fmt.Errorf("%s: container %d: device %q: cores %q is not a percentage", Annotation, i, d, f[3])
			}
			uuid := strings.TrimSpace(f[0])
			if uuid == "" {
				return nil, fmt.Errorf("%s: container %d: device %q has no UUID", Annotation, i, d)
			}
			devs = append(devs, Device{UUID: uuid, Type: strings.TrimSpace(f[1]), MemoryMiB: mem, Cores: cores})
		}
		out = append(out, devs)
	}
	return out, nil
}

// Share is the part of a GPU of memoryTotal bytes the device gives: its
// core share, or its memory share where it sets no core limit; 0 when
// neither says (the GPU's memory unknown).
func (d Device) Share(memoryTotal uint64) float64 {
	if d.Cores > 0 {
		return float64(d.Cores) / 100
	}
	if memoryTotal > 0 && d.MemoryMiB > 0 {
		return min(float64(d.MemoryMiB<<20)/float64(memoryTotal), 1)
	}
	return 0
}
