package entrypoint

// Black-box tests of the GPU count (docs/contract.md, section 7): the built
// entrypoint runs the built probe beside it, which loads a fake
// libnvidia-ml.so.1 (testdata/fakenvml) through LD_LIBRARY_PATH, as on a
// node, with devices and failures chosen by FAKE_NVML_* variables.
//
// Every task here sets PADDLE_ENTRYPOINT_TEST_GPU_ROOT to a directory of its
// own, so the machine's /dev and libraries (a real GPU, a real driver) never
// change a result; device nodes are plain files under that root.

import (
	"context"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// fakeNVML builds testdata/fakenvml once into a directory of its own.
var fakeNVML struct {
	once sync.Once
	dir  string
	err  error
}

// fakeNVMLDir returns the directory holding the fake libnvidia-ml.so.1.
func fakeNVMLDir(t testing.TB) string {
	t.Helper()
	fakeNVML.once.Do(func() {
		fakeNVML.dir = filepath.Join(bin.dir, "fakenvml")
		if err := os.MkdirAll(fakeNVML.dir, 0o755); err != nil {
			fakeNVML.err = err
			return
		}
		out, err := exec.Command("gcc", "-O2", "-Wall", "-shared", "-fPIC", "-o",
			filepath.Join(fakeNVML.dir, "libnvidia-ml.so.1"), "testdata/fakenvml/fakenvml.c").CombinedOutput()
		if err != nil {
			fakeNVML.err = fmt.Errorf("building the fake NVML: %v\n%s", err, out)
		}
	})
	if fakeNVML.err != nil {
		t.Fatal(fakeNVML.err)
	}
	return fakeNVML.dir
}

// fakeUUID is the UUID the fake library gives device i.
func fakeUUID(i int) string {
	return fmt.Sprintf("GPU-a1b2c3%02x-8f2d-4c1b-9a3e-1c2d3e4f5a%02x", i, i)
}

// gpuTask is a task whose GPU view is the test's alone: an empty root for
// device nodes and standard library directories, and, with gpus >= 0, the
// fake library on LD_LIBRARY_PATH with that many devices.
func gpuTask(t *testing.T, gpus int, args ...string) *task {
	t.Helper()
	k := newTask(t, args...)
	root := filepath.Join(k.Dir, "root")
	if err := os.MkdirAll(filepath.Join(root, "dev"), 0o755); err != nil {
		t.Fatal(err)
	}
	k.Setenv("PADDLE_ENTRYPOINT_TEST_GPU_ROOT", root)
	if gpus >= 0 {
		k.Setenv("LD_LIBRARY_PATH", fakeNVMLDir(t))
		k.Setenv("FAKE_NVML_GPUS", fmt.Sprint(gpus))
	}
	return k
}

// addDeviceNodes creates dev/nvidia<N> (plain files) and dev/nvidiactl
// under the task's GPU root.
func addDeviceNodes(t *testing.T, k *task, minors ...int) {
	t.Helper()
	names := []string{"nvidiactl", "nvidia-uvm"}
	for _, n := range minors {
		names = append(names, fmt.Sprintf("nvidia%d", n))
	}
	for _, name := range names {
		if err := os.WriteFile(filepath.Join(k.Dir, "root", "dev", name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// logLine returns the first log line at level (INFO, WARN, ...) that holds
// every part, or "".
func logLine(stderr, level string, parts ...string) string {
	for _, line := range strings.Split(stderr, "\n") {
		if !strings.HasPrefix(line, "paddle-entrypoint: ") || !strings.Contains(line, "level="+level+" ") {
			continue
		}
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return line
		}
	}
	return ""
}

// checkGPULabels asserts the labels file's gpu_count and gpu_uuids.
func checkGPULabels(t *testing.T, k *task, r result, uuids ...string) {
	t.Helper()
	if r.Code != 0 {
		t.Fatalf("exit %d, want the command's 0\nstderr:\n%s", r.Code, r.Stderr)
	}
	m := labelMap(t, k.LabelsFile())
	if got, want := m["gpu_count"], fmt.Sprint(len(uuids)); got != want {
		t.Errorf("gpu_count=%s, want %s\nstderr:\n%s", got, want, r.Stderr)
	}
	got, ok := m["gpu_uuids"]
	switch {
	case len(uuids) == 0 && ok:
		t.Errorf("gpu_uuids=%s with no GPU, want the key left out", got)
	case len(uuids) > 0 && got != strings.Join(uuids, ","):
		t.Errorf("gpu_uuids=%s, want %s", got, strings.Join(uuids, ","))
	}
}

func TestGPUCount(t *testing.T) {
	for _, n := range []int{0, 1, 2, 8} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			k := gpuTask(t, n, bin.report)
			r := k.Run()
			var want []string
			for i := range n {
				want = append(want, fakeUUID(i))
			}
			checkGPULabels(t, k, r, want...)
			parseReport(t, r.Stdout) // the command ran
			if line := logLine(r.Stderr, "WARN"); line != "" {
				t.Errorf("warning with a working NVML: %s", line)
			}
		})
	}
}

func TestGPUCUDAVisibleDevices(t *testing.T) {
	tests := []struct {
		value string
		want  []int // fake devices visible, in CUDA order
		warn  bool
	}{
		{"1", []int{1}, false},
		{"3,1", []int{3, 1}, false},
		{" 2 , 0 ", []int{2, 0}, false},
		{"1,1,1", []int{1}, false},
		{fakeUUID(2), []int{2}, false},
		{"GPU-a1b2c303", []int{3}, false},
		{"GPU-a1b2c303," + fakeUUID(0) + ",1", []int{3, 0, 1}, false},
		{"", nil, false},
		{"-1", nil, false},
		{"0,-1,1", []int{0}, false},
		{"7", nil, true},
		{"0,7,1", []int{0}, true},
		{"GPU-a1b2c3", nil, true}, // a prefix of every UUID
		{"GPU-ffffffff", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			k := gpuTask(t, 4, bin.report)
			k.Setenv("CUDA_VISIBLE_DEVICES", tt.value)
			r := k.Run()
			var want []string
			for _, i := range tt.want {
				want = append(want, fakeUUID(i))
			}
			checkGPULabels(t, k, r, want...)
			if got := logLine(r.Stderr, "WARN", "CUDA_VISIBLE_DEVICES") != ""; got != tt.warn {
				t.Errorf("CUDA_VISIBLE_DEVICES warning: %v, want %v\nstderr:\n%s", got, tt.warn, r.Stderr)
			}
			// Filtering is the entrypoint's view only: the command gets the
			// variable as it was.
			if v, ok := parseReport(t, r.Stdout).Getenv("CUDA_VISIBLE_DEVICES"); !ok || v != tt.value {
				t.Errorf("command saw CUDA_VISIBLE_DEVICES=%q (set %v), want %q", v, ok, tt.value)
			}
		})
	}
}

