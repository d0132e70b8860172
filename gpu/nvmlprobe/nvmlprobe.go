// Package nvmlprobe asks NVML, through go-nvml, for the GPUs and the driver
// version, and writes the answer as a gpu.Report.
//
// It is cgo and calls into the dlopen'ed libnvidia-ml.so.1, so it is imported
// only by the probe executable (cmd/paddle-gpu-probe), never by a package
// the entrypoint links. It calls only these NVML entry points, which every
// driver that has nvmlInit_v2 exports: nvmlInit_v2, nvmlShutdown,
// nvmlErrorString, nvmlDeviceGetCount_v2, nvmlDeviceGetHandleByIndex_v2,
// nvmlDeviceGetName, nvmlDeviceGetUUID, nvmlDeviceGetMemoryInfo and
// nvmlSystemGetDriverVersion. A call to a symbol the library lacks kills the
// process, so any other must be looked up first (LookupSymbol): the MIG
// entry points (migSymbols), which drivers before MIG lack, and in the
// sampling mode (Sample) nvmlDeviceGetUtilizationRates and
// nvmlDeviceGetTotalEnergyConsumption. Nothing is called before nvmlInit
// succeeded.
//
// MIG: a GPU whose current MIG mode is on (nvmlDeviceGetMigMode) is listed
// like any other and its MIG devices beside it (gpu.Report.MIGDevices):
// nvmlDeviceGetMigDeviceHandleByIndex for every index below
// nvmlDeviceGetMaxMigDeviceCount (an index without a device answers
// NVML_ERROR_NOT_FOUND), then per MIG device its UUID, GPU and compute
// instance ids, attributes (nvmlDeviceGetAttributes_v2: gpuInstanceSliceCount
// and memorySizeMB give the slices and the profile name, gpu.Profile) and
// memory. NVML has no call for "the parent's number of GPU instance slices":
// total_slices is the parent's maximum MIG device count, which is that
// number on every MIG-capable GPU (7 on A100/H100/H200, 4 on A30), since
// the smallest GPU instance is one slice.
//
// A fault in the library (SIGSEGV, SIGBUS, SIGFPE) kills the probe with that
// signal, without a core dump, so that its parent can say the NVIDIA library
// crashed (see crash.go).
package nvmlprobe

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/paddle-entrypoint/paddle-entrypoint/gpu"
)

// Library is the part of NVML the probe uses; nvml.New() and go-nvml's
// mock.Interface provide it. Keeping it this narrow keeps the probe to the
// entry points listed in the package comment.
type Library interface {
	Init() nvml.Return
	Shutdown() nvml.Return
	SystemGetDriverVersion() (string, nvml.Return)
	DeviceGetCount() (int, nvml.Return)
	DeviceGetHandleByIndex(int) (nvml.Device, nvml.Return)
	Extensions() nvml.ExtendedInterface // LookupSymbol, for the MIG entry points
}

// migSymbols are the MIG entry points, looked up before the first is
// called; nvmlDeviceGetAttributes is found as either version (go-nvml calls
// _v2 where the library has it).
var migSymbols = [][]string{
	{"nvmlDeviceGetMigMode"},
	{"nvmlDeviceGetMaxMigDeviceCount"},
	{"nvmlDeviceGetMigDeviceHandleByIndex"},
	{"nvmlDeviceGetGpuInstanceId"},
	{"nvmlDeviceGetComputeInstanceId"},
	{"nvmlDeviceGetAttributes_v2", "nvmlDeviceGetAttributes"},
}

// hasMIG reports whether the library has every MIG entry point; missing
// names the first one it lacks, "" when it lacks nvmlDeviceGetMigMode
// itself (a driver older than MIG: no GPU of it can have MIG mode on).
func hasMIG(lib interface{ Extensions() nvml.ExtendedInterface }) (ok bool, missing string) {
	ext := lib.Extensions()
	for i, names := range migSymbols {
		found := false
		for _, n := range names {
			if ext.LookupSymbol(n) == nil {
				found = true
				break
			}
		}
		if !found {
			if i == 0 {
				return false, ""
			}
			return false, names[0]
		}
	}
	return true, ""
}

