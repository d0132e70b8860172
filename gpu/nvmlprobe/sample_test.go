package nvmlprobe

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/paddle-entrypoint/paddle-entrypoint/gpu"
)

// samplingDevice returns a mock GPU whose utilisation and used memory cycle
// through the values given. Its other methods panic, so a test fails if the
// sampling mode calls an entry point it must not.
func samplingDevice(i int, utils []uint32, used []uint64) *mock.Device {
	var u, m int
	var energy uint64 = 1000
	return &mock.Device{
		GetMigModeFunc: func() (int, int, nvml.Return) { return 0, 0, nvml.ERROR_NOT_SUPPORTED },
		GetTotalEnergyConsumptionFunc: func() (uint64, nvml.Return) {
			energy += 500
			return energy, nvml.SUCCESS
		},
		GetUUIDFunc: func() (string, nvml.Return) { return uuidOf(i), nvml.SUCCESS },
		GetUtilizationRatesFunc: func() (nvml.Utilization, nvml.Return) {
			v := utils[u%len(utils)]
			u++
			return nvml.Utilization{Gpu: v, Memory: v / 2}, nvml.SUCCESS
		},
		GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) {
			v := used[m%len(used)]
			m++
			return nvml.Memory{Total: 80 << 30, Used: v, Free: 80<<30 - v}, nvml.SUCCESS
		},
	}
}

func uuidOf(i int) string { return fmt.Sprintf("GPU-%08d-0000-4000-8000-000000000000", i) }

// samplingLibrary is a mock NVML with the devices whose LookupSymbol finds
// every symbol but the ones in missing.
func samplingLibrary(devs []*mock.Device, missing ...string) *mock.Interface {
	lib := library(devs)
	lib.ExtensionsFunc = func() nvml.ExtendedInterface {
		return &mock.ExtendedInterface{LookupSymbolFunc: func(s string) error {
			for _, m := range missing {
				if s == m {
					return errors.New("undefined symbol: " + s)
				}
			}
			return nil
		}}
	}
	return lib
}

// stopAfter is stdout for Sample that closes stop after n lines.
type stopAfter struct {
	n     int
	stop  chan struct{}
	lines []string
	times []time.Time
}

func (w *stopAfter) Write(p []byte) (int, error) {
	w.lines = append(w.lines, string(p))
	w.times = append(w.times, time.Now())
	if len(w.lines) == w.n {
		close(w.stop)
	}
	return len(p), nil
}

func sample(t *testing.T, lib SamplingLibrary, uuids []string, n int, interval time.Duration) ([]string, string, error) {
	t.Helper()
	out := &stopAfter{n: n, stop: make(chan struct{})}
	var errw bytes.Buffer
	err := Sample(lib, uuids, interval, out, &errw, out.stop)
	return out.lines, errw.String(), err
}

func TestSample(t *testing.T) {
	devs := []*mock.Device{
		samplingDevice(0, []uint32{0, 50, 100}, []uint64{1 << 30, 2 << 30}),
		samplingDevice(1, []uint32{7}, []uint64{0}),
	}
	lib := samplingLibrary(devs)
	// Device 1 first: the order is the caller's, not NVML's.
	lines, errs, err := sample(t, lib, []string{uuidOf(1), uuidOf(0)}, 4, time.Millisecond)
	if err != nil || errs != "" {
		t.Fatalf("err %v, stderr %q", err, errs)
	}
	u0, u1 := uuidOf(0), uuidOf(1)
	// Each mock GPU's energy counter rises by 500 mJ a reading, from 1500.
	want := []string{
		"v2 " + u1 + "=7/0/1500 " + u0 + "=0/1073741824/1500\n",
		"v2 " + u1 + "=7/0/2000 " + u0 + "=50/2147483648/2000\n",
		"v2 " + u1 + "=7/0/2500 " + u0 + "=100/1073741824/2500\n",
		"v2 " + u1 + "=7/0/3000 " + u0 + "=0/2147483648/3000\n",
	}
	if strings.Join(lines, "") != strings.Join(want, "") {
		t.Errorf("lines:\n%s\nwant:\n%s", strings.Join(lines, ""), strings.Join(want, ""))
	}
	if n := len(lib.InitCalls()); n != 1 {
		t.Errorf("nvmlInit called %d times, want once for the whole run", n)
	}
	if n := len(lib.ShutdownCalls()); n != 1 {
		t.Errorf("nvmlShutdown called %d times, want once", n)
	}
}

