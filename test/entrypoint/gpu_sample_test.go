package entrypoint

// Black-box tests of the GPU sampling mode (docs/contract.md, section 10): the
// built probe's "sample" mode against the fake libnvidia-ml.so.1, alone and
// under gpu.Sampler, as the supervisor runs it.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/gpu"
	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
)

// fakeNVMLNoUtil builds the fake library without
// nvmlDeviceGetUtilizationRates (a driver that lacks it), once.
var fakeNVMLNoUtil struct {
	once sync.Once
	dir  string
	err  error
}

func fakeNVMLNoUtilDir(t *testing.T) string {
	t.Helper()
	fakeNVMLNoUtil.once.Do(func() {
		fakeNVMLNoUtil.dir = filepath.Join(bin.dir, "fakenvml-noutil")
		if err := os.MkdirAll(fakeNVMLNoUtil.dir, 0o755); err != nil {
			fakeNVMLNoUtil.err = err
			return
		}
		out, err := exec.Command("gcc", "-O2", "-Wall", "-shared", "-fPIC", "-DFAKE_NVML_NO_UTILIZATION", "-o",
			filepath.Join(fakeNVMLNoUtil.dir, "libnvidia-ml.so.1"), "testdata/fakenvml/fakenvml.c").CombinedOutput()
		if err != nil {
			fakeNVMLNoUtil.err = fmt.Errorf("building the fake NVML without utilisation: %v\n%s", err, out)
		}
	})
	if fakeNVMLNoUtil.err != nil {
		t.Fatal(fakeNVMLNoUtil.err)
	}
	return fakeNVMLNoUtil.dir
}

// sampling is the built probe in sampling mode, its stdin a pipe the test
// holds and its stdout read line by line.
type sampling struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string // closed at the end of stdout
	began  time.Time
	stderr bytes.Buffer
	calls  string // FAKE_NVML_LOG
}

// startSampling runs "paddle-gpu-probe sample --interval interval uuids..."
// with the fake library of dir and the FAKE_NVML_* settings in env.
func startSampling(t *testing.T, dir string, interval string, uuids []string, env ...string) *sampling {
	t.Helper()
	s := &sampling{t: t, lines: make(chan string, 100), calls: filepath.Join(t.TempDir(), "calls")}
	args := append([]string{"sample", "--interval", interval}, uuids...)
	s.cmd = exec.Command(bin.probe, args...)
	s.cmd.Env = append([]string{"LD_LIBRARY_PATH=" + dir, "FAKE_NVML_LOG=" + s.calls}, env...)
	s.cmd.Stderr = &s.stderr
	var err error
	if s.stdin, err = s.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s.began = time.Now()
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(s.lines)
		br := bufio.NewReader(stdout)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			s.lines <- line
		}
	}()
	t.Cleanup(func() { s.cmd.Process.Kill() })
	return s
}

// next returns the next line, failing after a generous wait.
func (s *sampling) next() (string, time.Time) {
	s.t.Helper()
	select {
	case line, ok := <-s.lines:
		if !ok {
			s.t.Fatalf("stdout ended; stderr:\n%s", s.stderr.String())
		}
		return line, time.Now()
	case <-time.After(20 * time.Second):
		s.t.Fatal("no sample line within 20s")
	}
	return "", time.Time{}
}

// end closes stdin and returns how the probe exited and how long it took.
func (s *sampling) end() (code int, took time.Duration) {
	s.t.Helper()
	s.stdin.Close()
	began := time.Now()
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case err := <-done:
		return exitCode(err), time.Since(began)
	case <-time.After(20 * time.Second):
		s.t.Fatal("the probe did not exit within 20s of the end of its stdin")
	}
	return 0, 0
}

