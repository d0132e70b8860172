package nvmlprobe

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/paddle-entrypoint/paddle-entrypoint/gpu"
	"github.com/paddle-entrypoint/paddle-entrypoint/internal/probestream"
)

// The streaming mode's entry points outside the probe's list, each looked up
// before it is called (a driver that lacks one costs its readings only).
// A process list is found under any of its names (go-nvml calls the newest
// version the library has).
var (
	processListSymbols = [][]string{
		{"nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2", "nvmlDeviceGetComputeRunningProcesses"},
		{"nvmlDeviceGetMPSComputeRunningProcesses_v3", "nvmlDeviceGetMPSComputeRunningProcesses_v2", "nvmlDeviceGetMPSComputeRunningProcesses"},
		{"nvmlDeviceGetGraphicsRunningProcesses_v3", "nvmlDeviceGetGraphicsRunningProcesses_v2", "nvmlDeviceGetGraphicsRunningProcesses"},
	}
	processUtilSymbol = "nvmlDeviceGetProcessUtilization"
	gpmSymbols        = []string{"nvmlGpmQueryDeviceSupport", "nvmlGpmSampleAlloc", "nvmlGpmMigSampleGet", "nvmlGpmMetricsGet", "nvmlGpmSampleFree"}
)

// mpsServer is the MPS control daemon's server process: it holds every MPS
// client's context, so it is left out (its clients are listed themselves).
const mpsServer = "nvidia-cuda-mps-server"

// StreamingLibrary is the part of NVML the streaming mode uses.
type StreamingLibrary interface {
	SamplingLibrary
	GpmSampleAlloc() (nvml.GpmSample, nvml.Return)
	GpmMetricsGet(*nvml.GpmMetricsGetType) nvml.Return
}

// Streamer keeps NVML's state between samples: the per-GPU cursor of
// per-process utilisation and the previous GPM sample of each MIG
// instance. One Streamer serves one process.
type Streamer struct {
	lib      StreamingLibrary
	errw     io.Writer
	comm     func(pid uint32) string // a process's command name, "" unknown
	lists    [3]bool                 // which process lists the library has
	procUtil bool
	util     bool
	energy   bool
	mig      bool
	gpm      bool
	cursor   map[string]uint64 // per GPU UUID: newest timestamp seen
	gpmPrev  map[string]nvml.GpmSample
	reported map[string]bool
}

// NewStreamer looks up the optional entry points once; comm names a
// process (reading /proc/PID/comm) so that the MPS server is left out.
func NewStreamer(lib StreamingLibrary, errw io.Writer, comm func(pid uint32) string) *Streamer {
	s := &Streamer{lib: lib, errw: errw, comm: comm, cursor: map[string]uint64{}, gpmPrev: map[string]nvml.GpmSample{}, reported: map[string]bool{}}
	ext := lib.Extensions()
	has := func(names ...string) bool {
		return slices.ContainsFunc(names, func(n string) bool { return ext.LookupSymbol(n) == nil })
	}
	for i, names := range processListSymbols {
		if s.lists[i] = has(names...); !s.lists[i] {
			fmt.Fprintf(errw, "%s not in the NVIDIA library; that process list is not read\n", names[0])
		}
	}
	s.procUtil = has(processUtilSymbol)
	s.util = has(utilizationSymbol)
	s.energy = has(energySymbol)
	s.mig, _ = hasMIG(lib)
	s.gpm = true
	for _, n := range gpmSymbols {
		s.gpm = s.gpm && has(n)
	}
	return s
}

func (s *Streamer) report(call, uuid string, ret nvml.Return) {
	if key := call + " " + uuid; !s.reported[key] {
		s.reported[key] = true
		fmt.Fprintf(s.errw, "%s: %s: %s (code %d)\n", uuid, call, ret.Error(), int(ret))
	}
}

