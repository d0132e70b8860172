package entrypoint

// Black-box tests of MIG instances, shared GPUs and energy (section 12 of
// the contract): the built entrypoint and probe against the fake
// libnvidia-ml.so.1, whose FAKE_NVML_MIG_<I> partitions GPU I and whose
// FAKE_NVML_ENERGY* drive the energy counter (testdata/fakenvml).

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// h200MIG partitions a GPU as an H200 is often cut: two 1g.18gb and one
// 3g.71gb instances (GPU instance ids 7, 8 and 2; memorySizeMB as NVML
// reports them: 17.5 GiB and 70.5 GiB).
const h200MIG = "7:0:1:17920,8:0:1:17920,2:0:3:72192"

// migUUID is the MIG UUID the fake gives GPU parent's MIG device with
// GPU instance gi and compute instance ci.
func migUUID(parent, gi, ci int) string {
	return fmt.Sprintf("MIG-a1b2c3%02x-%02x%02x-4b1c-9d2e-0f1a2b3c4d%02x", parent, gi, ci, parent)
}

// migEntry is a gpus entry of a MIG instance of GPU 0 (an H200, as
// FAKE_NVML_NAME says), exactly as the registration spells it.
func migEntry(gi, slices int, memMB uint64, profile string) string {
	return fmt.Sprintf(`{"index":0,"uuid":%q,"name":"NVIDIA H200","memory_total_bytes":%d,"share":%v,`+
		`"mig":{"uuid":%q,"gpu_instance_id":%d,"compute_instance_id":0,"profile":%q,"slices":%d,"total_slices":7}}`,
		fakeUUID(0), memMB<<20, float64(slices)/7, migUUID(0, gi, 0), gi, profile, slices)
}

// wholeEntry is a gpus entry of the whole GPU i.
func wholeEntry(i int, share float64) string {
	return fmt.Sprintf(`{"index":%d,"uuid":%q,"name":"NVIDIA H200","memory_total_bytes":85899345920,"share":%v}`, i, fakeUUID(i), share)
}

