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
	return &mock.Device{
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
	want := []string{
		"v1 " + u1 + "=7/0 " + u0 + "=0/1073741824\n",
		"v1 " + u1 + "=7/0 " + u0 + "=50/2147483648\n",
		"v1 " + u1 + "=7/0 " + u0 + "=100/1073741824\n",
		"v1 " + u1 + "=7/0 " + u0 + "=0/2147483648\n",
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
	if want := "v1 " + uuidOf(0) + "=-/5\n"; lines[0] != want || lines[1] != want {
		t.Errorf("lines %q, want %q", lines, want)
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
	want := "v1 " + uuidOf(0) + "=-/- " + uuidOf(1) + "=-/9 GPU-absent=-/-\n"
	for _, l := range lines {
		if l != want {
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
