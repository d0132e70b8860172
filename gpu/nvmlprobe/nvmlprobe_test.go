package nvmlprobe

import (
	"fmt"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/paddle-entrypoint/paddle-entrypoint/gpu"
)

// device returns a mock GPU that answers only the queries the probe may
// make of a GPU without MIG: any other method of the mock panics, so a test
// fails if the probe calls an entry point an older driver might lack.
func device(i int, uuidRet nvml.Return) *mock.Device {
	return &mock.Device{
		GetMigModeFunc: func() (int, int, nvml.Return) { return 0, 0, nvml.ERROR_NOT_SUPPORTED },
		GetNameFunc:    func() (string, nvml.Return) { return "NVIDIA H100 80GB HBM3", nvml.SUCCESS },
		GetUUIDFunc: func() (string, nvml.Return) {
			if uuidRet != nvml.SUCCESS {
				return "", uuidRet
			}
			return fmt.Sprintf("GPU-%08d-0000-4000-8000-000000000000", i), nvml.SUCCESS
		},
		GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) { return nvml.Memory{Total: 80 << 30}, nvml.SUCCESS },
	}
}

// library returns a mock NVML with the devices, whose LookupSymbol finds
// every symbol; tests replace its funcs to inject failures.
func library(devs []*mock.Device) *mock.Interface {
	return &mock.Interface{
		ExtensionsFunc: func() nvml.ExtendedInterface {
			return &mock.ExtendedInterface{LookupSymbolFunc: func(string) error { return nil }}
		},
		InitFunc:                   func() nvml.Return { return nvml.SUCCESS },
		ShutdownFunc:               func() nvml.Return { return nvml.SUCCESS },
		SystemGetDriverVersionFunc: func() (string, nvml.Return) { return "550.54.15", nvml.SUCCESS },
		DeviceGetCountFunc:         func() (int, nvml.Return) { return len(devs), nvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(i int) (nvml.Device, nvml.Return) {
			if i < 0 || i >= len(devs) {
				return nil, nvml.ERROR_INVALID_ARGUMENT
			}
			return devs[i], nvml.SUCCESS
		},
	}
}

func TestCollect(t *testing.T) {
	lib := library([]*mock.Device{device(0, nvml.SUCCESS), device(1, nvml.SUCCESS)})
	r := Collect(lib)
	if r.Error != nil || len(r.Problems) != 0 {
		t.Fatalf("error %v, problems %v", r.Error, r.Problems)
	}
	want := []gpu.Device{
		{Index: 0, UUID: "GPU-00000000-0000-4000-8000-000000000000", Name: "NVIDIA H100 80GB HBM3", MemoryTotalBytes: 80 << 30},
		{Index: 1, UUID: "GPU-00000001-0000-4000-8000-000000000000", Name: "NVIDIA H100 80GB HBM3", MemoryTotalBytes: 80 << 30},
	}
	if fmt.Sprint(r.Devices) != fmt.Sprint(want) || r.DriverVersion != "550.54.15" {
		t.Errorf("report = %+v, want devices %+v", r, want)
	}
	if n := len(lib.ShutdownCalls()); n != 1 {
		t.Errorf("Shutdown called %d times, want once", n)
	}
}

func TestCollectInitFails(t *testing.T) {
	for _, ret := range []nvml.Return{nvml.ERROR_LIBRARY_NOT_FOUND, nvml.ERROR_DRIVER_NOT_LOADED, nvml.ERROR_LIB_RM_VERSION_MISMATCH, nvml.ERROR_NO_PERMISSION} {
		t.Run(fmt.Sprint(int(ret)), func(t *testing.T) {
			lib := library(nil)
			lib.InitFunc = func() nvml.Return { return ret }
			r := Collect(lib)
			if r.Error == nil || r.Error.Call != "nvmlInit_v2" || r.Error.Code != int(ret) || r.Error.Message == "" {
				t.Errorf("error = %+v, want nvmlInit_v2 with code %d", r.Error, int(ret))
			}
			// Nothing may be called after a failed init: on a real driver it
			// crashes or returns garbage.
			if n := len(lib.DeviceGetCountCalls()) + len(lib.SystemGetDriverVersionCalls()) + len(lib.ShutdownCalls()); n != 0 {
				t.Errorf("%d NVML calls after a failed init", n)
			}
			if len(r.Devices) != 0 {
				t.Errorf("devices %+v after a failed init", r.Devices)
			}
		})
	}
}

func TestCollectCountFails(t *testing.T) {
	lib := library(nil)
	lib.DeviceGetCountFunc = func() (int, nvml.Return) { return 0, nvml.ERROR_UNKNOWN }
	r := Collect(lib)
	if r.Error == nil || r.Error.Call != "nvmlDeviceGetCount_v2" || r.Error.Code != int(nvml.ERROR_UNKNOWN) {
		t.Errorf("error = %+v", r.Error)
	}
	if r.DriverVersion != "550.54.15" {
		t.Errorf("driver version %q lost", r.DriverVersion)
	}
	if n := len(lib.ShutdownCalls()); n != 1 {
		t.Errorf("Shutdown called %d times after a successful init, want once", n)
	}
}

func TestCollectPartialFailures(t *testing.T) {
	lib := library([]*mock.Device{device(0, nvml.SUCCESS), device(1, nvml.ERROR_GPU_IS_LOST), nil})
	lib.SystemGetDriverVersionFunc = func() (string, nvml.Return) { return "", nvml.ERROR_NOT_SUPPORTED }
	inner := lib.DeviceGetHandleByIndexFunc
	lib.DeviceGetHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		if i == 2 {
			return nil, nvml.ERROR_GPU_IS_LOST
		}
		return inner(i)
	}
	r := Collect(lib)
	if r.Error != nil {
		t.Fatalf("error %v: a lost GPU must not lose the others", r.Error)
	}
	if len(r.Devices) != 3 || r.Devices[0].UUID == "" || r.Devices[1].UUID != "" || r.Devices[1].Name == "" || r.Devices[2].Index != 2 {
		t.Errorf("devices = %+v, want all three listed with what could be read", r.Devices)
	}
	problems := strings.Join(r.Problems, "\n")
	for _, want := range []string{"nvmlSystemGetDriverVersion", "GPU 1: nvmlDeviceGetUUID", "GPU 2: nvmlDeviceGetHandleByIndex_v2"} {
		if !strings.Contains(problems, want) {
			t.Errorf("problems lack %q:\n%s", want, problems)
		}
	}
}