// registrationOf runs k against a monitor and returns its registration's
// gpu_count and gpus, each entry as compact JSON.
func registrationOf(t *testing.T, k *task) (result, int, []string) {
	t.Helper()
	m := newSupMonitor(t)
	k.Setenv("PADDLE_MONITOR_URL", m.URL)
	r := k.Run()
	if r.Code != 0 {
		t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
	}
	var body struct {
		GPUCount int               `json:"gpu_count"`
		GPUs     []json.RawMessage `json:"gpus"`
	}
	if err := json.Unmarshal(m.waitFor(t, "/v1/task/register", 1)[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	var gpus []string
	for _, g := range body.GPUs {
		gpus = append(gpus, string(g))
	}
	return r, body.GPUCount, gpus
}

func TestGPUMIGRegistration(t *testing.T) {
	a, b, c := migEntry(7, 1, 17920, "1g.18gb"), migEntry(8, 1, 17920, "1g.18gb"), migEntry(2, 3, 72192, "3g.71gb")
	tests := []struct {
		name string
		env  []string
		want []string // gpus entries
		keys []string // the labels file's gpu_uuids
	}{
		{"every MIG device and the whole GPU beside", nil,
			[]string{a, b, c, wholeEntry(1, 1)}, []string{migUUID(0, 7, 0), migUUID(0, 8, 0), migUUID(0, 2, 0), fakeUUID(1)}},
		{"CUDA_VISIBLE_DEVICES names one", []string{"CUDA_VISIBLE_DEVICES=" + migUUID(0, 2, 0)},
			[]string{c}, []string{migUUID(0, 2, 0)}},
		{"CUDA_VISIBLE_DEVICES names two, in its order", []string{"CUDA_VISIBLE_DEVICES=" + migUUID(0, 8, 0) + "," + migUUID(0, 7, 0)},
			[]string{b, a}, []string{migUUID(0, 8, 0), migUUID(0, 7, 0)}},
		{"NVIDIA_VISIBLE_DEVICES names them", []string{"NVIDIA_VISIBLE_DEVICES=" + migUUID(0, 7, 0) + "," + migUUID(0, 2, 0)},
			[]string{a, c, wholeEntry(1, 1)}, []string{migUUID(0, 7, 0), migUUID(0, 2, 0), fakeUUID(1)}},
		{"CUDA_VISIBLE_DEVICES wins over NVIDIA_VISIBLE_DEVICES",
			[]string{"CUDA_VISIBLE_DEVICES=" + migUUID(0, 8, 0), "NVIDIA_VISIBLE_DEVICES=" + migUUID(0, 7, 0)},
			[]string{b}, []string{migUUID(0, 8, 0)}},
		{"the parent's index counts its MIG devices", []string{"CUDA_VISIBLE_DEVICES=0"},
			[]string{a, b, c}, []string{migUUID(0, 7, 0), migUUID(0, 8, 0), migUUID(0, 2, 0)}},
		{"PADDLE_GPU_SHARE is ignored by MIG entries", []string{"CUDA_VISIBLE_DEVICES=1," + migUUID(0, 7, 0), "PADDLE_GPU_SHARE=0.5"},
			[]string{wholeEntry(1, 0.5), a}, []string{fakeUUID(1), migUUID(0, 7, 0)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := gpuTask(t, 2, "/bin/true")
			k.Setenv("FAKE_NVML_NAME", "NVIDIA H200")
			k.Setenv("FAKE_NVML_MIG_0", h200MIG)
			for _, e := range tt.env {
				key, value, _ := strings.Cut(e, "=")
				k.Setenv(key, value)
			}
			r, count, gpus := registrationOf(t, k)
			if count != len(tt.want) || !slices.Equal(gpus, tt.want) {
				t.Errorf("gpu_count %d, gpus\n%s\nwant\n%s", count, strings.Join(gpus, "\n"), strings.Join(tt.want, "\n"))
			}
			checkGPULabels(t, k, r, tt.keys...)
			if logLine(r.Stderr, "WARN") != "" {
				t.Errorf("a warning:\n%s", r.Stderr)
			}
		})
	}
}

func TestGPUMIGVisibleFaults(t *testing.T) {
	tests := []struct {
		name string
		env  []string
		keys []string
		warn []string // parts of the warning
	}{
		// Like CUDA: the first entry that names nothing stops the list.
		{"an unknown MIG UUID", []string{"CUDA_VISIBLE_DEVICES=" + migUUID(0, 7, 0) + ",MIG-ffffffff," + migUUID(0, 8, 0)},
			[]string{migUUID(0, 7, 0)}, []string{"CUDA_VISIBLE_DEVICES", "MIG-ffffffff", "no MIG device"}},
		{"a MIG UUID with no GPU in MIG mode", []string{"FAKE_NVML_MIG_0=off", "CUDA_VISIBLE_DEVICES=" + migUUID(0, 7, 0)},
			nil, []string{"CUDA_VISIBLE_DEVICES", "no GPU has MIG mode on"}},
		{"NVIDIA_VISIBLE_DEVICES names an instance that is not there",
			[]string{"NVIDIA_VISIBLE_DEVICES=" + migUUID(0, 9, 0) + "," + migUUID(0, 2, 0)},
			[]string{migUUID(0, 2, 0), fakeUUID(1)}, []string{"NVIDIA_VISIBLE_DEVICES", migUUID(0, 9, 0)}},
		// MIG mode on, no instance made yet: CUDA sees no device there.
		{"MIG mode on without instances", []string{"FAKE_NVML_MIG_0=none"}, []string{fakeUUID(1)}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := gpuTask(t, 2, "/bin/true")
			k.Setenv("FAKE_NVML_MIG_0", h200MIG)
			for _, e := range tt.env {
				key, value, _ := strings.Cut(e, "=")
				k.Setenv(key, value)
			}
			r := k.Run()
			checkGPULabels(t, k, r, tt.keys...)
			if tt.warn == nil && logLine(r.Stderr, "WARN") != "" {
				t.Errorf("a warning:\n%s", r.Stderr)
			}
			if tt.warn != nil && logLine(r.Stderr, "WARN", tt.warn...) == "" {
				t.Errorf("no warning with %q:\n%s", tt.warn, r.Stderr)
			}
		})
	}
}

func TestGPUMIGProbeCalls(t *testing.T) {
	// The probe's MIG calls are the looked-up entry points, after init and
	// before shutdown; nvmlDeviceGetUtilizationRates and the energy counter
	// are the sampler's, never the probe's.
	k := gpuTask(t, 2, "/bin/true")
	k.Setenv("FAKE_NVML_MIG_0", h200MIG)
	k.Setenv("FAKE_NVML_MIG_1", "off")
	calls := filepath.Join(k.Dir, "calls")
	k.Setenv("FAKE_NVML_LOG", calls)
	r := k.Run()
	checkGPULabels(t, k, r, migUUID(0, 7, 0), migUUID(0, 8, 0), migUUID(0, 2, 0), fakeUUID(1))
	b, _ := os.ReadFile(calls)
	list := strings.Fields(string(b))
	allowed := []string{"nvmlInit_v2", "nvmlShutdown", "nvmlErrorString", "nvmlDeviceGetCount_v2",
		"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetName", "nvmlDeviceGetUUID", "nvmlDeviceGetMemoryInfo",
		"nvmlSystemGetDriverVersion", "nvmlDeviceGetMigMode", "nvmlDeviceGetMaxMigDeviceCount",
		"nvmlDeviceGetMigDeviceHandleByIndex", "nvmlDeviceGetGpuInstanceId", "nvmlDeviceGetComputeInstanceId",
		"nvmlDeviceGetAttributes_v2"}
	for _, c := range list {
		if !slices.Contains(allowed, c) {
			t.Errorf("unexpected NVML call %s", c)
		}
	}
	if len(list) < 2 || list[0] != "nvmlInit_v2" || list[len(list)-1] != "nvmlShutdown" {
		t.Errorf("calls %v", list)
	}
	// GPU 1 (MIG mode off) is asked its mode only.
	if n := strings.Count(string(b), "nvmlDeviceGetMaxMigDeviceCount"); n != 1 {
		t.Errorf("nvmlDeviceGetMaxMigDeviceCount called %d times, want once (GPU 0)", n)
	}
}

// fakeNVMLVariants builds testdata/fakenvml with compile-time flags, once
// per set of flags.
var fakeNVMLVariants struct {
	sync.Mutex
	dirs map[string]string
}

func fakeNVMLVariantDir(t *testing.T, flags ...string) string {
	t.Helper()
	fakeNVMLVariants.Lock()
	defer fakeNVMLVariants.Unlock()
	key := strings.Join(flags, " ")
	if d, ok := fakeNVMLVariants.dirs[key]; ok {
		return d
	}
	dir := filepath.Join(bin.dir, "fakenvml"+strings.ReplaceAll(strings.ToLower(key), " ", ""))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"-O2", "-Wall", "-shared", "-fPIC"}, flags...)
	args = append(args, "-o", filepath.Join(dir, "libnvidia-ml.so.1"), "testdata/fakenvml/fakenvml.c")
	if out, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
		t.Fatalf("building the fake NVML with %s: %v\n%s", key, err, out)
	}
	if fakeNVMLVariants.dirs == nil {
		fakeNVMLVariants.dirs = map[string]string{}
	}
	fakeNVMLVariants.dirs[key] = dir
	return dir
}