// Sample reads every GPU once. NVML must be initialised.
func (s *Streamer) Sample(now time.Time) probestream.Line {
	line := probestream.Line{Time: now.UnixNano(), GPUs: []probestream.GPU{}}
	n, ret := s.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		line.Error = nvmlError("nvmlDeviceGetCount_v2", ret).Error()
		return line
	}
	for i := range n {
		h, ret := s.lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			s.report("nvmlDeviceGetHandleByIndex_v2", fmt.Sprint("GPU ", i), ret)
			continue
		}
		g := probestream.GPU{Index: i, Processes: []probestream.Process{}, Instances: []probestream.Instance{}}
		if g.UUID, ret = h.GetUUID(); ret != nvml.SUCCESS {
			s.report("nvmlDeviceGetUUID", fmt.Sprint("GPU ", i), ret)
			continue // a GPU without a name cannot be reported
		}
		if g.Name, ret = h.GetName(); ret != nvml.SUCCESS {
			s.report("nvmlDeviceGetName", g.UUID, ret)
		}
		if mem, ret := h.GetMemoryInfo(); ret == nvml.SUCCESS {
			g.MemoryTotalBytes = mem.Total
		} else {
			s.report("nvmlDeviceGetMemoryInfo", g.UUID, ret)
		}
		if s.energy {
			if mj, ret := h.GetTotalEnergyConsumption(); ret == nvml.SUCCESS {
				g.EnergyMillijoule = &mj
			} else if ret != nvml.ERROR_NOT_SUPPORTED {
				s.report(energySymbol, g.UUID, ret)
			}
		}
		if s.mig {
			if current, _, ret := h.GetMigMode(); ret == nvml.SUCCESS && current == nvml.DEVICE_MIG_ENABLE {
				g.MIGMode = true
			}
		}
		if g.MIGMode {
			s.instances(h, &g)
		} else {
			if s.util {
				if u, ret := h.GetUtilizationRates(); ret == nvml.SUCCESS && u.Gpu <= 100 {
					v := u.Gpu
					g.Util = &v
				} else if ret != nvml.SUCCESS {
					s.report(utilizationSymbol, g.UUID, ret)
				}
			}
			g.Processes = s.processes(h, g.UUID)
			g.ProcessUtil = s.processUtil(h, g.UUID, g.Processes)
		}
		line.GPUs = append(line.GPUs, g)
	}
	return line
}

// processes merges the compute, MPS-compute and graphics lists by PID (the
// largest used memory kept), without the MPS server.
func (s *Streamer) processes(h nvml.Device, uuid string) []probestream.Process {
	out := []probestream.Process{}
	calls := [3]func() ([]nvml.ProcessInfo, nvml.Return){h.GetComputeRunningProcesses, h.GetMPSComputeRunningProcesses, h.GetGraphicsRunningProcesses}
	for i, call := range calls {
		if !s.lists[i] {
			continue
		}
		infos, ret := call()
		if ret != nvml.SUCCESS {
			if ret != nvml.ERROR_NOT_SUPPORTED {
				s.report(processListSymbols[i][0], uuid, ret)
			}
			continue
		}
		for _, p := range infos {
			if s.comm != nil && s.comm(p.Pid) == mpsServer {
				continue
			}
			used := p.UsedGpuMemory
			if used == ^uint64(0) { // NVML_VALUE_NOT_AVAILABLE
				used = 0
			}
			if k := slices.IndexFunc(out, func(q probestream.Process) bool { return q.PID == p.Pid }); k >= 0 {
				out[k].UsedMemoryBytes = max(out[k].UsedMemoryBytes, used)
				continue
			}
			out = append(out, probestream.Process{PID: p.Pid, UsedMemoryBytes: used})
		}
	}
	slices.SortFunc(out, func(a, b probestream.Process) int { return int(a.PID) - int(b.PID) })
	return out
}

// processUtil sets the processes' SM utilisation from the samples newer
// than the GPU's cursor, newest per PID, clamped to 0-100; a listed process
// without a sample, or a NOT_FOUND answer, is 0. It reports whether the GPU
// has values (false: NOT_SUPPORTED, a failure, or no such entry point).
func (s *Streamer) processUtil(h nvml.Device, uuid string, procs []probestream.Process) bool {
	if !s.procUtil {
		return false
	}
	samples, ret := h.GetProcessUtilization(s.cursor[uuid])
	switch {
	case ret == nvml.ERROR_NOT_FOUND:
		samples = nil
	case ret == nvml.ERROR_NOT_SUPPORTED:
		return false
	case ret != nvml.SUCCESS:
		s.report(processUtilSymbol, uuid, ret)
		return false
	}
	newest := map[uint32]nvml.ProcessUtilizationSample{}
	for _, p := range samples {
		if q, ok := newest[p.Pid]; !ok || p.TimeStamp > q.TimeStamp {
			newest[p.Pid] = p
		}
		s.cursor[uuid] = max(s.cursor[uuid], p.TimeStamp)
	}
	for i := range procs {
		v := min(newest[procs[i].PID].SmUtil, 100)
		procs[i].SMUtil = &v
	}
	return true
}