func TestGPUSampleLines(t *testing.T) {
	s := startSampling(t, fakeNVMLDir(t), "200ms", []string{fakeUUID(1), fakeUUID(0)},
		"FAKE_NVML_GPUS=2", "FAKE_NVML_UTIL=0,50,100", "FAKE_NVML_UTIL_1=7", "FAKE_NVML_USED_0=1000,2000",
		"FAKE_NVML_ENERGY_0=5000,7000")
	used1 := fmt.Sprint(85899345920 / 100) // the fake's default: 1 % of 80 GiB
	// Device 1's energy is the fake's default counter: 10⁹ mJ, 100 J more a reading.
	want := []string{
		"v2 " + fakeUUID(1) + "=7/" + used1 + "/1000000000 " + fakeUUID(0) + "=0/1000/5000\n",
		"v2 " + fakeUUID(1) + "=7/" + used1 + "/1000100000 " + fakeUUID(0) + "=50/2000/7000\n",
		"v2 " + fakeUUID(1) + "=7/" + used1 + "/1000200000 " + fakeUUID(0) + "=100/1000/5000\n",
		"v2 " + fakeUUID(1) + "=7/" + used1 + "/1000300000 " + fakeUUID(0) + "=0/2000/7000\n",
	}
	var times []time.Time
	for i, w := range want {
		line, at := s.next()
		if line != w {
			t.Errorf("line %d = %q, want %q", i, line, w)
		}
		times = append(times, at)
	}
	// A ticker never fires early: four lines span at least three intervals.
	if d := times[3].Sub(times[0]); d < 3*200*time.Millisecond-20*time.Millisecond {
		t.Errorf("4 lines in %v at a 200ms interval", d)
	}
	if code, took := s.end(); code != 0 || took > 2*time.Second {
		t.Errorf("after stdin closed: exit %d after %v, want 0 at once\nstderr:\n%s", code, took, s.stderr.String())
	}
	if s.stderr.Len() != 0 {
		t.Errorf("stderr: %s", s.stderr.String())
	}
	// NVML opened once, closed once at the end; only listed entry points
	// and the looked-up nvmlDeviceGetUtilizationRates and
	// nvmlDeviceGetTotalEnergyConsumption (no MIG call: no MIG UUID asked).
	b, _ := os.ReadFile(s.calls)
	calls := strings.Fields(string(b))
	allowed := []string{"nvmlInit_v2", "nvmlShutdown", "nvmlErrorString", "nvmlDeviceGetCount_v2",
		"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetUUID", "nvmlDeviceGetMemoryInfo", "nvmlDeviceGetUtilizationRates",
		"nvmlDeviceGetTotalEnergyConsumption"}
	for _, c := range calls {
		if !slices.Contains(allowed, c) {
			t.Errorf("unlisted NVML call %s", c)
		}
	}
	if len(calls) < 2 || calls[0] != "nvmlInit_v2" || calls[len(calls)-1] != "nvmlShutdown" ||
		slices.Index(calls[1:], "nvmlInit_v2") >= 0 {
		t.Errorf("calls %v: want one nvmlInit_v2 first and nvmlShutdown last", calls)
	}
}

func TestGPUSampleFirstLineAtOnce(t *testing.T) {
	// An hour's interval: the first line comes at once, and the end of stdin
	// ends the probe while it waits for the next.
	s := startSampling(t, fakeNVMLDir(t), "1h", []string{fakeUUID(0)}, "FAKE_NVML_UTIL=33")
	line, at := s.next()
	if want := "v2 " + fakeUUID(0) + "=33/858993459/1000000000\n"; line != want {
		t.Errorf("line %q, want %q", line, want)
	}
	t.Logf("first line %v after the start", at.Sub(s.began))
	if code, took := s.end(); code != 0 || took > 2*time.Second {
		t.Errorf("exit %d after %v, want 0 at once", code, took)
	}
}

func TestGPUSampleWithoutUtilizationSymbol(t *testing.T) {
	// A driver without nvmlDeviceGetUtilizationRates: a call would kill the
	// probe with "undefined symbol"; it is looked up and left out.
	s := startSampling(t, fakeNVMLNoUtilDir(t), "100ms", []string{fakeUUID(0)}, "FAKE_NVML_USED=42", "FAKE_NVML_ENERGY=77")
	for range 2 {
		if line, _ := s.next(); line != "v2 "+fakeUUID(0)+"=-/42/77\n" {
			t.Errorf("line %q", line)
		}
	}
	if code, _ := s.end(); code != 0 {
		t.Errorf("exit %d\nstderr:\n%s", code, s.stderr.String())
	}
	if !strings.Contains(s.stderr.String(), "nvmlDeviceGetUtilizationRates not in the NVIDIA library") {
		t.Errorf("stderr:\n%s", s.stderr.String())
	}
}

