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
// process, so any other must be looked up first (LookupSymbol), as the
// sampling mode (Sample) does for nvmlDeviceGetUtilizationRates. Nothing is
// called before nvmlInit succeeded.
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
	}
	return r
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
