// Command bench measures paddle-entrypoint's start-up cost against the shell
// entrypoint it replaces, in one run on one machine, for `make bench`.
//
// Method: every measured program is given the same command, a static C
// stand-in for `true` (testdata/stamp.c) that writes CLOCK_MONOTONIC to a
// file as its first act; "time to exec" runs from just before the fork to
// that stamp. The programs of a scenario take turns within each iteration
// (the order rotates by one each iteration), so a burst of load on a shared
// machine hits them all alike, and the table reports medians and the
// p10–p90 spread. A small static C launcher (testdata/spawn.c) does the
// fork, the clock readings and the wait4, so that no measured process starts
// life as a copy of the benchmark's own Go process. CPU time and peak RSS are
// the rusage wait4 returns, which includes every child the process reaped
// (the GPU probe; the script's nvidia-smi, wc, date and curl): CPU is the
// sum, peak RSS the largest single process.
//
// Two kinds of container are reproduced: a CPU step (no NVIDIA library the
// loader can find, no device node, no nvidia-smi) and a GPU step (the fake
// NVML library from testdata with two GPUs; the script gets a compiled
// nvidia-smi stand-in that loads the same library). Each faces a local
// monitor that is up, refuses connections, accepts and never answers, or
// answers 503 for a while. Two floors run beside them: the stamp exec'd
// directly, and a minimal static Go program that imports net/http and execs
// the stamp.
package main

import (
	"debug/elf"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/test/bench/benchdoc"
)

// options are the benchmark's flags.
type options struct {
	entrypoint     string
	script         string
	smiSource      string
	fakeNVML       string
	fakeNVMLEnv    string
	iterations     int
	slowIterations int
	budget         time.Duration
	gpuTimeout     time.Duration
	margin         time.Duration
	unavailableFor time.Duration
	hangCap        time.Duration
	tmpfs          string
	doc            string
	steps          string
	scenarios      string
	outageStarts   int
}