func TestGPUSampleUtilizationFails(t *testing.T) {
	s := startSampling(t, fakeNVMLDir(t), "100ms", []string{fakeUUID(0), "GPU-absent"},
		"FAKE_NVML_SAMPLE_MODE=unsupported", "FAKE_NVML_SAMPLE_OK=1", "FAKE_NVML_UTIL=9", "FAKE_NVML_USED=5", "FAKE_NVML_ENERGY=unsupported")
	for i, want := range []string{"=9/5/- GPU-absent=-/-/-\n", "=-/5/- GPU-absent=-/-/-\n", "=-/5/- GPU-absent=-/-/-\n"} {
		if line, _ := s.next(); line != "v2 "+fakeUUID(0)+want {
			t.Errorf("line %d %q, want the UUID and %q", i, line, want)
		}
	}
	s.end()
	errs := s.stderr.String()
	if strings.Count(errs, "nvmlDeviceGetUtilizationRates: Not Supported") != 1 || strings.Count(errs, "nvmlDeviceGetTotalEnergyConsumption: Not Supported") != 1 ||
		!strings.Contains(errs, "GPU-absent: no GPU with this UUID") {
		t.Errorf("stderr, want each failure once:\n%s", errs)
	}
}

func TestGPUSampleHungExitsAtEndOfStdin(t *testing.T) {
	// NVML hangs in the second sample: the end of stdin still ends the
	// probe, a second later, with exit status 3.
	s := startSampling(t, fakeNVMLDir(t), "100ms", []string{fakeUUID(0)}, "FAKE_NVML_SAMPLE_MODE=hang", "FAKE_NVML_SAMPLE_OK=1")
	s.next()
	time.Sleep(300 * time.Millisecond) // let it enter the hung call
	code, took := s.end()
	if code != 3 || took < time.Second || took > 5*time.Second {
		t.Errorf("exit %d after %v, want 3 about a second after stdin closed", code, took)
	}
	if !strings.Contains(s.stderr.String(), "an NVML call did not return") {
		t.Errorf("stderr:\n%s", s.stderr.String())
	}
}

func TestGPUSampleFailures(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  []string
		code int
		says string
	}{
		{"no UUID", []string{"sample", "--interval", "1s"}, nil, 2, "at least one UUID"},
		{"zero interval", []string{"sample", "--interval", "0s", fakeUUID(0)}, nil, 2, "must be positive"},
		{"bad interval", []string{"sample", "--interval", "soon", fakeUUID(0)}, nil, 2, "invalid argument"},
		{"unknown flag", []string{"sample", "--every", "1s", fakeUUID(0)}, nil, 2, "unknown flag"},
		{"unknown mode", []string{"watch"}, nil, 2, "usage:"},
		{"init fails", []string{"sample", "--interval", "1s", fakeUUID(0)}, []string{"FAKE_NVML_MODE=init_fail"}, 1, "nvmlInit_v2"},
		{"no such GPU", []string{"sample", "--interval", "1s", "GPU-absent"}, nil, 1, "none of the GPUs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := exec.Command(bin.probe, tt.args...)
			c.Env = append([]string{"LD_LIBRARY_PATH=" + fakeNVMLDir(t)}, tt.env...)
			var stdout, stderr bytes.Buffer
			c.Stdout, c.Stderr = &stdout, &stderr
			err := c.Run()
			if code := exitCode(err); code != tt.code || !strings.Contains(stderr.String(), tt.says) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr.String(), tt.code, tt.says)
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout %q", stdout.String())
			}
		})
	}
}

// samplerRun runs gpu.Sampler with the built probe and the fake library,
// and returns its summaries and its log records.
type samplerRun struct {
	logs bytes.Buffer
	mu   sync.Mutex
}

func (r *samplerRun) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.logs.Write(p)
}

// find returns the first record at level whose message holds part.
func (r *samplerRun) find(level, part string) map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, line := range strings.Split(r.logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["level"] == level && strings.Contains(m["msg"].(string), part) {
			return m
		}
	}
	return nil
}

func (r *samplerRun) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.logs.String()
}

// devicesOf is whole GPUs of the UUIDs, each of share 1.
func devicesOf(uuids []string) []gpu.Device {
	var out []gpu.Device
	for _, u := range uuids {
		out = append(out, gpu.Device{UUID: u, Share: 1})
	}
	return out
}