// Collect initialises NVML, lists every device it enumerates (unfiltered:
// CUDA_VISIBLE_DEVICES is the reader's business) and shuts NVML down. A
// device whose name, UUID or memory cannot be read is still listed, with
// what could be read, and the failure is recorded in Problems.
func Collect(lib Library) gpu.Report {
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return gpu.Report{Error: nvmlError("nvmlInit_v2", ret)}
	}
	// Messages are taken before Shutdown: nvmlErrorString is the library's,
	// and go-nvml unloads the library at Shutdown.
	defer lib.Shutdown()

	var r gpu.Report
	if v, ret := lib.SystemGetDriverVersion(); ret == nvml.SUCCESS {
		r.DriverVersion = v
	} else {
		r.Problems = append(r.Problems, problem("nvmlSystemGetDriverVersion", -1, ret))
	}
	n, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		r.Error = nvmlError("nvmlDeviceGetCount_v2", ret)
		return r
	}
	mig, missing := hasMIG(lib)
	if missing != "" {
		r.Problems = append(r.Problems, fmt.Sprintf("%s not in the NVIDIA library: MIG instances are not listed", missing))
	}
	r.Devices = make([]gpu.Device, 0, n)
	for i := range n {
		d := gpu.Device{Index: i}
		h, ret := lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			r.Problems = append(r.Problems, problem("nvmlDeviceGetHandleByIndex_v2", i, ret))
			r.Devices = append(r.Devices, d)
			continue
		}
		if d.Name, ret = h.GetName(); ret != nvml.SUCCESS {
			r.Problems = append(r.Problems, problem("nvmlDeviceGetName", i, ret))
		}
		if d.UUID, ret = h.GetUUID(); ret != nvml.SUCCESS {
			r.Problems = append(r.Problems, problem("nvmlDeviceGetUUID", i, ret))
		}
		if mem, ret := h.GetMemoryInfo(); ret == nvml.SUCCESS {
			d.MemoryTotalBytes = mem.Total
		} else {
			r.Problems = append(r.Problems, problem("nvmlDeviceGetMemoryInfo", i, ret))
		}
		r.Devices = append(r.Devices, d)
		if !mig {
			continue
		}
		current, _, ret := h.GetMigMode()
		switch {
		case ret == nvml.ERROR_NOT_SUPPORTED: // not a MIG-capable GPU
		case ret != nvml.SUCCESS:
			r.Problems = append(r.Problems, problem("nvmlDeviceGetMigMode", i, ret))
		case current == nvml.DEVICE_MIG_ENABLE:
			r.MIGEnabled = append(r.MIGEnabled, i)
			r.MIGDevices = append(r.MIGDevices, migDevices(h, d, &r.Problems)...)
		}
	}
	return r
}

// migDevices lists the MIG devices of the GPU parent (handle h), each as
// the task counts it: the parent's index, UUID and name, the instance's
// memory and MIG fields. A MIG device whose UUID cannot be read is left out
// (it could not be named, sampled or claimed), with a problem recorded.
func migDevices(h nvml.Device, parent gpu.Device, problems *[]string) []gpu.Device {
	i := parent.Index
	total, ret := h.GetMaxMigDeviceCount()
	if ret != nvml.SUCCESS {
		*problems = append(*problems, problem("nvmlDeviceGetMaxMigDeviceCount", i, ret))
		return nil
	}
	var out []gpu.Device
	for j := range total {
		m, ret := h.GetMigDeviceHandleByIndex(j)
		if ret == nvml.ERROR_NOT_FOUND {
			continue // no MIG device at this index
		}
		if ret != nvml.SUCCESS {
			*problems = append(*problems, problem(fmt.Sprintf("nvmlDeviceGetMigDeviceHandleByIndex(%d)", j), i, ret))
			continue
		}
		d := parent
		d.MemoryTotalBytes = 0
		info := &gpu.MIG{TotalSlices: total}
		call := func(name string, ret nvml.Return) bool {
			if ret != nvml.SUCCESS {
				*problems = append(*problems, problem(fmt.Sprintf("MIG device %d: %s", j, name), i, ret))
				return false
			}
			return true
		}
		var uuid string
		if uuid, ret = m.GetUUID(); !call("nvmlDeviceGetUUID", ret) {
			continue
		}
		info.UUID = uuid
		if gi, ret := m.GetGpuInstanceId(); call("nvmlDeviceGetGpuInstanceId", ret) {
			info.GPUInstanceID = gi
		}
		if ci, ret := m.GetComputeInstanceId(); call("nvmlDeviceGetComputeInstanceId", ret) {
			info.ComputeInstanceID = ci
		}
		if a, ret := m.GetAttributes(); call("nvmlDeviceGetAttributes_v2", ret) {
			info.Slices = int(a.GpuInstanceSliceCount)
			info.Profile = gpu.Profile(info.Slices, a.MemorySizeMB)
		}
		if mem, ret := m.GetMemoryInfo(); call("nvmlDeviceGetMemoryInfo", ret) {
			d.MemoryTotalBytes = mem.Total
		}
		d.MIG = info
		out = append(out, d)
	}
	return out
}

func nvmlError(call string, ret nvml.Return) *gpu.NVMLError {
	return &gpu.NVMLError{Call: call, Code: int(ret), Message: ret.Error()}
}

// problem describes a failed query; device -1 means a system-wide one.
func problem(call string, device int, ret nvml.Return) string {
	if device < 0 {
		return fmt.Sprintf("%s: %s (code %d)", call, ret.Error(), int(ret))
	}
	return fmt.Sprintf("GPU %d: %s: %s (code %d)", device, call, ret.Error(), int(ret))
}