func TestCollectEightGPUs(t *testing.T) {
	devs := make([]*mock.Device, 8)
	for i := range devs {
		devs[i] = device(i, nvml.SUCCESS)
	}
	r := Collect(library(devs))
	if r.Error != nil || len(r.Devices) != 8 {
		t.Fatalf("report = %+v", r)
	}
	seen := map[string]bool{}
	for i, d := range r.Devices {
		if d.Index != i || !strings.HasPrefix(d.UUID, "GPU-") || seen[d.UUID] {
			t.Errorf("device %d = %+v", i, d)
		}
		seen[d.UUID] = true
	}
}

// migInstance is a mock MIG device answering the probe's MIG queries.
func migInstance(uuid string, gi, ci int, slices uint32, memMB uint64) *mock.Device {
	return &mock.Device{
		GetUUIDFunc:              func() (string, nvml.Return) { return uuid, nvml.SUCCESS },
		GetGpuInstanceIdFunc:     func() (int, nvml.Return) { return gi, nvml.SUCCESS },
		GetComputeInstanceIdFunc: func() (int, nvml.Return) { return ci, nvml.SUCCESS },
		GetAttributesFunc: func() (nvml.DeviceAttributes, nvml.Return) {
			return nvml.DeviceAttributes{GpuInstanceSliceCount: slices, ComputeInstanceSliceCount: slices, MemorySizeMB: memMB}, nvml.SUCCESS
		},
		GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) { return nvml.Memory{Total: memMB << 20}, nvml.SUCCESS },
	}
}

// migGPU is device i with MIG mode on and the MIG devices at the given
// indices (nil: no MIG device there).
func migGPU(i int, migs ...*mock.Device) *mock.Device {
	d := device(i, nvml.SUCCESS)
	d.GetMigModeFunc = func() (int, int, nvml.Return) { return nvml.DEVICE_MIG_ENABLE, nvml.DEVICE_MIG_ENABLE, nvml.SUCCESS }
	d.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return 7, nvml.SUCCESS }
	d.GetMigDeviceHandleByIndexFunc = func(j int) (nvml.Device, nvml.Return) {
		if j < len(migs) && migs[j] != nil {
			return migs[j], nvml.SUCCESS
		}
		return nil, nvml.ERROR_NOT_FOUND
	}
	return d
}