func TestSampleFirstLineAtOnce(t *testing.T) {
	lib := samplingLibrary([]*mock.Device{samplingDevice(0, []uint32{1}, []uint64{1})})
	out := &stopAfter{n: 2, stop: make(chan struct{})}
	began := time.Now()
	if err := Sample(lib, []string{uuidOf(0)}, 300*time.Millisecond, out, &bytes.Buffer{}, out.stop); err != nil {
		t.Fatal(err)
	}
	if d := out.times[0].Sub(began); d >= 300*time.Millisecond {
		t.Errorf("first line after %v, want it before the first interval", d)
	}
	if d := out.times[1].Sub(out.times[0]); d < 300*time.Millisecond {
		t.Errorf("second line %v after the first, before the interval", d)
	}
}

func TestSampleWithoutUtilizationSymbol(t *testing.T) {
	dev := samplingDevice(0, []uint32{1}, []uint64{5})
	dev.GetUtilizationRatesFunc = nil // a call would panic
	lib := samplingLibrary([]*mock.Device{dev}, utilizationSymbol)
	lines, errs, err := sample(t, lib, []string{uuidOf(0)}, 2, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if want := "v2 " + uuidOf(0) + "=-/5/1500\n"; lines[0] != want {
		t.Errorf("lines %q, want %q first", lines, want)
	}
	if !strings.Contains(errs, "nvmlDeviceGetUtilizationRates not in the NVIDIA library") {
		t.Errorf("stderr %q", errs)
	}
}

func TestSampleQueryFailures(t *testing.T) {
	dev := samplingDevice(0, []uint32{1}, []uint64{5})
	dev.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{}, nvml.ERROR_GPU_IS_LOST }
	dev.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) { return nvml.Memory{}, nvml.ERROR_NOT_SUPPORTED }
	lib := samplingLibrary([]*mock.Device{dev, samplingDevice(1, []uint32{200}, []uint64{9})})
	lines, errs, err := sample(t, lib, []string{uuidOf(0), uuidOf(1), "GPU-absent"}, 3, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	// A utilisation over 100 (a driver bug) is no reading.
	for i, l := range lines {
		e := 1500 + 500*i
		if want := fmt.Sprintf("v2 %s=-/-/%d %s=-/9/%d GPU-absent=-/-/-\n", uuidOf(0), e, uuidOf(1), e); l != want {
			t.Errorf("line %q, want %q", l, want)
		}
	}
	// Each failure once, not once per sample.
	for _, part := range []string{"GPU-absent: no GPU with this UUID", uuidOf(0) + ": nvmlDeviceGetUtilizationRates", uuidOf(0) + ": nvmlDeviceGetMemoryInfo"} {
		if n := strings.Count(errs, part); n != 1 {
			t.Errorf("%q reported %d times in:\n%s", part, n, errs)
		}
	}
}