func main() {
	var o options
	flag.StringVar(&o.entrypoint, "entrypoint", "bin/paddle-entrypoint", "the entrypoint binary (built by make build; the GPU probe is found beside it)")
	flag.StringVar(&o.script, "script", "test/bench/testdata/entrypoint.sh", "the shell entrypoint to compare with")
	flag.StringVar(&o.smiSource, "nvidia-smi-source", "test/bench/testdata/nvidia-smi.c", "C source of the script's nvidia-smi stand-in")
	flag.StringVar(&o.fakeNVML, "fake-nvml", "testdata/fakenvml/fakenvml.c", "C source of the fake libnvidia-ml.so.1")
	flag.StringVar(&o.fakeNVMLEnv, "fake-nvml-env", "FAKE_NVML_GPUS=2", "space-separated NAME=VALUE settings of the fake NVML for the GPU step")
	flag.IntVar(&o.iterations, "iterations", 40, "iterations of the fast scenario (monitor up)")
	flag.IntVar(&o.slowIterations, "slow-iterations", 5, "iterations of the slow scenarios (monitor down)")
	flag.DurationVar(&o.budget, "budget", 2*time.Second, "PADDLE_REGISTER_BUDGET given to the entrypoint")
	flag.DurationVar(&o.gpuTimeout, "gpu-timeout", 2*time.Second, "PADDLE_GPU_TIMEOUT given to the entrypoint")
	flag.DurationVar(&o.margin, "margin", 250*time.Millisecond, "stated margin: with the monitor down, every start must exec within budget + margin")
	flag.DurationVar(&o.unavailableFor, "unavailable-for", time.Second, "how long the 503 monitor answers 503, from the start of each run")
	flag.DurationVar(&o.hangCap, "cap", 10*time.Second, "a run that has not exec'd its command by then is killed and reported as not started")
	flag.StringVar(&o.tmpfs, "tmpfs", "/dev/shm", "tmpfs directory for the labels files (as /var/run is in a container)")
	flag.StringVar(&o.doc, "doc", "", "markdown file whose generated section to replace with the results (e.g. docs/benchmarks.md)")
	flag.StringVar(&o.steps, "steps", "cpu,gpu", "container kinds to run: cpu, gpu")
	flag.StringVar(&o.scenarios, "scenarios", "up,refused,hang,unavailable", "monitor scenarios to run")
	flag.IntVar(&o.outageStarts, "outage-starts", 10, "starts per wave of the outage row (outage.go); 0 skips it")
	flag.Parse()
	if err := benchmark(o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// step is a kind of container.
type step struct {
	key, title string
	path       string   // PATH of the container
	env        []string // LD_LIBRARY_PATH and the fake NVML's settings
	gpus       string   // the gpu_count both must write
}

// scenario is a behaviour of the monitor.
type scenario struct {
	key, title string
	mode       string
	slow       bool
}

var allScenarios = []scenario{
	{"up", "1. monitor up (200 at once)", monitorUp, false},
	{"refused", "2. connection refused", monitorRefused, true},
	{"hang", "3. accepts, never answers", monitorHang, true},
	{"unavailable", "4. 503 for a while", monitorUnavailable, true},
}

// result holds the samples of one program in one scenario of one step.
type result struct {
	step     step
	scenario scenario
	program  string
	samples  []sample
}

// Names of the measured programs, as the tables show them.
const (
	progScript     = "entrypoint.sh"
	progEntrypoint = "paddle-entrypoint"
	progNoMonitor  = "paddle-entrypoint, no PADDLE_MONITOR_URL"
	progTrue       = "floor: exec true"
	progGo         = "floor: Go + net/http"
)

// taskLabels are the labels of the benchmark's task, the same for everyone.
var taskLabels = []string{
	"PADDLE_TASK_NAME=resnet50-imagenet-run-1732950000007",
	"PADDLE_PROJECT=search_ranking",
	"PADDLE_OWNER=alice@example.com",
	"PADDLE_PRIORITY=high",
	"PADDLE_ENV=prod",
	"PADDLE_DURATION_EST=7200",
	"PADDLE_TRAINER_ID=0",
	"PADDLE_TRAINERS_NUM=1",
	"PADDLE_LABEL_COST_CENTER=cc-1024",
	"PADDLE_LABEL_TEAM=vision",
}

// systemPath is the container's PATH (Docker's default).
const systemPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

func benchmark(o options) error {
	machine := describeMachine()
	fmt.Fprintf(os.Stderr, "bench: %s\n", machine.oneLine())

	for _, p := range []*string{&o.entrypoint, &o.script, &o.smiSource, &o.fakeNVML} {
		abs, err := filepath.Abs(*p)
		if err != nil {
			return err
		}
		*p = abs
	}
	for _, p := range []string{o.entrypoint, o.script, o.smiSource} {
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("%w (see -h for the flag that names it)", err)
		}
	}
	probe := filepath.Join(filepath.Dir(o.entrypoint), "paddle-gpu-probe")
	var notes []string
	if _, err := os.Stat(probe); err != nil {
		notes = append(notes, "No GPU probe beside the entrypoint ("+probe+"): the entrypoint cannot count GPUs.")
	}

	work, err := os.MkdirTemp("", "paddle-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	if !isTmpfs(o.tmpfs) {
		return fmt.Errorf("-tmpfs %s is not a tmpfs", o.tmpfs)
	}
	shm, err := os.MkdirTemp(o.tmpfs, "paddle-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(shm)
	spoolDir := filepath.Join(work, "spool")
	smiDir := filepath.Join(work, "smi")
	libDir := filepath.Join(work, "lib")
	for _, d := range []string{spoolDir, smiDir, libDir} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return err
		}
	}

	// The helpers the benchmark builds.
	stamp := filepath.Join(work, "true-stamp")
	spawn := filepath.Join(work, "spawn")
	for _, h := range [][2]string{{stamp, "test/bench/testdata/stamp.c"}, {spawn, "test/bench/testdata/spawn.c"}} {
		if err := build(nil, "gcc", "-O2", "-static", "-o", h[0], h[1]); err != nil {
			fmt.Fprintln(os.Stderr, "bench: no static libc, building dynamic:", err)
			if err := build(nil, "gcc", "-O2", "-o", h[0], h[1]); err != nil {
				return err
			}
		}
	}
	static, err := isStatic(o.entrypoint)
	if err != nil {
		return err
	}
	gofloor := filepath.Join(work, "gofloor")
	cgo := "CGO_ENABLED=1"
	if static {
		cgo = "CGO_ENABLED=0"
	}
	if err := build([]string{cgo}, "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", gofloor, "./test/bench/gofloor"); err != nil {
		return err
	}
	smi := filepath.Join(smiDir, "nvidia-smi")
	if err := build(nil, "gcc", "-O2", "-o", smi, o.smiSource, "-ldl"); err != nil {
		return err
	}
	steps, err := chooseSteps(o, smi, smiDir, libDir, &notes)
	if err != nil {
		return err
	}
	scenarios, err := chooseScenarios(o.scenarios)
	if err != nil {
		return err
	}

	mon, err := newMonitor(o.unavailableFor)
	if err != nil {
		return err
	}
	defer mon.close()
	r, err := newRunner(shm, spoolDir, spawn, stamp, mon)
	if err != nil {
		return err
	}
	r.spoolCmd = o.entrypoint

	programs := map[string]contender{
		progScript:     {name: progScript, argv: []string{"/bin/bash", o.script}, labels: filepath.Join(shm, "script.labels")},
		progEntrypoint: {name: progEntrypoint, argv: []string{o.entrypoint}, labels: filepath.Join(shm, "entrypoint.labels"), spool: true},
		// A diagnostic beside scenario 1: the same start without the
		// registration, to split the entrypoint's cost from the HTTP round trip.
		progNoMonitor: {name: progNoMonitor, argv: []string{o.entrypoint}, labels: filepath.Join(shm, "entrypoint.labels"), spool: true, drop: "PADDLE_MONITOR_URL"},
		progTrue:      {name: progTrue},
		progGo:        {name: progGo, argv: []string{gofloor}},
		progSupervise: superviseContender(o.entrypoint, shm),
	}

	began := time.Now()
	var results []*result
	for _, st := range steps {
		for _, sc := range scenarios {
			names := []string{progScript, progEntrypoint, progSupervise}
			n := o.slowIterations
			if !sc.slow {
				names = append(names, progNoMonitor, progTrue, progGo)
				n = o.iterations
			}
			env := append([]string{
				"PATH=" + st.path,
				"HOME=" + shm,
				"MONITOR_URL=" + mon.url(sc.mode),
				"LABELS_FILE=" + programs[progScript].labels,
				"PADDLE_MONITOR_URL=" + mon.url(sc.mode),
				"PADDLE_LABELS_FILE=" + programs[progEntrypoint].labels,
				"PADDLE_REGISTER_BUDGET=" + o.budget.String(),
				"PADDLE_GPU_TIMEOUT=" + o.gpuTimeout.String(),
			}, st.env...)
			env = append(env, taskLabels...)
			fmt.Fprintf(os.Stderr, "bench: %s, %s: %d iterations\n", st.title, sc.title, n)

			byName := map[string]*result{}
			for _, name := range names {
				res := &result{step: st, scenario: sc, program: name}
				byName[name] = res
				results = append(results, res)
			}
			// One untimed round fills the page cache and warms the monitor.
			if !sc.slow {
				for _, name := range names {
					if _, err := r.run(programs[name], env, sc.mode, o.hangCap); err != nil {
						return err
					}
				}
			}
			for i := 0; i < n; i++ {
				for j := range names {
					name := names[(i+j)%len(names)]
					s, err := r.run(programs[name], env, sc.mode, o.hangCap)
					if err != nil {
						return fmt.Errorf("%s: %w", name, err)
					}
					if !s.started && r.lastErr != "" && !(name == progScript && sc.mode == monitorHang) {
						fmt.Fprintf(os.Stderr, "bench: %s did not exec its command (exit %d): %s\n", name, s.exit, r.lastErr)
					}
					byName[name].samples = append(byName[name].samples, s)
				}
			}
		}
	}

	outage, err := measureOutage(r, o, o.entrypoint, mon)
	if err != nil {
		return err
	}

	cost, err := measureSupervisor(o.entrypoint, shm, mon.url(monitorUp))
	if err != nil {
		return err
	}

	rep := &report{
		version:  entrypointVersion(o.entrypoint),
		opts:     o,
		machine:  machine,
		results:  results,
		sizes:    sizes(o.entrypoint, probe),
		static:   static,
		notes:    notes,
		duration: time.Since(began),
		loadEnd:  benchdoc.LoadAverage(),
	}
	text := rep.markdown() + outage.markdown() + cost.markdown()
	fmt.Print(text)
	if o.doc != "" {
		if err := replaceSection(o.doc, text); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "bench: wrote the results into %s\n", o.doc)
	}
	return nil
}