func TestCollectMIG(t *testing.T) {
	lib := library([]*mock.Device{
		migGPU(0, migInstance("MIG-a", 7, 0, 1, 17920), nil, migInstance("MIG-b", 2, 0, 3, 72192)),
		device(1, nvml.SUCCESS),
	})
	r := Collect(lib)
	if r.Error != nil || len(r.Problems) != 0 {
		t.Fatalf("error %v, problems %v", r.Error, r.Problems)
	}
	if len(r.Devices) != 2 || fmt.Sprint(r.MIGEnabled) != "[0]" {
		t.Fatalf("devices %+v, MIG enabled %v", r.Devices, r.MIGEnabled)
	}
	parent := r.Devices[0]
	want := []gpu.Device{parent, parent}
	want[0].MemoryTotalBytes, want[0].MIG = 17920<<20, &gpu.MIG{UUID: "MIG-a", GPUInstanceID: 7, Profile: "1g.18gb", Slices: 1, TotalSlices: 7}
	want[1].MemoryTotalBytes, want[1].MIG = 72192<<20, &gpu.MIG{UUID: "MIG-b", GPUInstanceID: 2, Profile: "3g.71gb", Slices: 3, TotalSlices: 7}
	if len(r.MIGDevices) != 2 {
		t.Fatalf("MIG devices %+v", r.MIGDevices)
	}
	for i := range want {
		got := r.MIGDevices[i]
		if got.Index != want[i].Index || got.UUID != want[i].UUID || got.Name != want[i].Name ||
			got.MemoryTotalBytes != want[i].MemoryTotalBytes || *got.MIG != *want[i].MIG {
			t.Errorf("MIG device %d = %+v %+v, want %+v %+v", i, got, got.MIG, want[i], want[i].MIG)
		}
	}
}

func TestCollectMIGFailures(t *testing.T) {
	broken := migInstance("MIG-x", 1, 0, 1, 9728)
	broken.GetUUIDFunc = func() (string, nvml.Return) { return "", nvml.ERROR_UNKNOWN }
	noAttrs := migInstance("MIG-y", 3, 1, 2, 19968)
	noAttrs.GetAttributesFunc = func() (nvml.DeviceAttributes, nvml.Return) { return nvml.DeviceAttributes{}, nvml.ERROR_NOT_SUPPORTED }
	modeFails := device(1, nvml.SUCCESS)
	modeFails.GetMigModeFunc = func() (int, int, nvml.Return) { return 0, 0, nvml.ERROR_GPU_IS_LOST }
	lib := library([]*mock.Device{migGPU(0, broken, noAttrs), modeFails})
	r := Collect(lib)
	if len(r.Devices) != 2 || len(r.MIGDevices) != 1 || r.MIGDevices[0].MIG.UUID != "MIG-y" ||
		r.MIGDevices[0].MIG.Slices != 0 || r.MIGDevices[0].MIG.ComputeInstanceID != 1 {
		t.Errorf("report %+v, MIG %+v", r, r.MIGDevices)
	}
	problems := strings.Join(r.Problems, "\n")
	for _, want := range []string{"GPU 0: MIG device 0: nvmlDeviceGetUUID", "GPU 0: MIG device 1: nvmlDeviceGetAttributes_v2", "GPU 1: nvmlDeviceGetMigMode"} {
		if !strings.Contains(problems, want) {
			t.Errorf("problems lack %q:\n%s", want, problems)
		}
	}
}

func TestCollectWithoutMIGSymbols(t *testing.T) {
	// A driver without nvmlDeviceGetMigMode (older than MIG): nothing is
	// asked and nothing said; without a later MIG entry point: a problem.
	for _, tt := range []struct{ missing, problem string }{
		{"nvmlDeviceGetMigMode", ""},
		{"nvmlDeviceGetComputeInstanceId", "nvmlDeviceGetComputeInstanceId not in the NVIDIA library"},
	} {
		d := device(0, nvml.SUCCESS)
		d.GetMigModeFunc = nil // a call would panic
		lib := library([]*mock.Device{d})
		lib.ExtensionsFunc = func() nvml.ExtendedInterface {
			return &mock.ExtendedInterface{LookupSymbolFunc: func(s string) error {
				if s == tt.missing {
					return fmt.Errorf("undefined symbol: %s", s)
				}
				return nil
			}}
		}
		r := Collect(lib)
		if len(r.Devices) != 1 || len(r.MIGDevices) != 0 || strings.Join(r.Problems, "") != tt.problem && !strings.Contains(strings.Join(r.Problems, ""), tt.problem) {
			t.Errorf("%s missing: report %+v", tt.missing, r)
		}
		if tt.problem == "" && len(r.Problems) != 0 {
			t.Errorf("%s missing: problems %v", tt.missing, r.Problems)
		}
	}
}
