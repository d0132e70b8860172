package gpu

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
)

// These tests run shell scripts as the sampler, writing sample lines as
// the probe's sampling mode does; the real probe against the fake NVML
// library is tested in test/entrypoint/gpu_sample_test.go.

func ptr[T any](v T) *T { return &v }

func TestSummaryMath(t *testing.T) {
	util := func(p uint8) Reading { return Reading{UUID: uuid0, Util: p, HasUtil: true} }
	both := func(p uint8, mem uint64) Reading {
		return Reading{UUID: uuid0, Util: p, HasUtil: true, MemoryUsed: mem, HasMemory: true}
	}
	var oneToTwenty, ninetyNine []Reading
	for p := range 20 {
		oneToTwenty = append(oneToTwenty, util(uint8(p+1)))
	}
	for range 99 {
		ninetyNine = append(ninetyNine, util(10))
	}
	energy := func(mJ ...uint64) []Reading {
		var out []Reading
		for _, e := range mJ {
			out = append(out, Reading{UUID: uuid0, Energy: e, HasEnergy: true})
		}
		return out
	}
	mig := &Device{UUID: uuid0, Share: 3.0 / 7, MIG: &MIG{UUID: mig0, Slices: 3, TotalSlices: 7}}
	tests := []struct {
		name     string
		gpu      *Device // nil: a whole GPU, share 1
		readings []Reading
		want     wire.GPUUsage
	}{
		{name: "no sample", want: wire.GPUUsage{UUID: uuid0}},
		// Energy: the last reading less the first, in joules; a reading
		// with only energy is no sample.
		{name: "energy", readings: energy(1_000_000_000, 1_000_100_000, 1_000_500_500),
			want: wire.GPUUsage{UUID: uuid0, EnergyJoules: ptr(500.5)}},
		{name: "one energy reading", readings: energy(1_000_000_000), want: wire.GPUUsage{UUID: uuid0}},
		{name: "energy counter went back", readings: energy(5000, 7000, 1000), want: wire.GPUUsage{UUID: uuid0}},
		// A MIG instance of 3 of 7 slices: the parent's 700 J × 3/7 = 300 J.
		{name: "MIG energy", gpu: mig, readings: energy(10_000, 710_000),
			want: wire.GPUUsage{UUID: uuid0, MIGUUID: mig0, Share: ptr(3.0 / 7), EnergyJoules: ptr(700 * (3.0 / 7)), EnergyEstimated: ptr(true)}},
		{name: "MIG without energy", gpu: mig, readings: []Reading{{UUID: mig0, MemoryUsed: 5, HasMemory: true}},
			want: wire.GPUUsage{UUID: uuid0, MIGUUID: mig0, Share: ptr(3.0 / 7), Samples: 1, Busy: wire.Busy{MemoryUsedPeakBytes: ptr(int64(5))}}},
		// A time-sliced GPU at PADDLE_GPU_SHARE=0.25: 400 J × 0.25.
		{name: "shared energy", gpu: &Device{UUID: uuid0, Share: 0.25}, readings: energy(0, 400_000),
			want: wire.GPUUsage{UUID: uuid0, Share: ptr(0.25), EnergyJoules: ptr(100.0), EnergyEstimated: ptr(true)}},
		// 0+0+50+100+30 = 180; 180/5 = 36. Nearest rank: ceil(0.95·5) = 5,
		// the largest, 100. Idle: 2 of 5.
		{name: "five", readings: []Reading{both(0, 10), both(0, 30), both(50, 20), both(100, 5), both(30, 25)},
			want: wire.GPUUsage{UUID: uuid0, Samples: 5, Busy: wire.Busy{UtilMean: ptr(36.0), UtilP95: ptr(100.0), MemoryUsedPeakBytes: ptr(int64(30)), IdleShare: ptr(0.4)}}},
		// 1..20: mean 210/20 = 10.5; rank ceil(19) = 19, the value 19; never idle.
		{name: "one to twenty", readings: oneToTwenty,
			want: wire.GPUUsage{UUID: uuid0, Samples: 20, Busy: wire.Busy{UtilMean: ptr(10.5), UtilP95: ptr(19.0), IdleShare: ptr(0.0)}}},
		// 99 at 10 % and one at 100 %: rank ceil(95) = 95 is still 10; mean
		// (990+100)/100 = 10.9.
		{name: "one spike in a hundred", readings: append(ninetyNine, util(100)),
			want: wire.GPUUsage{UUID: uuid0, Samples: 100, Busy: wire.Busy{UtilMean: ptr(10.9), UtilP95: ptr(10.0), IdleShare: ptr(0.0)}}},
		// Always idle.
		{name: "idle", readings: []Reading{util(0), util(0), util(0)},
			want: wire.GPUUsage{UUID: uuid0, Samples: 3, Busy: wire.Busy{UtilMean: ptr(0.0), UtilP95: ptr(0.0), IdleShare: ptr(1.0)}}},
		// Utilisation unsupported: samples of memory only.
		{name: "memory only", readings: []Reading{{UUID: uuid0, MemoryUsed: 7, HasMemory: true}, {UUID: uuid0, MemoryUsed: 3, HasMemory: true}},
			want: wire.GPUUsage{UUID: uuid0, Samples: 2, Busy: wire.Busy{MemoryUsedPeakBytes: ptr(int64(7))}}},
		// A reading with neither value is no sample.
		{name: "nothing read", readings: []Reading{{UUID: uuid0}, {UUID: uuid0}},
			want: wire.GPUUsage{UUID: uuid0}},
		// A used memory of 0 is a reading, not "unknown".
		{name: "zero memory", readings: []Reading{both(0, 0)},
			want: wire.GPUUsage{UUID: uuid0, Samples: 1, Busy: wire.Busy{UtilMean: ptr(0.0), UtilP95: ptr(0.0), MemoryUsedPeakBytes: ptr(int64(0)), IdleShare: ptr(1.0)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var g gpuStats
			for _, r := range tt.readings {
				g.add(r)
			}
			d := Device{UUID: uuid0, Share: 1}
			if tt.gpu != nil {
				d = *tt.gpu
			}
			got, _ := json.Marshal(g.summary(d))
			if tt.want.Share == nil {
				tt.want.Share = ptr(1.0)
			}
			if tt.want.EnergyEstimated == nil {
				tt.want.EnergyEstimated = ptr(false)
			}
			want, _ := json.Marshal(tt.want)
			if string(got) != string(want) {
				t.Errorf("summary = %s\nwant      %s", got, want)
			}
		})
	}
}

func TestSummaryJSONNulls(t *testing.T) {
	var g gpuStats
	got, _ := json.Marshal(g.summary(Device{UUID: uuid0}))
	want := `{"uuid":"` + uuid0 + `","share":1,"samples":0,"util_mean":null,"util_p95":null,"memory_used_peak_bytes":null,"idle_share":null,"energy_joules":null,"energy_estimated":false}`
	if string(got) != want {
		t.Errorf("no sample = %s, want %s", got, want)
	}
}

// samplerFixture runs a script as the sampler.
type samplerFixture struct {
	t    *testing.T
	dir  string
	opt  SamplerOptions
	logs *logBuffer
}

func newSamplerFixture(t *testing.T, body string) *samplerFixture {
	dir := t.TempDir()
	f := &samplerFixture{t: t, dir: dir, logs: &logBuffer{}}
	p := filepath.Join(dir, "probe.sh")
	src := "#!/bin/sh\necho $$ > '" + filepath.Join(dir, "pid") + "'\nprintf '%s\\n' \"$@\" > '" +
		filepath.Join(dir, "argv") + "'\n" + body + "\n"
	if err := os.WriteFile(p, []byte(src), 0o755); err != nil {
		t.Fatal(err)
	}
	f.opt = SamplerOptions{
		Probe:    p,
		Interval: 100 * time.Millisecond,
		GPUs:     []Device{{UUID: uuid0, Share: 1}, {UUID: uuid1, Share: 1}},
		Logger:   slog.New(slog.NewJSONHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	return f
}

// pid returns the script's pid, once it wrote it.
func (f *samplerFixture) pid() int {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(filepath.Join(f.dir, "pid")); err == nil && strings.HasSuffix(string(b), "\n") {
			var pid int
			fmt.Sscan(string(b), &pid)
			return pid
		}
		time.Sleep(5 * time.Millisecond)
	}
	f.t.Fatal("the sampler script never ran")
	return 0
}

// waitGone polls until pid no longer runs.
func waitGone(t *testing.T, pid int, within time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(within)
	for processAlive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("sampler %d still running after %v", pid, within)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Now()
}

// waitLogged polls for a record at level whose message holds part.
func waitLogged(t *testing.T, logs *logBuffer, level, part string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for logs.find(t, level, part) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("no %s record saying %q:\n%s", level, part, logs.buf.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// lines writes sample lines for the two GPUs: util and memory per pair.
func lines(values ...[2]string) string {
	var b strings.Builder
	for _, v := range values {
		fmt.Fprintf(&b, "printf 'v2 %s=%s/%s/- %s=-/-/-\\n'\n", uuid0, v[0], v[1], uuid1)
	}
	return b.String()
}

func summaryJSON(t *testing.T, s []wire.GPUUsage) string {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestSamplerSummaries(t *testing.T) {
	// Three lines, then wait for stdin to close, as the probe does.
	f := newSamplerFixture(t, lines([2]string{"0", "100"}, [2]string{"60", "300"}, [2]string{"90", "200"})+"exec cat > /dev/null")
	s := StartSampler(context.Background(), f.opt)
	pid := f.pid()
	waitLines(t, s, 3)
	began := time.Now()
	got := s.Stop()
	if d := time.Since(began); d > stopGrace {
		t.Errorf("Stop took %v, want the sampler to end at the end of its stdin", d)
	}
	if processAlive(pid) {
		t.Errorf("sampler %d still running after Stop", pid)
	}
	// uuid0: 0, 60, 90 → mean 50, p95 rank 3 → 90, idle 1/3, peak 300.
	want := `[{"uuid":"` + uuid0 + `","share":1,"samples":3,"util_mean":50,"util_p95":90,"memory_used_peak_bytes":300,"idle_share":0.3333333333333333,"energy_joules":null,"energy_estimated":false},` +
		`{"uuid":"` + uuid1 + `","share":1,"samples":0,"util_mean":null,"util_p95":null,"memory_used_peak_bytes":null,"idle_share":null,"energy_joules":null,"energy_estimated":false}]`
	if j := summaryJSON(t, got); j != want {
		t.Errorf("summaries = %s\nwant        %s", j, want)
	}
	argv, _ := os.ReadFile(filepath.Join(f.dir, "argv"))
	if want := "sample\n--interval\n100ms\n--\n" + uuid0 + "\n" + uuid1 + "\n"; string(argv) != want {
		t.Errorf("argv = %q, want %q", argv, want)
	}
	if w := f.logs.find(t, "WARN", ""); w != nil {
		t.Errorf("warning on a clean run: %v", w)
	}
	if again := s.Stop(); summaryJSON(t, again) != want {
		t.Errorf("a second Stop returned %s", summaryJSON(t, again))
	}
}

// waitLines polls until the sampler has read n lines.
func waitLines(t *testing.T, s *Sampler, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.lineCount() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d lines read, want %d", s.lineCount(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// lineCount is for tests: complete lines read so far.
func (s *Sampler) lineCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lines
}

func TestSamplerDropsBadAndPartialLines(t *testing.T) {
	body := lines([2]string{"40", "1"}) +
		"printf 'not a sample\\n'\n" +
		"printf 'v2 " + uuid0 + "=101/1/-\\n'\n" + // out of range: the whole line is dropped
		"printf 'v2 GPU-other=100/100/- " + uuid0 + "=20/2/- " + uuid0 + "=100/100/-\\n'\n" + // unknown GPU ignored, a repeat counts once
		"head -c 20000 /dev/zero | tr '\\0' 'x'; printf '\\n'\n" + // too long
		"printf 'v2 " + uuid0 + "=100/9/-'\n" + // no newline: killed mid-write
		"exit 0"
	f := newSamplerFixture(t, body)
	s := StartSampler(context.Background(), f.opt)
	waitLogged(t, f.logs, "WARN", "GPU sampler exited")
	got := s.Stop()
	// Kept: 40/1 and 20/2 → mean 30, p95 40, peak 2.
	want := `{"uuid":"` + uuid0 + `","share":1,"samples":2,"util_mean":30,"util_p95":40,"memory_used_peak_bytes":2,"idle_share":0,"energy_joules":null,"energy_estimated":false}`
	if j := summaryJSON(t, got[:1]); j != "["+want+"]" {
		t.Errorf("summary = %s\nwant        [%s]", j, want)
	}
	if w := f.logs.find(t, "WARN", "not a sample"); w == nil || !strings.Contains(w["err"].(string), "does not start with") {
		t.Errorf("no warning for the first bad line:\n%s", f.logs.buf.String())
	}
	if n := strings.Count(f.logs.buf.String(), "not a sample"); n != 1 {
		t.Errorf("%d warnings for bad lines, want one", n)
	}
	// It exited by itself, 0, while nobody asked: said.
	if w := f.logs.find(t, "WARN", "GPU sampler exited"); w == nil || w["exit_code"] != 0.0 || w["dropped_lines"] != 3.0 {
		t.Errorf("early exit not warned with its figures:\n%s", f.logs.buf.String())
	}
}

func TestSamplerHangIsKilled(t *testing.T) {
	// Two lines, then silence, ignoring stdin: after three intervals it is
	// killed, and what it said before counts.
	f := newSamplerFixture(t, lines([2]string{"10", "5"}, [2]string{"30", "6"})+"exec sleep 60")
	s := StartSampler(context.Background(), f.opt)
	pid := f.pid()
	waitLines(t, s, 2)
	lastLine := time.Now()
	gone := waitGone(t, pid, 10*time.Second)
	if d := gone.Sub(lastLine); d < hangIntervals*f.opt.Interval-20*time.Millisecond {
		t.Errorf("killed %v after the last line, before three intervals (%v)", d, hangIntervals*f.opt.Interval)
	}
	w := f.logs.find(t, "WARN", "sent nothing for three intervals")
	if w == nil || w["pid"] != float64(pid) {
		t.Fatalf("no hang warning:\n%s", f.logs.buf.String())
	}
	got := s.Stop()
	if got[0].Samples != 2 || *got[0].UtilMean != 20 || *got[0].MemoryUsedPeakBytes != 6 {
		t.Errorf("summary = %s", summaryJSON(t, got))
	}
	if n := len(f.logs.records(t)); f.logs.find(t, "WARN", "GPU sampler killed") != nil || n == 0 {
		t.Errorf("the kill of a hung sampler was warned twice:\n%s", f.logs.buf.String())
	}
}

func TestSamplerSilentFromStartIsKilled(t *testing.T) {
	f := newSamplerFixture(t, "exec sleep 60")
	f.opt.firstLine = 200 * time.Millisecond
	began := time.Now()
	s := StartSampler(context.Background(), f.opt)
	gone := waitGone(t, f.pid(), 10*time.Second)
	if d := gone.Sub(began); d < hangIntervals*f.opt.Interval {
		t.Errorf("killed after %v, before three intervals", d)
	}
	if f.logs.find(t, "WARN", "sent nothing for three intervals") == nil {
		t.Errorf("no hang warning:\n%s", f.logs.buf.String())
	}
	if j := summaryJSON(t, s.Stop()); strings.Count(j, `"samples":0`) != 2 || strings.Contains(j, `"util_mean":0`) {
		t.Errorf("summaries = %s, want no sample", j)
	}
}

func TestSamplerCrashIsLogged(t *testing.T) {
	f := newSamplerFixture(t, lines([2]string{"70", "8"})+"echo 'driver exploded' >&2\nkill -SEGV $$")
	s := StartSampler(context.Background(), f.opt)
	waitLogged(t, f.logs, "WARN", "crashed the GPU sampler")
	got := s.Stop()
	w := f.logs.find(t, "WARN", "crashed the GPU sampler")
	if w == nil || w["signal"] != "SIGSEGV" || w["stderr"] != "driver exploded" || w["lines"] != 1.0 {
		t.Errorf("crash warning = %v\n%s", w, f.logs.buf.String())
	}
	if got[0].Samples != 1 || *got[0].UtilMean != 70 {
		t.Errorf("the line before the crash is lost: %s", summaryJSON(t, got))
	}
}

func TestSamplerKilledFromOutside(t *testing.T) {
	f := newSamplerFixture(t, "exec sleep 60")
	s := StartSampler(context.Background(), f.opt)
	syscall.Kill(f.pid(), syscall.SIGKILL)
	waitLogged(t, f.logs, "WARN", "GPU sampler killed")
	if w := f.logs.find(t, "WARN", "GPU sampler killed"); w == nil || w["signal"] != "SIGKILL" {
		t.Errorf("no warning naming SIGKILL:\n%s", f.logs.buf.String())
	}
	s.Stop()
}

func TestSamplerStopIsBounded(t *testing.T) {
	// A sampler that ignores the end of its stdin and SIGTERM: Stop kills it.
	f := newSamplerFixture(t, "trap '' TERM\nwhile :; do sleep 1; done")
	s := StartSampler(context.Background(), f.opt)
	pid := f.pid()
	began := time.Now()
	s.Stop()
	if d := time.Since(began); d > stopGrace+killGrace+drainGrace+200*time.Millisecond {
		t.Errorf("Stop took %v", d)
	}
	waitGone(t, pid, 2*time.Second)
	if w := f.logs.find(t, "WARN", ""); w != nil {
		t.Errorf("Stop warned: %v", w)
	}
}

func TestSamplerContextEndsIt(t *testing.T) {
	f := newSamplerFixture(t, "exec cat > /dev/null")
	ctx, cancel := context.WithCancel(context.Background())
	s := StartSampler(ctx, f.opt)
	pid := f.pid()
	cancel()
	waitGone(t, pid, 2*time.Second)
	s.Stop()
	if w := f.logs.find(t, "WARN", ""); w != nil {
		t.Errorf("a cancelled sampler warned: %v", w)
	}
}

func TestSamplerNothingToSample(t *testing.T) {
	tests := []struct {
		name  string
		setup func(*SamplerOptions)
		level string
		says  string
	}{
		{"interval 0", func(o *SamplerOptions) { o.Interval = 0 }, "DEBUG", "sampling off"},
		{"no GPU", func(o *SamplerOptions) { o.GPUs = nil }, "DEBUG", "sampling off"},
		{"no probe", func(o *SamplerOptions) { o.Probe = "" }, "WARN", "could not start"},
		{"probe missing", func(o *SamplerOptions) { o.Probe += ".absent" }, "WARN", "could not start"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newSamplerFixture(t, "exit 0")
			tt.setup(&f.opt)
			children := &centralChildren{t: t}
			f.opt.Children = children
			got := StartSampler(context.Background(), f.opt).Stop()
			if len(got) != len(f.opt.GPUs) {
				t.Errorf("%d summaries for %d GPUs", len(got), len(f.opt.GPUs))
			}
			for _, g := range got {
				if g.Samples != 0 || g.UtilMean != nil || g.MemoryUsedPeakBytes != nil {
					t.Errorf("summary %+v, want no sample", g)
				}
			}
			if tt.name != "probe missing" && children.started() != 0 {
				t.Errorf("%d processes started", children.started())
			}
			if f.logs.find(t, tt.level, tt.says) == nil {
				t.Errorf("no %s line saying %q:\n%s", tt.level, tt.says, f.logs.buf.String())
			}
		})
	}
}

// centralChildren is the supervisor's side of Children as a test sees it:
// it starts processes and waits for each itself, as the one place that
// waits, holding each status back for a while, so that a package that
// learnt of an exit any other way would be seen acting early.
type centralChildren struct {
	t     *testing.T
	delay time.Duration

	mu       sync.Mutex
	starts   int
	reaped   []int // pids whose status wait4 returned here
	waitErrs []error
}

func (c *centralChildren) Start(path string, argv []string, attr *os.ProcAttr) (int, <-chan syscall.WaitStatus, error) {
	c.mu.Lock()
	c.starts++
	c.mu.Unlock()
	p, err := os.StartProcess(path, argv, attr)
	if err != nil {
		return 0, nil, err
	}
	pid := p.Pid
	p.Release() // the os.Process is not used to wait (Release sets its Pid to -1)
	exited := make(chan syscall.WaitStatus, 1)
	go func() {
		var ws syscall.WaitStatus
		_, err := syscall.Wait4(pid, &ws, 0, nil)
		c.mu.Lock()
		if err != nil {
			c.waitErrs = append(c.waitErrs, err) // ECHILD: someone else waited
		} else {
			c.reaped = append(c.reaped, pid)
		}
		c.mu.Unlock()
		time.Sleep(c.delay)
		exited <- ws
	}()
	return pid, exited, nil
}

func (c *centralChildren) started() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.starts
}

// check asserts every child was reaped here, and only here.
func (c *centralChildren) check(want int) {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c.mu.Lock()
		n, errs := len(c.reaped), c.waitErrs
		c.mu.Unlock()
		if len(errs) > 0 {
			c.t.Fatalf("the central wait failed (the package waited itself?): %v", errs)
		}
		if n == want && c.started() == want {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%d children reaped centrally of %d started, want %d", n, c.started(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestSamplerChildren(t *testing.T) {
	f := newSamplerFixture(t, lines([2]string{"25", "4"})+"echo boom >&2\nexit 7")
	children := &centralChildren{t: t, delay: 300 * time.Millisecond}
	f.opt.Children = children
	s := StartSampler(context.Background(), f.opt)
	pid := f.pid()
	waitGone(t, pid, 10*time.Second)
	exitedAt := time.Now()
	// The status is held back: the sampler cannot know it ended before it
	// is delivered.
	waitLogged(t, f.logs, "WARN", "GPU sampler exited")
	if d := time.Since(exitedAt); d < children.delay-50*time.Millisecond {
		t.Errorf("the exit was logged %v after it happened, before its status was delivered (%v)", d, children.delay)
	}
	w := f.logs.find(t, "WARN", "GPU sampler exited")
	if w == nil || w["exit_code"] != 7.0 || w["stderr"] != "boom" {
		t.Errorf("exit warning = %v\n%s", w, f.logs.buf.String())
	}
	if got := s.Stop(); got[0].Samples != 1 {
		t.Errorf("summaries = %s", summaryJSON(t, got))
	}
	children.check(1)
}

func TestSamplerChildrenStopAndHang(t *testing.T) {
	// Stop (end of stdin) and the hang kill go through pids and the
	// delivered status alone.
	for _, body := range []string{"exec cat > /dev/null", "exec sleep 60"} {
		t.Run(body, func(t *testing.T) {
			f := newSamplerFixture(t, lines([2]string{"1", "1"})+body)
			children := &centralChildren{t: t}
			f.opt.Children = children
			s := StartSampler(context.Background(), f.opt)
			pid := f.pid()
			waitLines(t, s, 1)
			if strings.Contains(body, "sleep") {
				waitGone(t, pid, 10*time.Second) // killed as hung
			}
			s.Stop()
			waitGone(t, pid, 2*time.Second)
			children.check(1)
		})
	}
}

func TestProbeChildren(t *testing.T) {
	// The inventory probe goes through Children too: its answer counts only
	// once its status is delivered.
	f := newFixture(t).library().answer(twoA100s())
	children := &centralChildren{t: t, delay: 300 * time.Millisecond}
	f.opt.Children = children
	inv, elapsed := f.wait(context.Background())
	if inv.Source != SourceNVML || len(inv.Devices) != 2 {
		t.Errorf("inventory = %+v", inv)
	}
	if elapsed < children.delay {
		t.Errorf("Wait returned after %v, before the status was delivered (%v)", elapsed, children.delay)
	}
	children.check(1)
}

func TestProbeChildrenTimeout(t *testing.T) {
	// A hung probe is killed by pid; its status still reaches the caller's
	// reaper, never the package.
	f := newFixture(t).library().nodes(0).script("exec sleep 60")
	f.opt.Timeout = 200 * time.Millisecond
	children := &centralChildren{t: t}
	f.opt.Children = children
	inv, _ := f.wait(context.Background())
	if inv.Source != SourceDeviceNodes {
		t.Errorf("inventory = %+v", inv)
	}
	children.check(1)
}

// BenchmarkSamplerLine is the entrypoint's cost of one sample line of eight
// GPUs: reading, parsing and adding it to the summaries.
func BenchmarkSamplerLine(b *testing.B) {
	var uuids []string
	var sample Sample
	for i := range 8 {
		u := fmt.Sprintf("GPU-a1b2c3%02x-8f2d-4c1b-9a3e-1c2d3e4f5a%02x", i, i)
		uuids = append(uuids, u)
		sample = append(sample, Reading{UUID: u, Util: uint8(i * 12), HasUtil: true, MemoryUsed: 80 << 30, HasMemory: true})
	}
	line := sample.AppendText(nil)
	s := &Sampler{log: slog.New(slog.DiscardHandler),
		index: map[string]int{}, alive: make(chan struct{}, 1), stats: make([]gpuStats, len(uuids)), seen: make([]bool, len(uuids))}
	for i, u := range uuids {
		s.index[u] = i
		s.gpus = append(s.gpus, Device{UUID: u, Share: 1})
	}
	r := &repeatReader{line: line, n: b.N}
	b.ReportAllocs()
	b.SetBytes(int64(len(line)))
	b.ResetTimer()
	s.read(r)
	if s.lines != b.N || s.stats[7].samples != b.N {
		b.Fatalf("%d lines read, %d samples, want %d", s.lines, s.stats[7].samples, b.N)
	}
}

// repeatReader yields line n times.
type repeatReader struct {
	line []byte
	n    int
	off  int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, io.EOF
	}
	c := copy(p, r.line[r.off:])
	if r.off += c; r.off == len(r.line) {
		r.off, r.n = 0, r.n-1
	}
	return c, nil
}