// chooseSteps prepares the container kinds asked for and checks that each is
// what it claims to be.
func chooseSteps(o options, smi, smiDir, libDir string, notes *[]string) ([]step, error) {
	var steps []step
	for _, k := range strings.Split(o.steps, ",") {
		switch strings.TrimSpace(k) {
		case "cpu":
			st := step{key: "cpu", title: "CPU step", path: systemPath, gpus: "0"}
			if err := checkCPUStep(smi, st); err != nil {
				return nil, err
			}
			steps = append(steps, st)
		case "gpu":
			if _, err := os.Stat(o.fakeNVML); err != nil {
				*notes = append(*notes, "GPU step not run: no fake NVML library source at "+o.fakeNVML+".")
				continue
			}
			if err := build(nil, "gcc", "-O2", "-shared", "-fPIC", "-o", filepath.Join(libDir, "libnvidia-ml.so.1"), o.fakeNVML); err != nil {
				return nil, err
			}
			st := step{key: "gpu", title: "GPU step", path: smiDir + ":" + systemPath, gpus: "2",
				env: append([]string{"LD_LIBRARY_PATH=" + libDir}, strings.Fields(o.fakeNVMLEnv)...)}
			if err := checkGPUStep(smi, st); err != nil {
				return nil, err
			}
			steps = append(steps, st)
		default:
			return nil, fmt.Errorf("-steps: unknown step %q (cpu, gpu)", k)
		}
	}
	return steps, nil
}