func TestGPUNoLibrary(t *testing.T) {
	// A CPU container: no device node, no library. The probe is not even
	// started: a stand-in probe that would leave a mark proves it.
	k := gpuTask(t, -1, bin.report)
	mark := filepath.Join(k.Dir, "probe-ran")
	probe := filepath.Join(k.Dir, "probe.sh")
	if err := os.WriteFile(probe, []byte("#!/bin/sh\n: > "+mark+"\necho '{\"devices\":[]}'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	k.Setenv("PADDLE_ENTRYPOINT_GPU_PROBE", probe)
	k.Setenv("PADDLE_ENTRYPOINT_LOG", "debug")
	r := k.Run()
	checkGPULabels(t, k, r)
	parseReport(t, r.Stdout)
	if _, err := os.Stat(mark); err == nil {
		t.Error("the probe ran in a container with no device node and no NVML library")
	}
	if logLine(r.Stderr, "DEBUG", "no GPUs", "libnvidia-ml.so.1") == "" {
		t.Errorf("no debug note saying why there are no GPUs:\n%s", r.Stderr)
	}
	if line := logLine(r.Stderr, "WARN"); line != "" {
		t.Errorf("a CPU container got a warning: %s", line)
	}

	// At the default level the note is not shown.
	k = gpuTask(t, -1, "/bin/true")
	if r := k.Run(); strings.Contains(r.Stderr, "no GPUs") {
		t.Errorf("debug note shown at level info:\n%s", r.Stderr)
	}
}

func TestGPUInitFails(t *testing.T) {
	k := gpuTask(t, 2, bin.report)
	k.Setenv("FAKE_NVML_MODE", "init_fail")
	calls := filepath.Join(k.Dir, "calls")
	k.Setenv("FAKE_NVML_LOG", calls)
	r := k.Run()
	checkGPULabels(t, k, r)
	parseReport(t, r.Stdout)
	if logLine(r.Stderr, "WARN", "NVML unusable", "nvmlInit_v2", "version mismatch") == "" {
		t.Errorf("no warning naming the failed init:\n%s", r.Stderr)
	}
	// Nothing but the error text may follow a failed init.
	b, _ := os.ReadFile(calls)
	for _, c := range strings.Fields(string(b)) {
		if c != "nvmlInit_v2" && c != "nvmlErrorString" {
			t.Errorf("NVML called %s after a failed init (calls: %s)", c, strings.Fields(string(b)))
		}
	}
}

func TestGPUInitFailsOnCPUNode(t *testing.T) {
	// The library is in the image but the node has no driver and no device
	// node: a CPU node, not worth a warning.
	k := gpuTask(t, 2, "/bin/true")
	k.Setenv("FAKE_NVML_MODE", "init_fail")
	k.Setenv("FAKE_NVML_INIT_RETURN", "9") // NVML_ERROR_DRIVER_NOT_LOADED
	k.Setenv("PADDLE_ENTRYPOINT_LOG", "debug")
	r := k.Run()
	checkGPULabels(t, k, r)
	if line := logLine(r.Stderr, "WARN"); line != "" {
		t.Errorf("warning on a CPU node: %s", line)
	}
	if logLine(r.Stderr, "DEBUG", "no GPUs", "driver") == "" {
		t.Errorf("no debug note:\n%s", r.Stderr)
	}
}

// gpuHangMargin bounds, in the tests, how late past PADDLE_GPU_TIMEOUT the
// command may start; generous for a loaded shared machine.
const gpuHangMargin = 1500 * time.Millisecond

func TestGPUInitHangs(t *testing.T) {
	for _, tt := range []struct {
		setting string // PADDLE_GPU_TIMEOUT; "" for the default
		timeout time.Duration
	}{{"500ms", 500 * time.Millisecond}, {"", 2 * time.Second}} {
		t.Run(tt.timeout.String(), func(t *testing.T) {
			k := gpuTask(t, 2, bin.report)
			k.Setenv("FAKE_NVML_MODE", "init_hang")
			if tt.setting != "" {
				k.Setenv("PADDLE_GPU_TIMEOUT", tt.setting)
			}
			r := k.Run()
			checkGPULabels(t, k, r)
			parseReport(t, r.Stdout)
			if r.Elapsed < tt.timeout || r.Elapsed > tt.timeout+gpuHangMargin {
				t.Errorf("command started after %v, want just after the %v timeout", r.Elapsed, tt.timeout)
			}
			if logLine(r.Stderr, "WARN", "did not answer", "timeout="+tt.timeout.String()) == "" {
				t.Errorf("no timeout warning:\n%s", r.Stderr)
			}
		})
	}
}

func TestGPUHungProbeNotLeftRunning(t *testing.T) {
	// After the timeout the hung probe is killed: it must not live on as
	// a child of the training command (same PID as the entrypoint).
	k := gpuTask(t, 2, "/bin/sleep", "5")
	k.Setenv("FAKE_NVML_MODE", "init_hang")
	k.Setenv("PADDLE_GPU_TIMEOUT", "300ms")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := k.Command(ctx)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { c.Process.Kill(); c.Wait() }()
	pid := c.Process.Pid
	// Until the probe has had time to run, it is expected to be there.
	time.Sleep(300*time.Millisecond + 700*time.Millisecond)
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		s := string(b)
		open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || close < open {
			continue
		}
		comm, rest := s[open+1:close], strings.Fields(s[close+1:])
		if len(rest) < 2 || rest[1] != fmt.Sprint(pid) {
			continue
		}
		// Z and X (a zombie being reaped) have exited.
		if strings.HasPrefix(comm, "paddle-gpu") && rest[0] != "Z" && rest[0] != "X" {
			t.Errorf("the hung probe (%s, state %s) still runs under the command", f, rest[0])
		}
	}
}

func TestGPUInitHangsSignal(t *testing.T) {
	// SIGTERM while NVML hangs: the start stops at once, not at the timeout.
	k := gpuTask(t, 2, "/bin/sleep", "30")
	k.Setenv("FAKE_NVML_MODE", "init_hang")
	k.Setenv("PADDLE_GPU_TIMEOUT", "20s")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := k.Command(ctx)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	sent := time.Now()
	c.Process.Signal(syscall.SIGTERM)
	err := c.Wait()
	if d := time.Since(sent); d > time.Second {
		t.Errorf("exited %v after SIGTERM", d)
	}
	if code := exitCode(err); code != 128+int(syscall.SIGTERM) {
		t.Errorf("exit %d, want %d", code, 128+int(syscall.SIGTERM))
	}
}

func TestGPUInitCrashes(t *testing.T) {
	k := gpuTask(t, 2, bin.report)
	k.Setenv("FAKE_NVML_MODE", "init_crash")
	r := k.Run()
	checkGPULabels(t, k, r)
	parseReport(t, r.Stdout)
	if logLine(r.Stderr, "WARN", "NVIDIA library crashed", "signal=SIGSEGV") == "" {
		t.Errorf("no warning that the NVIDIA library crashed:\n%s", r.Stderr)
	}
}

func TestGPUDeviceNodes(t *testing.T) {
	tests := []struct {
		name  string
		setup func(*task)
		cvd   string // CUDA_VISIBLE_DEVICES; "unset" for none
		count int
		says  string // the warning or note on why NVML was not used
	}{
		{"init fails", func(k *task) { k.Setenv("FAKE_NVML_MODE", "init_fail") }, "unset", 3, "NVML unusable"},
		{"init crashes", func(k *task) { k.Setenv("FAKE_NVML_MODE", "init_crash") }, "unset", 3, "crashed"},
		{"probe missing", func(k *task) { k.Setenv("PADDLE_ENTRYPOINT_GPU_PROBE", filepath.Join(k.Dir, "absent")) }, "unset", 3, "could not start"},
		{"filtered by index", func(k *task) { k.Setenv("FAKE_NVML_MODE", "init_fail") }, "2,0", 2, "NVML unusable"},
		{"filtered to none", func(k *task) { k.Setenv("FAKE_NVML_MODE", "init_fail") }, "-1", 0, "NVML unusable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := gpuTask(t, 2, bin.report)
			addDeviceNodes(t, k, 0, 1, 3)
			tt.setup(k)
			if tt.cvd != "unset" {
				k.Setenv("CUDA_VISIBLE_DEVICES", tt.cvd)
			}
			r := k.Run()
			if r.Code != 0 {
				t.Fatalf("exit %d\nstderr:\n%s", r.Code, r.Stderr)
			}
			parseReport(t, r.Stdout)
			m := labelMap(t, k.LabelsFile())
			if m["gpu_count"] != fmt.Sprint(tt.count) {
				t.Errorf("gpu_count=%s, want %d from the device nodes\nstderr:\n%s", m["gpu_count"], tt.count, r.Stderr)
			}
			if u, ok := m["gpu_uuids"]; ok {
				t.Errorf("gpu_uuids=%s: device nodes carry no UUID", u)
			}
			if logLine(r.Stderr, "WARN", tt.says) == "" {
				t.Errorf("no warning saying %q:\n%s", tt.says, r.Stderr)
			}
			if logLine(r.Stderr, "INFO", "device nodes", "source=device-nodes") == "" {
				t.Errorf("the source of the count is not logged:\n%s", r.Stderr)
			}
		})
	}
}