func TestSampleFatal(t *testing.T) {
	t.Run("init fails", func(t *testing.T) {
		lib := samplingLibrary(nil)
		lib.InitFunc = func() nvml.Return { return nvml.ERROR_LIB_RM_VERSION_MISMATCH }
		lines, _, err := sample(t, lib, []string{uuidOf(0)}, 1, time.Millisecond)
		var ne *gpu.NVMLError
		if !errors.As(err, &ne) || ne.Call != "nvmlInit_v2" || len(lines) != 0 {
			t.Errorf("err %v, lines %q", err, lines)
		}
		if n := len(lib.ShutdownCalls()) + len(lib.DeviceGetCountCalls()); n != 0 {
			t.Errorf("%d NVML calls after a failed init", n)
		}
	})
	t.Run("no GPU found", func(t *testing.T) {
		lib := samplingLibrary([]*mock.Device{samplingDevice(0, []uint32{1}, []uint64{1})})
		_, errs, err := sample(t, lib, []string{"GPU-x", "GPU-y"}, 1, time.Millisecond)
		if !errors.Is(err, ErrNoGPU) || !strings.Contains(errs, "GPU-y: no GPU") {
			t.Errorf("err %v, stderr %q", err, errs)
		}
		if n := len(lib.ShutdownCalls()); n != 1 {
			t.Errorf("Shutdown called %d times", n)
		}
	})
	t.Run("stdout closed", func(t *testing.T) {
		lib := samplingLibrary([]*mock.Device{samplingDevice(0, []uint32{1}, []uint64{1})})
		err := Sample(lib, []string{uuidOf(0)}, time.Millisecond, failingWriter{}, &bytes.Buffer{}, make(chan struct{}))
		if err == nil {
			t.Error("no error when stdout fails")
		}
	})
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

func TestSampleWithoutEnergySymbol(t *testing.T) {
	dev := samplingDevice(0, []uint32{1}, []uint64{5})
	dev.GetTotalEnergyConsumptionFunc = nil // a call would panic
	lib := samplingLibrary([]*mock.Device{dev}, energySymbol)
	lines, errs, err := sample(t, lib, []string{uuidOf(0)}, 2, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if want := "v2 " + uuidOf(0) + "=1/5/-\n"; lines[0] != want || lines[1] != want {
		t.Errorf("lines %q, want %q", lines, want)
	}
	if !strings.Contains(errs, "nvmlDeviceGetTotalEnergyConsumption not in the NVIDIA library") {
		t.Errorf("stderr %q", errs)
	}
}

func TestSampleEnergyUnsupported(t *testing.T) {
	dev := samplingDevice(0, []uint32{1}, []uint64{5})
	dev.GetTotalEnergyConsumptionFunc = func() (uint64, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
	lines, errs, err := sample(t, samplingLibrary([]*mock.Device{dev}), []string{uuidOf(0)}, 3, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lines {
		if want := "v2 " + uuidOf(0) + "=1/5/-\n"; l != want {
			t.Errorf("line %q, want %q", l, want)
		}
	}
	if n := strings.Count(errs, ": nvmlDeviceGetTotalEnergyConsumption: "); n != 1 {
		t.Errorf("reported %d times: %q", n, errs)
	}
}

// migParent is a mock GPU with MIG mode on and the MIG devices given; its
// energy counter rises by 1000 mJ a reading, from 5000.
func migParent(i int, migs ...*mock.Device) *mock.Device {
	p := samplingDevice(i, []uint32{0}, []uint64{0})
	var energy uint64 = 4000
	p.GetTotalEnergyConsumptionFunc = func() (uint64, nvml.Return) {
		energy += 1000
		return energy, nvml.SUCCESS
	}
	p.GetMigModeFunc = func() (int, int, nvml.Return) { return nvml.DEVICE_MIG_ENABLE, nvml.DEVICE_MIG_ENABLE, nvml.SUCCESS }
	p.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return 7, nvml.SUCCESS }
	p.GetMigDeviceHandleByIndexFunc = func(j int) (nvml.Device, nvml.Return) {
		if j < len(migs) && migs[j] != nil {
			return migs[j], nvml.SUCCESS
		}
		return nil, nvml.ERROR_NOT_FOUND
	}
	return p
}

// migDevice is a mock MIG device: utilisation NOT_SUPPORTED, as NVML
// answers on MIG devices; no energy or memory query may be made of it.
func migDevice(uuid string) *mock.Device {
	return &mock.Device{
		GetUUIDFunc: func() (string, nvml.Return) { return uuid, nvml.SUCCESS },
		GetUtilizationRatesFunc: func() (nvml.Utilization, nvml.Return) {
			return nvml.Utilization{}, nvml.ERROR_NOT_SUPPORTED
		},
	}
}

func TestSampleMIG(t *testing.T) {
	const a, b = "MIG-aaaaaaaa-0000-4000-8000-000000000001", "MIG-bbbbbbbb-0000-4000-8000-000000000002"
	lib := samplingLibrary([]*mock.Device{migParent(0, migDevice(a), nil, migDevice(b)), samplingDevice(1, []uint32{30}, []uint64{9})})
	// b, then a MIG UUID no longer there (re-partitioned since the probe),
	// then a whole GPU: the instance's values are its parent's energy only.
	// a again: its parent's counter is read once a line, whatever the
	// number of its MIG devices.
	lines, errs, err := sample(t, lib, []string{b, "MIG-gone", uuidOf(1), a}, 2, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"v2 " + b + "=-/-/5000 MIG-gone=-/-/- " + uuidOf(1) + "=30/9/1500 " + a + "=-/-/5000\n",
		"v2 " + b + "=-/-/6000 MIG-gone=-/-/- " + uuidOf(1) + "=30/9/2000 " + a + "=-/-/6000\n",
	}
	if strings.Join(lines, "") != strings.Join(want, "") {
		t.Errorf("lines:\n%s\nwant:\n%s", strings.Join(lines, ""), strings.Join(want, ""))
	}
	// NOT_SUPPORTED utilisation on a MIG device is no failure to report.
	if strings.Contains(errs, "Utilization") || !strings.Contains(errs, "MIG-gone: no GPU with this UUID") {
		t.Errorf("stderr %q", errs)
	}
}

func TestSampleMIGWithoutMIGSymbols(t *testing.T) {
	const a = "MIG-aaaaaaaa-0000-4000-8000-000000000001"
	parent := migParent(0, migDevice(a))
	parent.GetMigModeFunc = nil // a call would panic
	lib := samplingLibrary([]*mock.Device{parent}, "nvmlDeviceGetMigMode")
	lines, errs, err := sample(t, lib, []string{a, uuidOf(0)}, 1, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if want := "v2 " + a + "=-/-/- " + uuidOf(0) + "=0/0/5000\n"; lines[0] != want {
		t.Errorf("line %q, want %q", lines[0], want)
	}
	if !strings.Contains(errs, "MIG devices are not sampled") {
		t.Errorf("stderr %q", errs)
	}
}