func TestGPUMIGOlderDriver(t *testing.T) {
	// A driver without the MIG entry points: the probe looks them up, does
	// not call them, and counts whole GPUs.
	k := gpuTask(t, 2, "/bin/true")
	k.Setenv("LD_LIBRARY_PATH", fakeNVMLVariantDir(t, "-DFAKE_NVML_NO_MIG"))
	k.Setenv("FAKE_NVML_MIG_0", h200MIG)
	r := k.Run()
	checkGPULabels(t, k, r, fakeUUID(0), fakeUUID(1))
	if logLine(r.Stderr, "WARN") != "" {
		t.Errorf("a warning for a driver older than MIG:\n%s", r.Stderr)
	}
}

func TestGPUShareRegistration(t *testing.T) {
	t.Run("PADDLE_GPU_SHARE", func(t *testing.T) {
		k := gpuTask(t, 2, "/bin/true")
		k.Setenv("FAKE_NVML_NAME", "NVIDIA H200")
		k.Setenv("PADDLE_GPU_SHARE", "0.25")
		_, count, gpus := registrationOf(t, k)
		if want := []string{wholeEntry(0, 0.25), wholeEntry(1, 0.25)}; count != 2 || !slices.Equal(gpus, want) {
			t.Errorf("gpus %s, want %s", gpus, want)
		}
	})
	t.Run("default", func(t *testing.T) {
		k := gpuTask(t, 1, "/bin/true")
		k.Setenv("FAKE_NVML_NAME", "NVIDIA H200")
		_, _, gpus := registrationOf(t, k)
		if want := []string{wholeEntry(0, 1)}; !slices.Equal(gpus, want) {
			t.Errorf("gpus %s, want %s", gpus, want)
		}
	})
	// Below 0.01 too: the monitor refuses a whole GPU's share under it.
	for _, bad := range []string{"0", "0.001", "1.5", "-0.5", "a quarter", "25%", "NaN"} {
		t.Run("bad "+bad, func(t *testing.T) {
			k := gpuTask(t, 1, "/bin/true")
			k.Setenv("FAKE_NVML_NAME", "NVIDIA H200")
			k.Setenv("PADDLE_GPU_SHARE", bad)
			r, _, gpus := registrationOf(t, k)
			if want := []string{wholeEntry(0, 1)}; !slices.Equal(gpus, want) {
				t.Errorf("gpus %s, want %s", gpus, want)
			}
			if logLine(r.Stderr, "WARN", "PADDLE_GPU_SHARE", "is not a decimal number from 0.01 to 1") == "" {
				t.Errorf("no warning naming PADDLE_GPU_SHARE and its rule:\n%s", r.Stderr)
			}
		})
	}
	t.Run("device nodes", func(t *testing.T) {
		// No library: the two device nodes are counted, each at the share.
		k := gpuTask(t, -1, "/bin/true")
		addDeviceNodes(t, k, 0, 1)
		k.Setenv("PADDLE_GPU_SHARE", "0.5")
		_, count, gpus := registrationOf(t, k)
		want := []string{`{"index":0,"uuid":"","name":"","memory_total_bytes":0,"share":0.5}`, `{"index":1,"uuid":"","name":"","memory_total_bytes":0,"share":0.5}`}
		if count != 2 || !slices.Equal(gpus, want) {
			t.Errorf("gpu_count %d, gpus %s, want %s", count, gpus, want)
		}
	})
}