func TestGPUDeviceNodesWithoutLibrary(t *testing.T) {
	// Device nodes but no NVML library (a container without the driver's
	// "utility" capability): the nodes are counted, at info level.
	k := gpuTask(t, -1, "/bin/true")
	addDeviceNodes(t, k, 0, 1)
	r := k.Run()
	m := labelMap(t, k.LabelsFile())
	if r.Code != 0 || m["gpu_count"] != "2" {
		t.Errorf("exit %d, gpu_count=%s; want 0 and 2\nstderr:\n%s", r.Code, m["gpu_count"], r.Stderr)
	}
	if logLine(r.Stderr, "INFO", "source=device-nodes") == "" || logLine(r.Stderr, "WARN") != "" {
		t.Errorf("want the source at info and no warning:\n%s", r.Stderr)
	}
}

func TestGPULDBindNow(t *testing.T) {
	// LD_BIND_NOW=1 kills any program linking go-nvml before main. The
	// probe proves it here; the entrypoint must not care, and must still
	// count the GPUs by running the probe without it.
	probe := exec.Command(bin.probe)
	probe.Env = []string{"LD_BIND_NOW=1", "LD_LIBRARY_PATH=" + fakeNVMLDir(t), "FAKE_NVML_GPUS=2"}
	if out, err := probe.CombinedOutput(); err == nil {
		t.Fatalf("the probe ran with LD_BIND_NOW=1 (%s): this test would prove nothing", out)
	}

	k := gpuTask(t, 2, bin.report)
	k.Setenv("LD_BIND_NOW", "1")
	r := k.Run()
	checkGPULabels(t, k, r, fakeUUID(0), fakeUUID(1))
	if v, ok := parseReport(t, r.Stdout).Getenv("LD_BIND_NOW"); !ok || v != "1" {
		t.Errorf("command saw LD_BIND_NOW=%q (set %v), want 1", v, ok)
	}
}