// checkCPUStep makes sure a CPU step has nothing to probe: no NVIDIA device
// node, no nvidia-smi on its PATH, and no libnvidia-ml.so.1 the loader can
// find (the nvidia-smi stand-in itself must fail to load it).
func checkCPUStep(smi string, st step) error {
	if nodes, _ := filepath.Glob("/dev/nvidia[0-9]*"); len(nodes) > 0 {
		return fmt.Errorf("CPU step: this machine has NVIDIA device nodes (%s); run the benchmark where there are none", strings.Join(nodes, " "))
	}
	for _, dir := range filepath.SplitList(st.path) {
		if _, err := os.Stat(filepath.Join(dir, "nvidia-smi")); err == nil {
			return fmt.Errorf("CPU step: nvidia-smi found in %s; run the benchmark where there is none", dir)
		}
	}
	cmd := exec.Command(smi)
	cmd.Env = []string{"PATH=" + st.path}
	if out, err := cmd.CombinedOutput(); err == nil {
		return fmt.Errorf("CPU step: the loader finds a libnvidia-ml.so.1 on this machine (nvidia-smi stand-in printed %q); run the benchmark where it finds none", out)
	}
	return nil
}

// checkGPUStep makes sure the fake NVML is found and shows two GPUs.
func checkGPUStep(smi string, st step) error {
	cmd := exec.Command(smi)
	cmd.Env = append([]string{"PATH=" + st.path}, st.env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("GPU step: the nvidia-smi stand-in fails with the fake NVML: %v: %s", err, out)
	}
	if n := strings.Count(string(out), "\n"); fmt.Sprint(n) != st.gpus {
		return fmt.Errorf("GPU step: the fake NVML shows %d GPUs, want %s (check -fake-nvml-env): %q", n, st.gpus, out)
	}
	return nil
}

func chooseScenarios(list string) ([]scenario, error) {
	var out []scenario
	for _, k := range strings.Split(list, ",") {
		k = strings.TrimSpace(k)
		found := false
		for _, sc := range allScenarios {
			if sc.key == k {
				out = append(out, sc)
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("-scenarios: unknown scenario %q (up, refused, hang, unavailable)", k)
		}
	}
	return out, nil
}

func build(env []string, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

// entrypointVersion is what `paddle-entrypoint version` prints.
func entrypointVersion(path string) string {
	out, err := exec.Command(path, "version").Output()
	if err != nil {
		return "unknown version"
	}
	return strings.TrimSpace(string(out))
}

// isStatic reports whether an ELF executable has no program interpreter.
func isStatic(path string) (bool, error) {
	f, err := elf.Open(path)
	if err != nil {
		return false, fmt.Errorf("%s: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return false, nil
		}
	}
	return true, nil
}

func isTmpfs(dir string) bool {
	const tmpfsMagic = 0x01021994
	var st syscall.Statfs_t
	return syscall.Statfs(dir, &st) == nil && st.Type == tmpfsMagic
}

// executableSize is a shipped executable and its size; -1 when absent.
type executableSize struct {
	name  string
	bytes int64
}

func sizes(paths ...string) []executableSize {
	var out []executableSize
	for _, p := range paths {
		es := executableSize{name: filepath.Base(p), bytes: -1}
		if fi, err := os.Stat(p); err == nil {
			es.bytes = fi.Size()
		}
		out = append(out, es)
	}
	return out
}

// machineInfo describes where the benchmark ran.
type machineInfo struct {
	cpus      int
	model     string
	kernel    string
	goVersion string
	loadStart string
}

func describeMachine() machineInfo {
	m := machineInfo{cpus: runtime.NumCPU(), model: "unknown", goVersion: runtime.Version(), loadStart: benchdoc.LoadAverage()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.model = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.kernel = strings.TrimSpace(string(b))
	}
	return m
}

func (m machineInfo) oneLine() string {
	return fmt.Sprintf("%d CPUs (%s), Linux %s, %s, load average %s", m.cpus, m.model, m.kernel, m.goVersion, m.loadStart)
}

// errNoSection is a doc file without the markers of its generated section.
var errNoSection = errors.New("no generated section")