// completionGPU is a completion's gpus entry.
type completionGPU struct {
	UUID            string   `json:"uuid"`
	MIGUUID         *string  `json:"mig_uuid"`
	Share           float64  `json:"share"`
	Samples         int      `json:"samples"`
	UtilMean        *float64 `json:"util_mean"`
	MemoryPeak      *uint64  `json:"memory_used_peak_bytes"`
	EnergyJoules    *float64 `json:"energy_joules"`
	EnergyEstimated *bool    `json:"energy_estimated"`
}

type completionBody struct {
	GPUCount        int             `json:"gpu_count"`
	GPUSeconds      float64         `json:"gpu_seconds"`
	DurationSeconds float64         `json:"duration_seconds"`
	GPUs            []completionGPU `json:"gpus"`
}

// supervisedGPUs runs k supervised, sampling every 100ms, and returns its
// completion.
func supervisedGPUs(t *testing.T, k *task) completionBody {
	t.Helper()
	m := newSupMonitor(t)
	k.Setenv("PADDLE_ENTRYPOINT_MODE", "supervise")
	k.Setenv("PADDLE_MONITOR_URL", m.URL)
	k.Setenv("PADDLE_GPU_SAMPLE", "100ms")
	if r := k.Run(); r.Code != 0 {
		t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
	}
	raw := m.waitFor(t, "/v1/task/complete", 1)[0].Body
	var c completionBody
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	t.Logf("completion %s", raw)
	return c
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-6*math.Max(1, math.Abs(b)) }