func startSampler(t *testing.T, uuids []string, env ...string) (*gpu.Sampler, *samplerRun) {
	t.Helper()
	run := &samplerRun{}
	s := gpu.StartSampler(context.Background(), gpu.SamplerOptions{
		Probe:    bin.probe,
		Interval: 200 * time.Millisecond,
		GPUs:     devicesOf(uuids),
		Environ:  append([]string{"LD_LIBRARY_PATH=" + fakeNVMLDir(t), "LD_BIND_NOW=1"}, env...),
		Logger:   slog.New(slog.NewJSONHandler(run, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	return s, run
}

// waitLog polls for a record.
func waitLog(t *testing.T, run *samplerRun, level, part string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if m := run.find(level, part); m != nil {
			return m
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no %s record saying %q:\n%s", level, part, run)
	return nil
}

func summariesJSON(t *testing.T, s []wire.GPUUsage) string {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestGPUSamplerHungDriver(t *testing.T) {
	// Five samples, then nvmlDeviceGetUtilizationRates never returns: the
	// sampler is killed three intervals later, and the five count.
	// Utilisation 0, 20, 40, 100, 100: mean 260/5 = 52; nearest rank
	// ceil(0.95·5) = 5 → 100; idle 1/5. Used memory 1, 5, 3, 1, 5: peak 5.
	// Energy: the fake's default counter, 100 J a reading: 4 × 100 J.
	s, run := startSampler(t, []string{fakeUUID(0)}, "FAKE_NVML_SAMPLE_MODE=hang", "FAKE_NVML_SAMPLE_OK=5",
		"FAKE_NVML_UTIL=0,20,40,100,100", "FAKE_NVML_USED=1,5,3")
	w := waitLog(t, run, "WARN", "sent nothing for three intervals")
	pid := int(w["pid"].(float64))
	deadline := time.Now().Add(5 * time.Second)
	for syscall.Kill(pid, 0) == nil && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the hung sampler %d still exists (%v)", pid, err)
	}
	want := `[{"uuid":"` + fakeUUID(0) + `","share":1,"samples":5,"util_mean":52,"util_p95":100,"memory_used_peak_bytes":5,"idle_share":0.2,"energy_joules":400,"energy_estimated":false}]`
	if got := summariesJSON(t, s.Stop()); got != want {
		t.Errorf("summaries %s\nwant       %s", got, want)
	}
}

func TestGPUSamplerCrashingDriver(t *testing.T) {
	// Three samples of two GPUs (six calls), then a SIGSEGV in the library.
	s, run := startSampler(t, []string{fakeUUID(0), fakeUUID(1)}, "FAKE_NVML_GPUS=2",
		"FAKE_NVML_SAMPLE_MODE=crash", "FAKE_NVML_SAMPLE_OK=6", "FAKE_NVML_UTIL=10,0,50", "FAKE_NVML_USED=7")
	w := waitLog(t, run, "WARN", "crashed the GPU sampler")
	if w["signal"] != "SIGSEGV" || w["lines"] != 3.0 {
		t.Errorf("crash record %v", w)
	}
	// Each GPU: 10, 0, 50: mean 20, p95 50, idle 1/3; energy 2 × 100 J.
	one := `"share":1,"samples":3,"util_mean":20,"util_p95":50,"memory_used_peak_bytes":7,"idle_share":0.3333333333333333,"energy_joules":200,"energy_estimated":false}`
	want := `[{"uuid":"` + fakeUUID(0) + `",` + one + `,{"uuid":"` + fakeUUID(1) + `",` + one + `]`
	if got := summariesJSON(t, s.Stop()); got != want {
		t.Errorf("summaries %s\nwant       %s", got, want)
	}
}

func TestGPUSamplerStops(t *testing.T) {
	// A healthy sampler, run with LD_BIND_NOW in the task's environment,
	// which it must not get: Stop ends it through its stdin, at once and
	// without a warning.
	calls := filepath.Join(t.TempDir(), "calls")
	s, run := startSampler(t, []string{fakeUUID(0)}, "FAKE_NVML_UTIL=100", "FAKE_NVML_LOG="+calls)
	w := waitLog(t, run, "DEBUG", "GPU sampler started")
	pid := int(w["pid"].(float64))
	// Two samples taken: the memory query is the last before a line.
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if b, _ := os.ReadFile(calls); strings.Count(string(b), "nvmlDeviceGetMemoryInfo") >= 2 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	began := time.Now()
	got := s.Stop()
	if d := time.Since(began); d > time.Second {
		t.Errorf("Stop took %v", d)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("sampler %d still exists after Stop (%v)", pid, err)
	}
	if len(got) != 1 || got[0].Samples < 2 || *got[0].UtilMean != 100 || *got[0].IdleShare != 0 {
		t.Errorf("summaries %s", summariesJSON(t, got))
	}
	if run.find("WARN", "") != nil {
		t.Errorf("warning:\n%s", run)
	}
	if e := waitLog(t, run, "DEBUG", "GPU sampler ended"); e["status"] != "exit 0" {
		t.Errorf("ended %v, want exit 0 at the end of its stdin", e)
	}
}