func TestGPUProbeMissing(t *testing.T) {
	// The entrypoint installed without its probe: the GPU fields are lost,
	// nothing else.
	dir := t.TempDir()
	alone := filepath.Join(dir, "paddle-entrypoint")
	b, err := os.ReadFile(bin.entrypoint)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(alone, b, 0o755); err != nil {
		t.Fatal(err)
	}
	k := gpuTask(t, 2, bin.report)
	c := k.Command(context.Background())
	c.Path, c.Args[0] = alone, alone
	out, err := c.Output()
	if err != nil {
		t.Fatalf("entrypoint without its probe: %v", err)
	}
	parseReport(t, string(out))
	m := labelMap(t, k.LabelsFile())
	if m["gpu_count"] != "0" {
		t.Errorf("gpu_count=%s without a probe", m["gpu_count"])
	}
}

func TestGPUProbeFailsToRun(t *testing.T) {
	// A probe that cannot run here (say, built against a newer glibc than
	// the image's) exits at once with the loader's complaint; its first line
	// is logged.
	k := gpuTask(t, 2, bin.report)
	probe := filepath.Join(k.Dir, "probe.sh")
	msg := "paddle-gpu-probe: /lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.34' not found"
	if err := os.WriteFile(probe, []byte("#!/bin/sh\ncat >&2 <<'EOF'\n"+msg+"\nEOF\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	k.Setenv("PADDLE_ENTRYPOINT_GPU_PROBE", probe)
	r := k.Run()
	checkGPULabels(t, k, r)
	if logLine(r.Stderr, "WARN", "GPU probe failed", "GLIBC_2.34") == "" {
		t.Errorf("the probe's complaint is not logged:\n%s", r.Stderr)
	}
}

func TestGPUBrokenDevice(t *testing.T) {
	// One GPU fallen off the bus: it still counts, without a UUID, and the
	// other keeps its fields.
	k := gpuTask(t, 2, bin.report)
	k.Setenv("FAKE_NVML_BROKEN", "0")
	r := k.Run()
	m := labelMap(t, k.LabelsFile())
	if r.Code != 0 || m["gpu_count"] != "2" || m["gpu_uuids"] != fakeUUID(1) {
		t.Errorf("exit %d, gpu_count=%s, gpu_uuids=%s", r.Code, m["gpu_count"], m["gpu_uuids"])
	}
	if logLine(r.Stderr, "WARN", "GPU 0", "nvmlDeviceGetUUID", "GPU is lost") == "" {
		t.Errorf("no warning about GPU 0:\n%s", r.Stderr)
	}
}

func TestGPUOnlyListedNVMLCalls(t *testing.T) {
	// The fake exports only the listed entry points and the looked-up ones,
	// so another call would already kill the probe; this also checks the
	// order: init first, shutdown last.
	allowed := []string{"nvmlInit_v2", "nvmlShutdown", "nvmlErrorString", "nvmlDeviceGetCount_v2",
		"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetName", "nvmlDeviceGetUUID",
		"nvmlDeviceGetMemoryInfo", "nvmlSystemGetDriverVersion",
		// Looked up first (LookupSymbol), then called: no MIG-capable GPU
		// here, so nothing after the mode.
		"nvmlDeviceGetMigMode"}
	k := gpuTask(t, 2, "/bin/true")
	calls := filepath.Join(k.Dir, "calls")
	k.Setenv("FAKE_NVML_LOG", calls)
	r := k.Run()
	checkGPULabels(t, k, r, fakeUUID(0), fakeUUID(1))
	b, err := os.ReadFile(calls)
	if err != nil {
		t.Fatal(err)
	}
	list := strings.Fields(string(b))
	if len(list) < 2 || list[0] != "nvmlInit_v2" || list[len(list)-1] != "nvmlShutdown" {
		t.Errorf("calls %v: want nvmlInit_v2 first and nvmlShutdown last", list)
	}
	for _, c := range list {
		if !slices.Contains(allowed, c) {
			t.Errorf("unlisted NVML call %s", c)
		}
	}
}

func TestGPULabelsSubcommand(t *testing.T) {
	k := gpuTask(t, 2, "labels")
	k.Setenv("CUDA_VISIBLE_DEVICES", "1")
	r := k.Run()
	if r.Code != 0 {
		t.Fatalf("labels: exit %d\n%s", r.Code, r.Stderr)
	}
	lines := strings.Split(r.Stdout, "\n")
	if !slices.Contains(lines, "gpu_count=1") || !slices.Contains(lines, "gpu_uuids="+fakeUUID(1)) {
		t.Errorf("labels printed:\n%s", r.Stdout)
	}
}

func TestGPURegistrationBody(t *testing.T) {
	var (
		mu     sync.Mutex
		bodies [][]byte
	)
	monitor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		mu.Lock()
		bodies = append(bodies, b)
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	}))
	defer monitor.Close()

	type gpuJSON struct {
		Index            *int    `json:"index"`
		UUID             *string `json:"uuid"`
		Name             *string `json:"name"`
		MemoryTotalBytes *uint64 `json:"memory_total_bytes"`
	}
	type bodyJSON struct {
		GPUCount      int       `json:"gpu_count"`
		GPUs          []gpuJSON `json:"gpus"`
		DriverVersion *string   `json:"driver_version"`
	}
	tests := []struct {
		name    string
		gpus    int
		cvd     string
		indices []int
	}{
		{"two", 2, "unset", []int{0, 1}},
		{"eight, two visible", 8, "6,GPU-a1b2c303", []int{6, 3}},
		{"none", 0, "unset", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mu.Lock()
			bodies = nil
			mu.Unlock()
			k := gpuTask(t, tt.gpus, "/bin/true")
			k.Setenv("PADDLE_MONITOR_URL", monitor.URL)
			k.Setenv("FAKE_NVML_NAME", "NVIDIA H100 80GB HBM3")
			k.Setenv("FAKE_NVML_MEMORY", "85520809984")
			k.Setenv("FAKE_NVML_DRIVER", "535.183.01")
			if tt.cvd != "unset" {
				k.Setenv("CUDA_VISIBLE_DEVICES", tt.cvd)
			}
			if r := k.Run(); r.Code != 0 {
				t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(bodies) != 1 {
				t.Fatalf("monitor got %d registrations, want 1", len(bodies))
			}
			var b bodyJSON
			if err := json.Unmarshal(bodies[0], &b); err != nil {
				t.Fatalf("body %s: %v", bodies[0], err)
			}
			if b.GPUCount != len(tt.indices) || len(b.GPUs) != len(tt.indices) {
				t.Fatalf("gpu_count %d and %d gpus, want %d: %s", b.GPUCount, len(b.GPUs), len(tt.indices), bodies[0])
			}
			for i, g := range b.GPUs {
				want := tt.indices[i]
				if g.Index == nil || g.UUID == nil || g.Name == nil || g.MemoryTotalBytes == nil {
					t.Fatalf("gpus[%d] lacks a field: %s", i, bodies[0])
				}
				if *g.Index != want || *g.UUID != fakeUUID(want) || *g.Name != "NVIDIA H100 80GB HBM3" || *g.MemoryTotalBytes != 85520809984 {
					t.Errorf("gpus[%d] = {%d %s %s %d}, want NVML's device %d", i, *g.Index, *g.UUID, *g.Name, *g.MemoryTotalBytes, want)
				}
			}
			if b.DriverVersion == nil || *b.DriverVersion != "535.183.01" {
				t.Errorf("driver_version missing or wrong: %s", bodies[0])
			}
		})
	}
}

