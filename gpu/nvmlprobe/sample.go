package nvmlprobe

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/paddle-entrypoint/paddle-entrypoint/gpu"
)

// utilizationSymbol and energySymbol are the sampling mode's entry points
// outside the probe's list (see the package comment): they are looked up
// before they are called, so a driver that lacks one costs its field, not
// the sampler. The MIG entry points are looked up as the probe does.
const (
	utilizationSymbol = "nvmlDeviceGetUtilizationRates"
	energySymbol      = "nvmlDeviceGetTotalEnergyConsumption"
)

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
// interval for the GPUs named by uuids (a GPU's UUID or a MIG device's MIG
// UUID), in their order, the first at once. A failed query leaves its value
// "-" in the line and is reported on errw once per GPU and call. It returns
// when stop is closed (nil), when out fails, or when NVML cannot be used at
// all.
//
// A MIG device gets its utilisation where NVML gives one (it answers
// NVML_ERROR_NOT_SUPPORTED on MIG devices: "-", not reported) and its
// parent's energy counter; its used memory is not read, so that a MIG entry
// has no sample while NVML gives no utilisation (the contract's "samples 0
// and null fields"). The MIG devices are found when sampling starts: one
// the probe listed and that is gone since (the GPU was re-partitioned) is
// "-" throughout.
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
	hasEnergy := true
	if err := lib.Extensions().LookupSymbol(energySymbol); err != nil {
		hasEnergy = false
		fmt.Fprintf(errw, "%s not in the NVIDIA library (%v); energy is not sampled\n", energySymbol, err)
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
	type reading struct {
		mj  uint64
		ret nvml.Return
	}
	energy := map[int]reading{} // per GPU, in the line being written
	for {
		clear(energy)
		for i, u := range uuids {
			r := gpu.Reading{UUID: u}
			if t := handles[i]; t.device != nil {
				h, isMIG := t.device, t.parent != nil
				if hasUtil {
					if util, ret := h.GetUtilizationRates(); ret == nvml.SUCCESS && util.Gpu <= 100 {
						r.Util, r.HasUtil = uint8(util.Gpu), true
					} else if ret != nvml.SUCCESS && !(isMIG && ret == nvml.ERROR_NOT_SUPPORTED) {
						report(utilizationSymbol, u, ret)
					}
				}
				if !isMIG {
					if mem, ret := h.GetMemoryInfo(); ret == nvml.SUCCESS {
						r.MemoryUsed, r.HasMemory = mem.Used, true
					} else {
						report("nvmlDeviceGetMemoryInfo", u, ret)
					}
				}
				if hasEnergy {
					// Once per GPU and line: its MIG devices share the
					// reading.
					e, ok := energy[t.gpu]
					if !ok {
						if isMIG {
							h = t.parent
						}
						e.mj, e.ret = h.GetTotalEnergyConsumption()
						energy[t.gpu] = e
					}
					if e.ret == nvml.SUCCESS {
						r.Energy, r.HasEnergy = e.mj, true
					} else {
						report(energySymbol, u, e.ret)
					}
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

// target is what a key names: a GPU (parent nil), or a MIG device and
// its parent GPU.
type target struct {
	device, parent nvml.Device
	gpu            int // the GPU's NVML index, a MIG device's parent's
}

// findDevices returns a target per key, a zero one for a key NVML does not
// list. MIG devices are looked for only when a key is a MIG UUID.
func findDevices(lib SamplingLibrary, uuids []string, errw io.Writer) ([]target, error) {
	n, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, nvmlError("nvmlDeviceGetCount_v2", ret)
	}
	wantMIG := slices.ContainsFunc(uuids, func(u string) bool { return strings.HasPrefix(u, "MIG-") })
	if wantMIG {
		if ok, missing := hasMIG(lib); !ok {
			wantMIG = false
			fmt.Fprintf(errw, "MIG entry points not in the NVIDIA library (%s); MIG devices are not sampled\n", missing)
		}
	}
	byUUID := make(map[string]target, n)
	for i := range n {
		h, ret := lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			continue
		}
		if u, ret := h.GetUUID(); ret == nvml.SUCCESS {
			byUUID[u] = target{device: h, gpu: i}
		}
		if !wantMIG {
			continue
		}
		if current, _, ret := h.GetMigMode(); ret != nvml.SUCCESS || current != nvml.DEVICE_MIG_ENABLE {
			continue
		}
		total, ret := h.GetMaxMigDeviceCount()
		if ret != nvml.SUCCESS {
			continue
		}
		for j := range total {
			m, ret := h.GetMigDeviceHandleByIndex(j)
			if ret != nvml.SUCCESS {
				continue
			}
			if u, ret := m.GetUUID(); ret == nvml.SUCCESS {
				byUUID[u] = target{device: m, parent: h, gpu: i}
			}
		}
	}
	handles := make([]target, len(uuids))
	found := false
	for i, u := range uuids {
		if handles[i] = byUUID[u]; handles[i].device != nil {
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