// instances lists the GPU instances of a GPU in MIG mode, their compute
// instances (MIG devices) merged.
func (s *Streamer) instances(h nvml.Device, g *probestream.GPU) {
	total, ret := h.GetMaxMigDeviceCount()
	if ret != nvml.SUCCESS {
		s.report("nvmlDeviceGetMaxMigDeviceCount", g.UUID, ret)
		return
	}
	g.TotalSlices = total
	for j := range total {
		m, ret := h.GetMigDeviceHandleByIndex(j)
		if ret == nvml.ERROR_NOT_FOUND {
			continue
		}
		if ret != nvml.SUCCESS {
			s.report(fmt.Sprintf("nvmlDeviceGetMigDeviceHandleByIndex(%d)", j), g.UUID, ret)
			continue
		}
		uuid, ret := m.GetUUID()
		if ret != nvml.SUCCESS {
			s.report("nvmlDeviceGetUUID (MIG)", g.UUID, ret)
			continue
		}
		gi, ret := m.GetGpuInstanceId()
		if ret != nvml.SUCCESS {
			s.report("nvmlDeviceGetGpuInstanceId", uuid, ret)
			continue
		}
		k := slices.IndexFunc(g.Instances, func(in probestream.Instance) bool { return in.GPUInstanceID == gi })
		if k < 0 {
			in := probestream.Instance{GPUInstanceID: gi, MIGUUIDs: []string{}, Processes: []probestream.Process{}}
			if a, ret := m.GetAttributes(); ret == nvml.SUCCESS {
				in.Slices = int(a.GpuInstanceSliceCount)
				in.Profile = gpu.Profile(in.Slices, a.MemorySizeMB)
				in.MemoryTotalBytes = a.MemorySizeMB << 20
			} else {
				s.report("nvmlDeviceGetAttributes_v2", uuid, ret)
			}
			// The placement, where the driver says (DRA names a
			// partition it created by it); none is no error.
			if gh, ret := h.GetGpuInstanceById(gi); ret == nvml.SUCCESS {
				if info, ret := gh.GetInfo(); ret == nvml.SUCCESS {
					start := int(info.Placement.Start)
					in.PlacementStart = &start
				}
			}
			in.Util = s.gpmUtil(h, g.UUID, gi)
			g.Instances = append(g.Instances, in)
			k = len(g.Instances) - 1
		}
		in := &g.Instances[k]
		in.MIGUUIDs = append(in.MIGUUIDs, uuid)
		for _, p := range s.processes(m, uuid) {
			if q := slices.IndexFunc(in.Processes, func(q probestream.Process) bool { return q.PID == p.PID }); q >= 0 {
				in.Processes[q].UsedMemoryBytes = max(in.Processes[q].UsedMemoryBytes, p.UsedMemoryBytes)
				continue
			}
			in.Processes = append(in.Processes, p)
		}
	}
}

// gpmUtil returns the GPU instance's GPM SM activity between the previous
// sample and this one (nil on the first, or where GPM is not supported).
func (s *Streamer) gpmUtil(h nvml.Device, uuid string, gi int) *float64 {
	if !s.gpm {
		return nil
	}
	if sup, ret := h.GpmQueryDeviceSupport(); ret != nvml.SUCCESS || sup.IsSupportedDevice == 0 {
		return nil
	}
	key := fmt.Sprintf("%s/%d", uuid, gi)
	cur, ret := s.lib.GpmSampleAlloc()
	if ret != nvml.SUCCESS {
		s.report("nvmlGpmSampleAlloc", uuid, ret)
		return nil
	}
	if ret := h.GpmMigSampleGet(gi, cur); ret != nvml.SUCCESS {
		cur.Free()
		if ret != nvml.ERROR_NOT_SUPPORTED {
			s.report("nvmlGpmMigSampleGet", key, ret)
		}
		return nil
	}
	prev, ok := s.gpmPrev[key]
	s.gpmPrev[key] = cur
	if !ok {
		return nil
	}
	defer prev.Free()
	get := nvml.GpmMetricsGetType{NumMetrics: 1, Sample1: prev, Sample2: cur}
	get.Metrics[0].MetricId = uint32(nvml.GPM_METRIC_SM_UTIL)
	if ret := s.lib.GpmMetricsGet(&get); ret != nvml.SUCCESS || get.Metrics[0].NvmlReturn != uint32(nvml.SUCCESS) {
		s.report("nvmlGpmMetricsGet", key, ret)
		return nil
	}
	v := min(max(get.Metrics[0].Value, 0), 100)
	return &v
}

// Stream initialises NVML once and writes one probestream.Line (JSON, one
// write per line) to out at once and then every interval, until stop is
// closed (nil) or out fails. When NVML cannot be initialised it writes one
// line with Error set and returns the error.
func Stream(lib StreamingLibrary, interval time.Duration, out, errw io.Writer, comm func(uint32) string, stop <-chan struct{}) error {
	if ret := lib.Init(); ret != nvml.SUCCESS {
		err := nvmlError("nvmlInit_v2", ret)
		b, _ := json.Marshal(probestream.Line{Time: time.Now().UnixNano(), Error: err.Error(), GPUs: []probestream.GPU{}})
		out.Write(append(b, '\n'))
		return err
	}
	defer lib.Shutdown()
	s := NewStreamer(lib, errw, comm)
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		b, err := json.Marshal(s.Sample(time.Now()))
		if err != nil {
			return err
		}
		if _, err := out.Write(append(b, '\n')); err != nil {
			return err
		}
		select {
		case <-stop:
			return nil
		case <-ticker.C:
		}
	}
}