func TestGPUEntrypointIsStatic(t *testing.T) {
	f, err := elf.Open(bin.entrypoint)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("the entrypoint has an ELF interpreter: it is dynamically linked")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the entrypoint needs shared libraries %v", libs)
	}

	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, "github.com/NVIDIA/go-nvml") || strings.HasSuffix(pkg, "/gpu/nvmlprobe") {
			t.Errorf("the entrypoint links %s: it would be a cgo binary again", pkg)
		}
	}

	// The probe is the dynamic one, by design.
	p, err := elf.Open(bin.probe)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	interp := false
	for _, prog := range p.Progs {
		interp = interp || prog.Type == elf.PT_INTERP
	}
	if !interp {
		t.Error("the probe is not a dynamic executable: a static one cannot call into the NVML library it loads")
	}
}

// BenchmarkGPUProbe measures the probe alone against the fake library with
// two GPUs: process start, dlopen, the NVML calls, the JSON answer.
func BenchmarkGPUProbe(b *testing.B) {
	// Two whole GPUs; then the same with GPU 0 in MIG mode, seven 1g
	// instances (the most a GPU has): the MIG walk's cost.
	for _, tt := range []struct{ name, mig string }{
		{"whole", ""},
		{"mig7", "1:0:1:9728,2:0:1:9728,3:0:1:9728,4:0:1:9728,5:0:1:9728,6:0:1:9728,7:0:1:9728"},
	} {
		b.Run(tt.name, func(b *testing.B) {
			env := []string{"LD_LIBRARY_PATH=" + fakeNVMLDir(b), "FAKE_NVML_GPUS=2", "FAKE_NVML_MIG_0=" + tt.mig}
			var times []time.Duration
			for b.Loop() {
				c := exec.Command(bin.probe)
				c.Env = env
				began := time.Now()
				if out, err := c.Output(); err != nil || !strings.Contains(string(out), fakeUUID(1)) {
					b.Fatalf("probe: %v %s", err, out)
				}
				times = append(times, time.Since(began))
			}
			reportMedian(b, times)
		})
	}
}

