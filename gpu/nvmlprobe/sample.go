package nvmlprobe

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/paddle-entrypoint/paddle-entrypoint/gpu"
)

// utilizationSymbol is the one entry point of the sampling mode outside the
// probe's list (see the package comment): it is looked up before it is
// called, so a driver that lacks it costs the utilisation fields, not the
// sampler.
const utilizationSymbol = "nvmlDeviceGetUtilizationRates"

// SamplingLibrary is the part of NVML the sampling mode uses: the listed
// entry points, plus LookupSymbol for nvmlDeviceGetUtilizationRates. The GPUs
// are found by index and UUID (nvmlDeviceGetHandleByIndex_v2,
// nvmlDeviceGetUUID), both listed, rather than with
// nvmlDeviceGetHandleByUUID, which is not.
type SamplingLibrary interface {
	Init() nvml.Return
	Shutdown() nvml.Return
	DeviceGetCount() (int, nvml.Return)
	DeviceGetHandleByIndex(int) (nvml.Device, nvml.Return)
	Extensions() nvml.ExtendedInterface
}

// ErrNoGPU is returned by Sample when none of the UUIDs names a GPU NVML lists.
var ErrNoGPU = errors.New("none of the GPUs to sample is listed by NVML")

// Sample initialises NVML once, then writes one gpu.Sample line to out per
// interval for the GPUs named by uuids, in their order, the first at once.
// A failed query leaves its value "-" in the line and is reported on errw
// once per GPU and call. It returns when stop is closed (nil), when out
// fails, or when NVML cannot be used at all.
func Sample(lib SamplingLibrary, uuids []string, interval time.Duration, out, errw io.Writer, stop <-chan struct{}) error {
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return nvmlError("nvmlInit_v2", ret)
	}
	defer lib.Shutdown()
	hasUtil := true
	if err := lib.Extensions().LookupSymbol(utilizationSymbol); err != nil {
		hasUtil = false
		fmt.Fprintf(errw, "%s not in the NVIDIA library (%v); utilisation is not sampled\n", utilizationSymbol, err)
	}
	handles, err := findDevices(lib, uuids, errw)
	if err != nil {
		return err
	}
	reported := map[string]bool{} // "call uuid" of failures already reported
	report := func(call, uuid string, ret nvml.Return) {
		if key := call + " " + uuid; !reported[key] {
			reported[key] = true
			fmt.Fprintf(errw, "%s: %s: %s (code %d)\n", uuid, call, ret.Error(), int(ret))
		}
	}
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	line := make([]byte, 0, 128*len(uuids))
	sample := make(gpu.Sample, len(uuids))
	for {
		for i, u := range uuids {
			r := gpu.Reading{UUID: u}
			if h := handles[i]; h != nil {
				if hasUtil {
					if util, ret := h.GetUtilizationRates(); ret == nvml.SUCCESS && util.Gpu <= 100 {
						r.Util, r.HasUtil = uint8(util.Gpu), true
					} else if ret != nvml.SUCCESS {
						report(utilizationSymbol, u, ret)
					}
				}
				if mem, ret := h.GetMemoryInfo(); ret == nvml.SUCCESS {
					r.MemoryUsed, r.HasMemory = mem.Used, true
				} else {
					report("nvmlDeviceGetMemoryInfo", u, ret)
				}
			}
			sample[i] = r
		}
		// One write per line: the reader sees whole lines as they come.
		if _, err := out.Write(sample.AppendText(line[:0])); err != nil {
			return err
		}
		select {
		case <-stop:
			return nil
		case <-ticker.C:
		}
	}
}

// findDevices returns a handle per UUID, nil for a UUID NVML does not list.
func findDevices(lib SamplingLibrary, uuids []string, errw io.Writer) ([]nvml.Device, error) {
	n, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, nvmlError("nvmlDeviceGetCount_v2", ret)
	}
	byUUID := make(map[string]nvml.Device, n)
	for i := range n {
		h, ret := lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			continue
		}
		if u, ret := h.GetUUID(); ret == nvml.SUCCESS {
			byUUID[u] = h
		}
	}
	handles := make([]nvml.Device, len(uuids))
	found := false
	for i, u := range uuids {
		if handles[i] = byUUID[u]; handles[i] != nil {
			found = true
		} else {
			fmt.Fprintf(errw, "%s: no GPU with this UUID; its values are \"-\"\n", u)
		}
	}
	if !found {
		return nil, ErrNoGPU
	}
	return handles, nil
}