func TestSuperviseMIGCompletion(t *testing.T) {
	// Two MIG instances of GPU 0 and the whole GPU 1. The fake's energy
	// counters rise 100 J a reading; the sampler reads every GPU's once a
	// line, so GPU 1's samples count the lines: each MIG entry's energy is
	// GPU 0's rise, 100 J × (lines − 1), times its share, estimated.
	k := gpuTask(t, 2, "/bin/sh", "-c", "sleep 1.2")
	k.Setenv("FAKE_NVML_MIG_0", h200MIG)
	k.Setenv("CUDA_VISIBLE_DEVICES", migUUID(0, 7, 0)+","+migUUID(0, 2, 0)+",1")
	k.Setenv("FAKE_NVML_UTIL", "40")
	c := supervisedGPUs(t, k)
	if c.GPUCount != 3 || len(c.GPUs) != 3 {
		t.Fatalf("gpu_count %d, %d gpus", c.GPUCount, len(c.GPUs))
	}
	if want := (1.0/7 + 3.0/7 + 1) * c.DurationSeconds; !near(c.GPUSeconds, want) {
		t.Errorf("gpu_seconds %v, want Σ share × duration = %v", c.GPUSeconds, want)
	}
	whole := c.GPUs[2]
	lines := whole.Samples
	if whole.UUID != fakeUUID(1) || whole.MIGUUID != nil || whole.Share != 1 || lines < 3 ||
		whole.UtilMean == nil || *whole.UtilMean != 40 || whole.EnergyJoules == nil ||
		!near(*whole.EnergyJoules, 100*float64(lines-1)) || whole.EnergyEstimated == nil || *whole.EnergyEstimated {
		t.Errorf("whole GPU entry %+v", whole)
	}
	for i, want := range []struct {
		mig   string
		share float64
	}{{migUUID(0, 7, 0), 1.0 / 7}, {migUUID(0, 2, 0), 3.0 / 7}} {
		g := c.GPUs[i]
		if g.UUID != fakeUUID(0) || g.MIGUUID == nil || *g.MIGUUID != want.mig || !near(g.Share, want.share) {
			t.Errorf("gpus[%d] = %+v, want parent %s, MIG %s, share %v", i, g, fakeUUID(0), want.mig, want.share)
		}
		// No utilisation on MIG: samples 0, null fields, never an error.
		if g.Samples != 0 || g.UtilMean != nil || g.MemoryPeak != nil {
			t.Errorf("gpus[%d]: samples %d, util %v, memory %v; want none", i, g.Samples, g.UtilMean, g.MemoryPeak)
		}
		if g.EnergyJoules == nil || !near(*g.EnergyJoules, 100*float64(lines-1)*want.share) || g.EnergyEstimated == nil || !*g.EnergyEstimated {
			t.Errorf("gpus[%d]: energy %v estimated %v, want 100 J × %d × %v, estimated", i, g.EnergyJoules, g.EnergyEstimated, lines-1, want.share)
		}
	}
}

