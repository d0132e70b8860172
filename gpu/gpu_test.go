package gpu

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// These tests drive Start, Wait and Stop with shell scripts standing in for
// the probe executable, so every way a probe can end is reproducible. The
// real probe against a fake NVML library is tested through the built
// binaries (test/entrypoint/gpu_count_test.go).

// logBuffer collects log records as JSON lines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// records returns the logged records as maps.
func (b *logBuffer) records(t *testing.T) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(b.buf.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// find returns the first record at level whose message contains part.
func (b *logBuffer) find(t *testing.T, level, part string) map[string]any {
	t.Helper()
	for _, r := range b.records(t) {
		if r["level"] == level && strings.Contains(r["msg"].(string), part) {
			return r
		}
	}
	return nil
}

// fixture is one probe setting: a root with or without device nodes, a
// script as the probe, and the task's environment.
type fixture struct {
	t       *testing.T
	root    string
	marker  string // the script creates it when it runs
	opt     Options
	logs    *logBuffer
	environ []string
}

func newFixture(t *testing.T) *fixture {
	root := t.TempDir()
	f := &fixture{t: t, root: root, marker: filepath.Join(root, "probe-ran"), logs: &logBuffer{}}
	f.opt = Options{
		Timeout: 5 * time.Second,
		Root:    root,
		Logger:  slog.New(slog.NewJSONHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	return f
}

// nodes creates /dev/nvidia<N> for each n under the root.
func (f *fixture) nodes(ns ...int) *fixture {
	for _, n := range ns {
		touch(f.t, f.root, fmt.Sprintf("dev/nvidia%d", n))
	}
	touch(f.t, f.root, "dev/nvidiactl")
	return f
}

// library puts a file named libnvidia-ml.so.1 on LD_LIBRARY_PATH (the
// scripts do not load it; it only makes the probe worth running).
func (f *fixture) library() *fixture {
	dir := filepath.Join(f.root, "nvlib")
	touch(f.t, dir, LibraryName)
	f.environ = append(f.environ, "LD_LIBRARY_PATH="+dir)
	return f
}

func (f *fixture) env(kv ...string) *fixture {
	f.environ = append(f.environ, kv...)
	return f
}

// script installs body as the probe; it records that it ran first.
func (f *fixture) script(body string) *fixture {
	p := filepath.Join(f.root, "probe.sh")
	src := "#!/bin/sh\n: > '" + f.marker + "'\n" + body + "\n"
	if err := os.WriteFile(p, []byte(src), 0o755); err != nil {
		f.t.Fatal(err)
	}
	f.opt.Probe = p
	return f
}

// answer makes the probe print r and exit 0.
func (f *fixture) answer(r Report) *fixture {
	b, err := json.Marshal(r)
	if err != nil {
		f.t.Fatal(err)
	}
	return f.script("printf '%s\\n' '" + string(b) + "'")
}

func (f *fixture) wait(ctx context.Context) (Inventory, time.Duration) {
	f.opt.Environ = f.environ
	began := time.Now()
	p := Start(ctx, f.opt)
	inv := p.Wait()
	elapsed := time.Since(began)
	p.Stop()
	return inv, elapsed
}

func (f *fixture) probeRan() bool {
	_, err := os.Stat(f.marker)
	return err == nil
}

func twoA100s() Report {
	return Report{
		DriverVersion: "550.54.15",
		Devices: []Device{
			{Index: 0, UUID: "GPU-a1b2c300-8f2d-4c1b-9a3e-1c2d3e4f5a00", Name: "NVIDIA A100-SXM4-80GB", MemoryTotalBytes: 80 << 30},
			{Index: 1, UUID: "GPU-a1b2c301-8f2d-4c1b-9a3e-1c2d3e4f5a01", Name: "NVIDIA A100-SXM4-80GB", MemoryTotalBytes: 80 << 30},
		},
	}
}

func TestProbeAnswers(t *testing.T) {
	f := newFixture(t).library().answer(twoA100s())
	inv, _ := f.wait(context.Background())
	want := twoA100s()
	for i := range want.Devices {
		want.Devices[i].Share = 1 // PADDLE_GPU_SHARE's default
	}
	if inv.Source != SourceNVML || inv.DriverVersion != want.DriverVersion || !slices.Equal(inv.Devices, want.Devices) {
		t.Errorf("inventory = %+v, want NVML's %+v", inv, want)
	}
	if got := strings.Join(inv.UUIDs(), ","); got != want.Devices[0].UUID+","+want.Devices[1].UUID {
		t.Errorf("UUIDs = %s", got)
	}
}

func TestProbeFiltersByCUDAVisibleDevices(t *testing.T) {
	f := newFixture(t).library().answer(twoA100s()).env("CUDA_VISIBLE_DEVICES=1,7")
	inv, _ := f.wait(context.Background())
	if len(inv.Devices) != 1 || inv.Devices[0].Index != 1 {
		t.Errorf("devices = %+v, want NVML's device 1 only", inv.Devices)
	}
	if f.logs.find(t, "WARN", "CUDA_VISIBLE_DEVICES") == nil {
		t.Errorf("no warning about the entry 7:\n%s", f.logs.buf.String())
	}
}

func TestProbeNotRunWithoutNodeOrLibrary(t *testing.T) {
	f := newFixture(t).answer(twoA100s()).env("CUDA_VISIBLE_DEVICES=0")
	inv, elapsed := f.wait(context.Background())
	if f.probeRan() {
		t.Error("the probe ran in a container with no device node and no library")
	}
	if inv.Source != SourceNone || len(inv.Devices) != 0 {
		t.Errorf("inventory = %+v, want none", inv)
	}
	if f.logs.find(t, "DEBUG", "no GPUs") == nil {
		t.Errorf("no debug note saying why:\n%s", f.logs.buf.String())
	}
	if f.logs.find(t, "WARN", "") != nil {
		t.Errorf("a CPU container got a warning:\n%s", f.logs.buf.String())
	}
	if elapsed > time.Second {
		t.Errorf("took %v to learn there is nothing to probe", elapsed)
	}
}

func TestProbeRunsWithNodesOnly(t *testing.T) {
	f := newFixture(t).nodes(0).answer(twoA100s())
	if inv, _ := f.wait(context.Background()); !f.probeRan() || inv.Source != SourceNVML {
		t.Errorf("with a device node and no library found, the probe must still run (got %+v, ran %v)", inv, f.probeRan())
	}
}

func TestProbeEnvironment(t *testing.T) {
	// The probe gets the task's environment less LD_BIND_NOW.
	f := newFixture(t).library().env("LD_BIND_NOW=1", "KEEP=me")
	out := filepath.Join(f.root, "env")
	f.script("env > '" + out + "'\nprintf '{\"devices\":[]}'")
	f.wait(context.Background())
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	env := string(b)
	if strings.Contains(env, "LD_BIND_NOW") || !strings.Contains(env, "KEEP=me") || !strings.Contains(env, "LD_LIBRARY_PATH=") {
		t.Errorf("probe environment:\n%s", env)
	}
}

func TestProbeFailures(t *testing.T) {
	nvmlErr := func(code int, msg string) Report {
		return Report{Error: &NVMLError{Call: "nvmlInit_v2", Code: code, Message: msg}}
	}
	tests := []struct {
		name   string
		nodes  []int
		setup  func(*fixture)
		source string
		count  int
		level  string // level of the line that says why
		says   string // part of its message
	}{
		{name: "init fails", setup: func(f *fixture) { f.answer(nvmlErr(18, "Driver/library version mismatch")) },
			source: SourceNone, level: "WARN", says: "NVML unusable"},
		{name: "init fails, nodes counted", nodes: []int{0, 1, 2}, setup: func(f *fixture) { f.answer(nvmlErr(18, "Driver/library version mismatch")) },
			source: SourceDeviceNodes, count: 3, level: "WARN", says: "NVML unusable"},
		{name: "no driver on a CPU node", setup: func(f *fixture) { f.answer(nvmlErr(ReturnDriverNotLoaded, "Driver Not Loaded")) },
			source: SourceNone, level: "DEBUG", says: "no NVIDIA driver"},
		{name: "library does not load", setup: func(f *fixture) { f.answer(nvmlErr(ReturnLibraryNotFound, "ERROR_LIBRARY_NOT_FOUND")) },
			source: SourceNone, level: "DEBUG", says: "did not load"},
		{name: "library missing, nodes counted", nodes: []int{0, 1}, setup: func(f *fixture) { f.answer(nvmlErr(ReturnLibraryNotFound, "ERROR_LIBRARY_NOT_FOUND")) },
			source: SourceDeviceNodes, count: 2, level: "INFO", says: "did not load"},
		{name: "crash", nodes: []int{0}, setup: func(f *fixture) { f.script("kill -SEGV $$") },
			source: SourceDeviceNodes, count: 1, level: "WARN", says: "NVIDIA library crashed"},
		{name: "killed", setup: func(f *fixture) { f.script("kill -KILL $$") },
			source: SourceNone, level: "WARN", says: "GPU probe killed"},
		{name: "exits non-zero", setup: func(f *fixture) {
			f.script("echo 'paddle-gpu-probe: version `GLIBC_2.34'\"'\"' not found' >&2; exit 1")
		}, source: SourceNone, level: "WARN", says: "GPU probe failed"},
		{name: "says nothing", nodes: []int{0}, setup: func(f *fixture) { f.script("exit 0") },
			source: SourceDeviceNodes, count: 1, level: "WARN", says: "GPU probe failed"},
		{name: "probe missing", nodes: []int{0, 1}, setup: func(f *fixture) { f.opt.Probe = filepath.Join(f.root, "absent") },
			source: SourceDeviceNodes, count: 2, level: "WARN", says: "could not start"},
		{name: "probe not executable", setup: func(f *fixture) { f.script("exit 0"); os.Chmod(f.opt.Probe, 0o644) },
			source: SourceNone, level: "WARN", says: "could not start"},
		{name: "no probe configured", setup: func(f *fixture) {}, source: SourceNone, level: "WARN", says: "could not start"},
		{name: "count fails", setup: func(f *fixture) {
			f.answer(Report{DriverVersion: "550.54.15", Error: &NVMLError{Call: "nvmlDeviceGetCount_v2", Code: 999, Message: "Unknown Error"}})
		}, source: SourceNone, level: "WARN", says: "NVML unusable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t).library().nodes(tt.nodes...)
			tt.setup(f)
			inv, _ := f.wait(context.Background())
			if inv.Source != tt.source || len(inv.Devices) != tt.count {
				t.Errorf("inventory = %+v, want %d from %s", inv, tt.count, tt.source)
			}
			if f.logs.find(t, tt.level, tt.says) == nil {
				t.Errorf("no %s line saying %q:\n%s", tt.level, tt.says, f.logs.buf.String())
			}
			if tt.source == SourceDeviceNodes && f.logs.find(t, "INFO", "device nodes") == nil {
				t.Errorf("the source is not said:\n%s", f.logs.buf.String())
			}
		})
	}
}

func TestProbeCrashNamesSignalAndStderr(t *testing.T) {
	f := newFixture(t).library().script("echo 'driver exploded' >&2; kill -SEGV $$")
	f.wait(context.Background())
	r := f.logs.find(t, "WARN", "crashed")
	if r == nil || r["signal"] != "SIGSEGV" || r["stderr"] != "driver exploded" {
		t.Errorf("crash warning = %v", r)
	}
}

func TestProbeProblemsAreWarned(t *testing.T) {
	r := twoA100s()
	r.Devices[1].UUID = ""
	r.Problems = []string{"GPU 1: nvmlDeviceGetUUID: GPU is lost (code 15)"}
	f := newFixture(t).library().answer(r)
	inv, _ := f.wait(context.Background())
	if len(inv.Devices) != 2 || len(inv.UUIDs()) != 1 {
		t.Errorf("inventory = %+v, want both GPUs, one UUID", inv)
	}
	if w := f.logs.find(t, "WARN", "NVML query failed"); w == nil || !strings.Contains(w["problem"].(string), "GPU is lost") {
		t.Errorf("problem not warned:\n%s", f.logs.buf.String())
	}
}

func TestProbeTimeout(t *testing.T) {
	f := newFixture(t).library().nodes(0, 1).script("exec sleep 60")
	f.opt.Timeout = 300 * time.Millisecond
	inv, elapsed := f.wait(context.Background())
	if elapsed < f.opt.Timeout || elapsed > f.opt.Timeout+700*time.Millisecond {
		t.Errorf("Wait returned after %v with a %v timeout", elapsed, f.opt.Timeout)
	}
	if inv.Source != SourceDeviceNodes || len(inv.Devices) != 2 {
		t.Errorf("inventory = %+v, want the 2 device nodes", inv)
	}
	if f.logs.find(t, "WARN", "did not answer within PADDLE_GPU_TIMEOUT") == nil {
		t.Errorf("no timeout warning:\n%s", f.logs.buf.String())
	}
}

func TestProbeKilledAtTimeout(t *testing.T) {
	// The hung probe must not outlive the timeout: it would become a stray
	// child of the training command.
	f := newFixture(t).library()
	pidFile := filepath.Join(f.root, "pid")
	f.script("echo $$ > '" + pidFile + "'\nexec sleep 60")
	f.opt.Timeout = 300 * time.Millisecond
	f.opt.Environ = f.environ
	p := Start(context.Background(), f.opt)
	p.Wait()
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	fmt.Sscan(string(b), &pid)
	// Wait killed it; it is gone once reaped, which happens at once. One
	// look decides: a second look could catch it in the moment of being
	// reaped.
	deadline := time.Now().Add(2 * time.Second)
	for processAlive(pid) {
		if time.Now().After(deadline) {
			t.Errorf("probe %d still running after the timeout", pid)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.Stop()
}

// processAlive reports whether pid exists and has not exited: neither a
// zombie (Z) nor dead (X, the state a zombie shows while its parent reaps
// it; CI once saw Z, then X, and took the probe for running).
func processAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return rest != "" && rest[0] != 'Z' && rest[0] != 'X'
}

func TestProbeCancelled(t *testing.T) {
	f := newFixture(t).library().script("exec sleep 60")
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, elapsed := f.wait(ctx)
	if elapsed > 100*time.Millisecond+300*time.Millisecond {
		t.Errorf("Wait returned %v after Start, 100ms after the cancellation was due", elapsed)
	}
	if f.logs.find(t, "WARN", "") != nil {
		t.Errorf("a stopped start warned about the probe:\n%s", f.logs.buf.String())
	}
}

func TestProbeStopWithoutWait(t *testing.T) {
	f := newFixture(t).library().script("exec sleep 60")
	f.opt.Environ = f.environ
	p := Start(context.Background(), f.opt)
	time.Sleep(50 * time.Millisecond)
	began := time.Now()
	p.Stop()
	if d := time.Since(began); d > reapGrace+200*time.Millisecond {
		t.Errorf("Stop took %v", d)
	}
}

func TestProbeTimeoutZeroDisables(t *testing.T) {
	f := newFixture(t).library().nodes(0).answer(twoA100s())
	f.opt.Timeout = 0
	inv, _ := f.wait(context.Background())
	if f.probeRan() {
		t.Error("the probe ran with PADDLE_GPU_TIMEOUT=0")
	}
	if inv.Source != SourceDeviceNodes || len(inv.Devices) != 1 {
		t.Errorf("inventory = %+v, want the device node", inv)
	}
}

func TestProbeNodesAndCUDAVisibleDevices(t *testing.T) {
	tests := []struct {
		cvd   string
		count int
		warn  bool
	}{
		{"1,3", 2, false},
		{"", 0, false},
		{"-1", 0, false},
		{"2,9", 1, true},
		{"GPU-a1b2c300", 4, true}, // UUIDs cannot be matched: every node counts
	}
	for _, tt := range tests {
		t.Run(tt.cvd, func(t *testing.T) {
			f := newFixture(t).nodes(0, 1, 2, 3).script("exit 3").env("CUDA_VISIBLE_DEVICES=" + tt.cvd)
			inv, _ := f.wait(context.Background())
			if len(inv.Devices) != tt.count || inv.Source != SourceDeviceNodes {
				t.Errorf("inventory = %+v, want %d device nodes", inv, tt.count)
			}
			if got := f.logs.find(t, "WARN", "CUDA_VISIBLE_DEVICES") != nil; got != tt.warn {
				t.Errorf("CUDA_VISIBLE_DEVICES warning = %v, want %v:\n%s", got, tt.warn, f.logs.buf.String())
			}
		})
	}
}

// migReport is an H200 with MIG mode on (instances 1g.18gb, 1g.18gb,
// 3g.71gb) beside a whole H200, as the probe reports them.
func migReport() Report {
	parent0 := Device{Index: 0, UUID: "GPU-00000000-0000-4000-8000-000000000000", Name: "NVIDIA H200", MemoryTotalBytes: 150 << 30}
	parent1 := Device{Index: 1, UUID: "GPU-11111111-0000-4000-8000-000000000001", Name: "NVIDIA H200", MemoryTotalBytes: 150 << 30}
	inst := func(uuid string, gi, slices int, profile string, mem uint64) Device {
		d := parent0
		d.MemoryTotalBytes = mem
		d.MIG = &MIG{UUID: uuid, GPUInstanceID: gi, ComputeInstanceID: 0, Profile: profile, Slices: slices, TotalSlices: 7}
		return d
	}
	return Report{
		Devices:    []Device{parent0, parent1},
		MIGEnabled: []int{0},
		MIGDevices: []Device{
			inst("MIG-aaaaaaaa-0000-4000-8000-000000000007", 7, 1, "1g.18gb", 18<<30),
			inst("MIG-bbbbbbbb-0000-4000-8000-000000000008", 8, 1, "1g.18gb", 18<<30),
			inst("MIG-cccccccc-0000-4000-8000-000000000002", 2, 3, "3g.71gb", 71<<30),
		},
		DriverVersion: "560.35.03",
	}
}

// keysAndShares is the devices' keys and shares, "key@share" each.
func keysAndShares(ds []Device) string {
	var out []string
	for _, d := range ds {
		out = append(out, fmt.Sprintf("%s@%.4g", d.Key(), d.Share))
	}
	return strings.Join(out, ",")
}

func TestProbeMIG(t *testing.T) {
	const (
		a, b, c = "MIG-aaaaaaaa-0000-4000-8000-000000000007", "MIG-bbbbbbbb-0000-4000-8000-000000000008", "MIG-cccccccc-0000-4000-8000-000000000002"
		gpu1    = "GPU-11111111-0000-4000-8000-000000000001"
	)
	tests := []struct {
		name string
		env  []string
		want string // keys and shares of the task's GPUs
		warn string // a warning's message part, "" for none
	}{
		{"every instance and the whole GPU", nil, a + "@0.1429," + b + "@0.1429," + c + "@0.4286," + gpu1 + "@1", ""},
		{"CUDA_VISIBLE_DEVICES names one", []string{"CUDA_VISIBLE_DEVICES=" + c}, c + "@0.4286", ""},
		{"by prefix, in the list's order", []string{"CUDA_VISIBLE_DEVICES=MIG-bbbb,MIG-aaaa"}, b + "@0.1429," + a + "@0.1429", ""},
		{"the parent's index: its instances", []string{"CUDA_VISIBLE_DEVICES=0"}, a + "@0.1429," + b + "@0.1429," + c + "@0.4286", ""},
		{"a whole GPU beside an instance", []string{"CUDA_VISIBLE_DEVICES=1," + a}, gpu1 + "@1," + a + "@0.1429", ""},
		{"an unknown MIG UUID stops the list", []string{"CUDA_VISIBLE_DEVICES=" + a + ",MIG-ffff," + b}, a + "@0.1429", "CUDA_VISIBLE_DEVICES"},
		{"an ambiguous prefix", []string{"CUDA_VISIBLE_DEVICES=MIG-"}, "", "CUDA_VISIBLE_DEVICES"},
		{"NVIDIA_VISIBLE_DEVICES names them", []string{"NVIDIA_VISIBLE_DEVICES=" + b + "," + c}, b + "@0.1429," + c + "@0.4286," + gpu1 + "@1", ""},
		{"NVIDIA_VISIBLE_DEVICES names an absent one", []string{"NVIDIA_VISIBLE_DEVICES=" + b + ",MIG-dddddddd-0000-4000-8000-000000000009"},
			b + "@0.1429," + gpu1 + "@1", "NVIDIA_VISIBLE_DEVICES names a MIG device"},
		{"CUDA_VISIBLE_DEVICES wins", []string{"CUDA_VISIBLE_DEVICES=" + a, "NVIDIA_VISIBLE_DEVICES=" + b}, a + "@0.1429", ""},
		{"NVIDIA_VISIBLE_DEVICES restricts an expanded parent", []string{"CUDA_VISIBLE_DEVICES=0", "NVIDIA_VISIBLE_DEVICES=" + c}, c + "@0.4286", ""},
		{"PADDLE_GPU_SHARE is for whole GPUs only", []string{"SHARE=0.25"}, a + "@0.1429," + b + "@0.1429," + c + "@0.4286," + gpu1 + "@0.25", ""},
		{"none", []string{"CUDA_VISIBLE_DEVICES="}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t).library().answer(migReport())
			for _, e := range tt.env {
				if share, ok := strings.CutPrefix(e, "SHARE="); ok {
					fmt.Sscan(share, &f.opt.Share)
					continue
				}
				f.env(e)
			}
			inv, _ := f.wait(context.Background())
			if got := keysAndShares(inv.Devices); got != tt.want {
				t.Errorf("devices %s\nwant    %s", got, tt.want)
			}
			warned := f.logs.find(t, "WARN", "")
			switch {
			case tt.warn == "" && warned != nil:
				t.Errorf("unexpected warning %v", warned)
			case tt.warn != "" && f.logs.find(t, "WARN", tt.warn) == nil:
				t.Errorf("no warning saying %q:\n%s", tt.warn, f.logs.buf.String())
			}
		})
	}
}

func TestProbeMIGEntry(t *testing.T) {
	// A MIG entry is the parent's index, UUID and name, the instance's
	// memory, and its MIG fields; the labels' keys are MIG UUIDs.
	f := newFixture(t).library().answer(migReport()).env("CUDA_VISIBLE_DEVICES=MIG-cccc")
	inv, _ := f.wait(context.Background())
	b, _ := json.Marshal(inv.Devices)
	want := `[{"index":0,"uuid":"GPU-00000000-0000-4000-8000-000000000000","name":"NVIDIA H200","memory_total_bytes":76235669504,"share":0.42857142857142855,` +
		`"mig":{"uuid":"MIG-cccccccc-0000-4000-8000-000000000002","gpu_instance_id":2,"compute_instance_id":0,"profile":"3g.71gb","slices":3,"total_slices":7}}]`
	if string(b) != want {
		t.Errorf("devices %s\nwant    %s", b, want)
	}
	if got := strings.Join(inv.UUIDs(), ","); got != "MIG-cccccccc-0000-4000-8000-000000000002" {
		t.Errorf("UUIDs %s", got)
	}
}

func TestProfile(t *testing.T) {
	// memorySizeMB as NVML reports the instances (nvidia-smi mig -lgip).
	for _, tt := range []struct {
		slices int
		mb     uint64
		want   string
	}{
		{1, 4864, "1g.5gb"},     // A100 40GB: 4.75 GiB
		{1, 9728, "1g.10gb"},    // A100 80GB: 9.5 GiB
		{3, 40192, "3g.40gb"},   // A100 80GB: 39.25 GiB, rounded up as nvidia-smi does
		{7, 81152, "7g.80gb"},   // A100 80GB
		{1, 16384, "1g.16gb"},   // exactly 16 GiB
		{1, 17920, "1g.18gb"},   // H200: 17.5 GiB
		{3, 72192, "3g.71gb"},   // H200: 70.5 GiB
		{7, 143360, "7g.140gb"}, // exactly 140 GiB
	} {
		if got := Profile(tt.slices, tt.mb); got != tt.want {
			t.Errorf("Profile(%d, %d) = %s, want %s", tt.slices, tt.mb, got, tt.want)
		}
	}
}

func TestShareOf(t *testing.T) {
	for _, tt := range []struct {
		d     Device
		whole float64
		want  float64
	}{
		{Device{}, 1, 1},
		{Device{}, 0.25, 0.25},
		{Device{MIG: &MIG{Slices: 1, TotalSlices: 7}}, 0.25, 1.0 / 7},
		{Device{MIG: &MIG{Slices: 7, TotalSlices: 7}}, 1, 1},
		{Device{MIG: &MIG{Slices: 2, TotalSlices: 4}}, 1, 0.5}, // A30
		{Device{MIG: &MIG{}}, 0.5, 1},                          // NVML gave no slice counts
		{Device{MIG: &MIG{Slices: 8, TotalSlices: 7}}, 1, 1},   // nonsense
	} {
		if got := ShareOf(tt.d, tt.whole); got != tt.want {
			t.Errorf("ShareOf(%+v, %v) = %v, want %v", tt.d.MIG, tt.whole, got, tt.want)
		}
	}
}