// BenchmarkGPUStart measures the entrypoint's time to exec /bin/true (to
// its exit) on a CPU step (nothing to probe) and on a GPU step (the probe
// and the fake library with two GPUs), without a monitor. The two alternate,
// so that a noisy machine weighs on both alike; added-ms is the difference
// of the medians, what the probe adds to a start.
func BenchmarkGPUStart(b *testing.B) {
	setup := func(gpus int) []string {
		dir := b.TempDir()
		root := filepath.Join(dir, "root")
		if err := os.MkdirAll(filepath.Join(root, "dev"), 0o755); err != nil {
			b.Fatal(err)
		}
		env := []string{
			"PATH=/usr/bin:/bin",
			"PADDLE_LABELS_FILE=" + filepath.Join(dir, "labels"),
			"PADDLE_SPOOL_PATH=off",
			"PADDLE_ENTRYPOINT_TEST_GPU_ROOT=" + root,
		}
		if gpus > 0 {
			env = append(env, "LD_LIBRARY_PATH="+fakeNVMLDir(b), fmt.Sprintf("FAKE_NVML_GPUS=%d", gpus))
		}
		return env
	}
	start := func(env []string) time.Duration {
		c := exec.Command(bin.entrypoint, "/bin/true")
		c.Env = env
		began := time.Now()
		if out, err := c.CombinedOutput(); err != nil {
			b.Fatalf("entrypoint: %v %s", err, out)
		}
		return time.Since(began)
	}
	cpu, gpu := setup(0), setup(2)
	var cpuTimes, gpuTimes []time.Duration
	for b.Loop() {
		cpuTimes = append(cpuTimes, start(cpu))
		gpuTimes = append(gpuTimes, start(gpu))
	}
	c, g := median(cpuTimes), median(gpuTimes)
	b.ReportMetric(ms(c), "cpu-median-ms")
	b.ReportMetric(ms(g), "gpu-median-ms")
	b.ReportMetric(ms(g-c), "added-ms")
}

// reportMedian reports the median of times, less noisy than the mean on a
// shared machine.
func reportMedian(b *testing.B, times []time.Duration) {
	b.ReportMetric(ms(median(times)), "median-ms")
}

func median(times []time.Duration) time.Duration {
	if len(times) == 0 {
		return 0
	}
	s := slices.Clone(times)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