func TestSuperviseMIGRepartitioned(t *testing.T) {
	// The probe sees instances 7 and 8; before the sampler starts, 8 is
	// destroyed and 9 made (the file FAKE_NVML_MIG_0 points to is
	// rewritten by a wrapper around the probe's sampling mode). Instance 8
	// has no sample and no energy, 9 is not the task's; nothing fails.
	k := gpuTask(t, 1, "/bin/sh", "-c", "sleep 1.2")
	layout := filepath.Join(k.Dir, "mig-layout")
	if err := os.WriteFile(layout, []byte("7:0:1:17920,8:0:1:17920\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	wrapper := filepath.Join(k.Dir, "probe-wrapper")
	script := fmt.Sprintf("#!/bin/sh\nif [ \"$1\" = sample ]; then echo 7:0:1:17920,9:0:1:17920 > %q; fi\nexec %q \"$@\"\n", layout, bin.probe)
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	k.Setenv("PADDLE_ENTRYPOINT_GPU_PROBE", wrapper)
	k.Setenv("FAKE_NVML_MIG_0", "@"+layout)
	c := supervisedGPUs(t, k)
	if c.GPUCount != 2 || len(c.GPUs) != 2 || *c.GPUs[0].MIGUUID != migUUID(0, 7, 0) || *c.GPUs[1].MIGUUID != migUUID(0, 8, 0) {
		t.Fatalf("completion %+v, want the probe's instances 7 and 8", c)
	}
	if g := c.GPUs[0]; g.EnergyJoules == nil || *g.EnergyJoules <= 0 || !*g.EnergyEstimated {
		t.Errorf("instance 7: %+v, want its parent's energy × 1/7", g)
	}
	if g := c.GPUs[1]; g.Samples != 0 || g.EnergyJoules != nil || *g.EnergyEstimated || !near(g.Share, 1.0/7) {
		t.Errorf("instance 8, gone: %+v, want no sample, no energy, its share kept", g)
	}
	if want := 2.0 / 7 * c.DurationSeconds; !near(c.GPUSeconds, want) {
		t.Errorf("gpu_seconds %v, want %v", c.GPUSeconds, want)
	}
}

func TestSuperviseSharedGPUCompletion(t *testing.T) {
	// Four replicas of each of two time-sliced GPUs: share 0.25, so
	// gpu_seconds is half the duration and each GPU's energy is estimated
	// at a quarter of its rise.
	k := gpuTask(t, 2, "/bin/sh", "-c", "sleep 1.2")
	k.Setenv("PADDLE_GPU_SHARE", "0.25")
	c := supervisedGPUs(t, k)
	if len(c.GPUs) != 2 || !near(c.GPUSeconds, 0.5*c.DurationSeconds) {
		t.Fatalf("completion %+v, want gpu_seconds = 2 × 0.25 × duration", c)
	}
	for i, g := range c.GPUs {
		if g.UUID != fakeUUID(i) || g.MIGUUID != nil || g.Share != 0.25 || g.Samples < 2 || g.EnergyJoules == nil ||
			!near(*g.EnergyJoules, 100*float64(g.Samples-1)*0.25) || !*g.EnergyEstimated {
			t.Errorf("gpus[%d] = %+v", i, g)
		}
	}
}

func TestSuperviseEnergyUnsupported(t *testing.T) {
	for _, tt := range []struct {
		name string
		dir  func(t *testing.T) string
		env  []string
	}{
		{"NOT_SUPPORTED", func(t *testing.T) string { return fakeNVMLDir(t) }, []string{"FAKE_NVML_ENERGY=unsupported"}},
		{"no symbol", func(t *testing.T) string { return fakeNVMLVariantDir(t, "-DFAKE_NVML_NO_ENERGY") }, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			k := gpuTask(t, 1, "/bin/sh", "-c", "sleep 1.2")
			k.Setenv("LD_LIBRARY_PATH", tt.dir(t))
			for _, e := range tt.env {
				key, value, _ := strings.Cut(e, "=")
				k.Setenv(key, value)
			}
			c := supervisedGPUs(t, k)
			if len(c.GPUs) != 1 || c.GPUs[0].Samples < 2 || c.GPUs[0].EnergyJoules != nil || *c.GPUs[0].EnergyEstimated {
				t.Errorf("completion %+v, want samples and no energy", c)
			}
		})
	}
}

func TestSuperviseEnergyNoSampling(t *testing.T) {
	// PADDLE_GPU_SAMPLE=0: no reading, so no energy; the MIG fields and
	// shares are there all the same.
	m := newSupMonitor(t)
	k := gpuTask(t, 1, "/bin/true")
	k.Setenv("FAKE_NVML_MIG_0", h200MIG)
	k.Setenv("CUDA_VISIBLE_DEVICES", migUUID(0, 2, 0))
	k.Setenv("PADDLE_ENTRYPOINT_MODE", "supervise")
	k.Setenv("PADDLE_MONITOR_URL", m.URL)
	k.Setenv("PADDLE_GPU_SAMPLE", "0")
	if r := k.Run(); r.Code != 0 {
		t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
	}
	var body map[string]any
	json.Unmarshal(m.waitFor(t, "/v1/task/complete", 1)[0].Body, &body)
	got, _ := json.Marshal(body["gpus"])
	want := fmt.Sprintf(`[{"energy_estimated":false,"energy_joules":null,"idle_share":null,"memory_used_peak_bytes":null,"mig_uuid":%q,"samples":0,"share":%v,"util_mean":null,"util_p95":null,"uuid":%q}]`,
		migUUID(0, 2, 0), 3.0/7, fakeUUID(0))
	if string(got) != want {
		t.Errorf("gpus %s\nwant %s", got, want)
	}
}

func TestSuperviseMIGHeartbeat(t *testing.T) {
	// A heartbeat's MIG entry carries mig_uuid beside the parent's uuid;
	// NVML gives no utilisation there, so it has no sample.
	m := newSupMonitor(t)
	k := gpuTask(t, 2, "/bin/sh", "-c", "sleep 1.2")
	k.Setenv("FAKE_NVML_MIG_0", h200MIG)
	k.Setenv("CUDA_VISIBLE_DEVICES", migUUID(0, 8, 0)+",1")
	k.Setenv("FAKE_NVML_UTIL", "60")
	k.Setenv("PADDLE_ENTRYPOINT_MODE", "supervise")
	k.Setenv("PADDLE_MONITOR_URL", m.URL)
	k.Setenv("PADDLE_GPU_SAMPLE", "100ms")
	k.Setenv("PADDLE_HEARTBEAT", "300ms")
	if r := k.Run(); r.Code != 0 {
		t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
	}
	m.waitFor(t, "/v1/task/heartbeat", 1)
	// The last: the sampler has surely written lines by then.
	beats := m.requests("/v1/task/heartbeat")
	last := beats[len(beats)-1].Body
	var hb struct {
		GPUs []map[string]any `json:"gpus"`
	}
	if err := json.Unmarshal(last, &hb); err != nil || len(hb.GPUs) != 2 {
		t.Fatalf("heartbeat %s (%v)", last, err)
	}
	if g := hb.GPUs[0]; g["uuid"] != fakeUUID(0) || g["mig_uuid"] != migUUID(0, 8, 0) || g["samples"] != 0.0 || g["util_mean"] != nil {
		t.Errorf("MIG entry %v", g)
	}
	if g := hb.GPUs[1]; g["uuid"] != fakeUUID(1) || g["mig_uuid"] != nil || g["samples"].(float64) < 1 || g["util_mean"] != 60.0 {
		t.Errorf("whole GPU entry %v", g)
	}
}

func TestGPUMIGTextfiles(t *testing.T) {
	// Tasks on different instances of one GPU keep each other's textfile;
	// a task on the same instance replaces the stale one. Each series has
	// the parent's UUID with the instance's GPU_I_ID and GPU_I_PROFILE.
	dir := t.TempDir()
	run := func(id, visible string) string {
		t.Helper()
		k := gpuTask(t, 1, "/bin/true")
		k.Setenv("FAKE_NVML_MIG_0", h200MIG)
		k.Setenv("CUDA_VISIBLE_DEVICES", visible)
		k.Setenv("PADDLE_TEXTFILE_DIR", dir)
		k.Setenv("PADDLE_TASK_ID", id)
		if r := k.Run(); r.Code != 0 {
			t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
		}
		b, _ := os.ReadFile(filepath.Join(dir, "paddle-task-"+id+".prom"))
		return string(b)
	}
	a := run("mig-a", migUUID(0, 7, 0))
	if want := fmt.Sprintf(`UUID=%q,gpu_model="NVIDIA A100-SXM4-80GB",GPU_I_ID="7",GPU_I_PROFILE="1g.18gb"} 1`, fakeUUID(0)); !strings.Contains(a, want) {
		t.Errorf("textfile:\n%s\nwant a series ending %s", a, want)
	}
	run("mig-b", migUUID(0, 8, 0))
	for _, id := range []string{"mig-a", "mig-b"} {
		if _, err := os.Stat(filepath.Join(dir, "paddle-task-"+id+".prom")); err != nil {
			t.Errorf("%s: %v", id, err)
		}
	}
	run("mig-c", migUUID(0, 7, 0))
	if _, err := os.Stat(filepath.Join(dir, "paddle-task-mig-a.prom")); !os.IsNotExist(err) {
		t.Errorf("mig-a's file on the same instance is still there (%v)", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "paddle-task-mig-b.prom")); err != nil {
		t.Errorf("mig-b: %v", err)
	}
}
