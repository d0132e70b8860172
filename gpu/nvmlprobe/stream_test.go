package nvmlprobe

import (
	"bytes"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

// TestStreamerProcesses: the three lists merged by PID (largest memory),
// the MPS server left out, per-process SM utilisation the newest sample
// per PID after the GPU's cursor, clamped, a listed process without a
// sample 0, NOT_FOUND all 0, NOT_SUPPORTED no value.
func TestStreamerProcesses(t *testing.T) {
	var cursors []uint64
	answers := []struct {
		samples []nvml.ProcessUtilizationSample
		ret     nvml.Return
	}{
		{[]nvml.ProcessUtilizationSample{
			{Pid: 10, TimeStamp: 100, SmUtil: 90}, {Pid: 10, TimeStamp: 200, SmUtil: 30}, // newest: 30
			{Pid: 11, TimeStamp: 150, SmUtil: 250}, // clamped to 100
		}, nvml.SUCCESS},
		{nil, nvml.ERROR_NOT_FOUND},
		{nil, nvml.ERROR_NOT_SUPPORTED},
	}
	call := 0
	dev := &mock.Device{
		GetUUIDFunc:                   func() (string, nvml.Return) { return "GPU-0", nvml.SUCCESS },
		GetNameFunc:                   func() (string, nvml.Return) { return "NVIDIA H200", nvml.SUCCESS },
		GetMemoryInfoFunc:             func() (nvml.Memory, nvml.Return) { return nvml.Memory{Total: 1 << 30}, nvml.SUCCESS },
		GetTotalEnergyConsumptionFunc: func() (uint64, nvml.Return) { return 5000, nvml.SUCCESS },
		GetMigModeFunc:                func() (int, int, nvml.Return) { return 0, 0, nvml.ERROR_NOT_SUPPORTED },
		GetUtilizationRatesFunc:       func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{Gpu: 70}, nvml.SUCCESS },
		GetComputeRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) {
			return []nvml.ProcessInfo{{Pid: 10, UsedGpuMemory: 100}, {Pid: 11, UsedGpuMemory: 5}, {Pid: 99, UsedGpuMemory: 1}}, nvml.SUCCESS
		},
		GetMPSComputeRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) {
			return []nvml.ProcessInfo{{Pid: 12, UsedGpuMemory: ^uint64(0)}}, nvml.SUCCESS
		},
		GetGraphicsRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) {
			return []nvml.ProcessInfo{{Pid: 10, UsedGpuMemory: 300}}, nvml.SUCCESS
		},
		GetProcessUtilizationFunc: func(last uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
			cursors = append(cursors, last)
			a := answers[call]
			call++
			return a.samples, a.ret
		},
	}
	lib := &streamLib{Interface: samplingLibrary([]*mock.Device{dev})}
	var errw bytes.Buffer
	comm := func(pid uint32) string {
		if pid == 99 {
			return "nvidia-cuda-mps-server"
		}
		return "python"
	}
	s := NewStreamer(lib, &errw, comm)
	l := s.Sample(time.Unix(1, 0))
	g := l.GPUs[0]
	if len(g.Processes) != 3 || !g.ProcessUtil || *g.Util != 70 || *g.EnergyMillijoule != 5000 {
		t.Fatalf("first sample: %+v", g)
	}
	type want struct {
		pid  uint32
		mem  uint64
		util uint32
	}
	for i, w := range []want{{10, 300, 30}, {11, 5, 100}, {12, 0, 0}} {
		p := g.Processes[i]
		if p.PID != w.pid || p.UsedMemoryBytes != w.mem || p.SMUtil == nil || *p.SMUtil != w.util {
			t.Errorf("process %d: %+v (sm %v), want %+v", i, p, p.SMUtil, w)
		}
	}
	g = s.Sample(time.Unix(2, 0)).GPUs[0]
	for _, p := range g.Processes {
		if p.SMUtil == nil || *p.SMUtil != 0 {
			t.Errorf("NOT_FOUND: process %d sm %v, want 0", p.PID, p.SMUtil)
		}
	}
	g = s.Sample(time.Unix(3, 0)).GPUs[0]
	if g.ProcessUtil || g.Processes[0].SMUtil != nil {
		t.Errorf("NOT_SUPPORTED: %+v", g)
	}
	// The cursor: 0, then the newest timestamp seen (200).
	if len(cursors) != 3 || cursors[0] != 0 || cursors[1] != 200 || cursors[2] != 200 {
		t.Errorf("cursors %v", cursors)
	}
}

// streamLib adds the GPM entry points to the sampling mock.
type streamLib struct{ *mock.Interface }

func (l *streamLib) GpmSampleAlloc() (nvml.GpmSample, nvml.Return) {
	return nil, nvml.ERROR_NOT_SUPPORTED
}
func (l *streamLib) GpmMetricsGet(*nvml.GpmMetricsGetType) nvml.Return {
	return nvml.ERROR_NOT_SUPPORTED
}
