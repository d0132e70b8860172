// Package gpu counts the GPUs the training command will use.
//
// NVML is asked by a separate cgo executable, the probe
// (cmd/paddle-gpu-probe), never by this package: it is cgo-free, so the
// entrypoint that links it stays a static binary that LD_BIND_NOW, a wrong
// glibc, a crashing or a hung driver library cannot stop. Start runs the
// probe as a child process in the background; Wait returns its answer, or
// what could be learnt without it, at most Options.Timeout after Start.
//
// Guarantees:
//   - A container with no /dev/nvidia<N> device node and no libnvidia-ml.so.1
//     on the loader's search path runs no probe at all (a few system calls).
//   - Wait never returns later than Timeout after Start, and returns at once
//     when Start's context is done; a probe still running then is killed.
//   - A probe that crashes, hangs, fails or cannot start costs only the GPU
//     fields: device nodes are counted instead where they exist (Source
//     "device-nodes"), and the reason is logged.
//   - The devices are filtered by CUDA_VISIBLE_DEVICES as CUDA filters them
//     (see Select and Visible), so the count is what the training will see;
//     a GPU in MIG mode is never counted whole, only as its MIG instances.
//   - Every device carries its share of the physical GPU, in (0, 1].
package gpu

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Device is one GPU as NVML reports it inside the container.
type Device struct {
	// Index is NVML's index inside the container (indices are renumbered
	// per container; use the UUID to join with node-level metrics). For a
	// device counted from its device node, the node's rank by minor number.
	Index int    `json:"index"`
	UUID  string `json:"uuid"` // "GPU-...", "" when unknown
	Name  string `json:"name"` // e.g. "NVIDIA A100-SXM4-80GB"
	// MemoryTotalBytes is the GPU's memory, or a MIG instance's own.
	MemoryTotalBytes uint64 `json:"memory_total_bytes"`
	// Share is the fraction of the physical GPU the task holds, in (0, 1]:
	// slices / total_slices for a MIG instance, PADDLE_GPU_SHARE (default 1)
	// for a whole GPU. The probe leaves it 0 (and out of its report);
	// Probe.Wait sets it.
	Share float64 `json:"share,omitempty"`
	// MIG is set when the entry is a MIG instance: Index, UUID and Name
	// are then its parent GPU's (dcgm-exporter labels MIG series with the
	// parent's UUID), MemoryTotalBytes the instance's.
	MIG *MIG `json:"mig,omitempty"`
}

// MIG describes a MIG instance (a MIG device: one compute instance of one
// GPU instance).
type MIG struct {
	UUID              string `json:"uuid"` // "MIG-..."
	GPUInstanceID     int    `json:"gpu_instance_id"`
	ComputeInstanceID int    `json:"compute_instance_id"`
	// Profile is the GPU instance profile as nvidia-smi and dcgm-exporter's
	// GPU_I_PROFILE spell it, "1g.18gb" (see Profile).
	Profile string `json:"profile"`
	// Slices is the GPU instance's slice count (NVML's
	// gpuInstanceSliceCount); TotalSlices the parent's number of GPU
	// instance slices (7 on A100/H100/H200), which NVML reports as the
	// parent's maximum MIG device count.
	Slices      int `json:"slices"`
	TotalSlices int `json:"total_slices"`
}

// Key is what names the entry in the sampler's lines and the labels file's
// gpu_uuids: the MIG UUID of a MIG instance, else the GPU's UUID.
func (d Device) Key() string {
	if d.MIG != nil {
		return d.MIG.UUID
	}
	return d.UUID
}

// Inventory is what the training will see.
type Inventory struct {
	Devices       []Device
	DriverVersion string // "" when unknown
	// Source says where the count came from: "nvml", "device-nodes" or "none".
	Source string

	// What the probe reported of MIG, until filter has used it.
	mig   []Device
	migOn map[int]bool
}

// Sources of an Inventory.
const (
	SourceNVML        = "nvml"
	SourceDeviceNodes = "device-nodes"
	SourceNone        = "none"
)

// UUIDs returns the devices' keys in order (a MIG instance's MIG UUID, a
// GPU's UUID), leaving out empty ones.
func (inv Inventory) UUIDs() []string {
	var out []string
	for _, d := range inv.Devices {
		if k := d.Key(); k != "" {
			out = append(out, k)
		}
	}
	return out
}

// Options configure a probe.
type Options struct {
	// Probe is the probe executable. "" or a file that cannot be run
	// costs only the GPU fields.
	Probe string
	// Timeout bounds the probe (PADDLE_GPU_TIMEOUT). 0 means NVML is not
	// asked at all; device nodes are still counted.
	Timeout time.Duration
	// Environ is the task's environment: CUDA_VISIBLE_DEVICES (and the MIG
	// UUIDs of NVIDIA_VISIBLE_DEVICES) filter the devices, LD_LIBRARY_PATH
	// is searched for the library, and the probe runs with it, less
	// LD_BIND_NOW.
	Environ []string
	// Share is the share of each whole GPU (PADDLE_GPU_SHARE, already
	// checked to be in (0, 1]); 0 means 1. MIG instances ignore it.
	Share  float64
	Logger *slog.Logger
	// Root is where device nodes (Root/dev/nvidia<N>), the loader cache and
	// the standard library directories are looked for; "" means "/".
	// LD_LIBRARY_PATH is not under Root. A test hook: tests cannot create
	// /dev/nvidia0.
	Root string
	// Children starts the probe when the caller owns waiting for children
	// (supervise mode); nil: the package waits for its probe itself.
	Children Children
}

// reapGrace bounds how long Stop waits for a killed probe to be reaped. A
// probe stuck in the kernel (uninterruptible sleep) cannot die until the
// driver call returns; it is left behind rather than waited for.
const reapGrace = 100 * time.Millisecond

// maxOutput bounds what is kept of the probe's stdout and stderr.
const maxOutput = 64 << 10

// Probe is a GPU probe running in the background.
type Probe struct {
	opt      Options
	log      *slog.Logger
	ctx      context.Context
	start    time.Time
	result   chan outcome  // the probe's outcome, sent once
	finished chan struct{} // closed when the background work is over

	mu      sync.Mutex
	proc    *child // the running probe, until its status came
	stopped bool   // no probe may start any more

	once sync.Once
	inv  Inventory
}

// Start begins probing and returns at once, so the probe overlaps the rest
// of the start-up work. ctx ends the probe early (a signal before exec).
func Start(ctx context.Context, opt Options) *Probe {
	if opt.Root == "" {
		opt.Root = "/"
	}
	p := &Probe{
		opt:      opt,
		log:      opt.Logger,
		ctx:      ctx,
		start:    time.Now(),
		result:   make(chan outcome, 1),
		finished: make(chan struct{}),
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	if opt.Timeout <= 0 {
		// NVML is not asked; the device nodes are all there is to learn.
		p.result <- outcome{kind: disabled, nodes: deviceNodes(opt.Root)}
		close(p.finished)
		return p
	}
	// Deciding whether there is anything to probe takes a directory read
	// and a few stats; done here, a CPU container's start pays no goroutine
	// hand-off for it.
	o := outcome{nodes: deviceNodes(opt.Root)}
	if len(o.nodes) == 0 && p.findLibrary(&o) == "" {
		o.kind = nothingToProbe
		p.result <- o
		close(p.finished)
		return p
	}
	go p.run(o)
	return p
}

// outcome is what the background work learnt.
type outcome struct {
	kind     outcomeKind
	nodes    []string // /dev/nvidia<N>
	library  string   // where the library was found, when no node was
	report   *Report  // the probe's answer (kind answered)
	err      error    // why the probe did not start or answer
	signal   syscall.Signal
	stderr   string
	probeRan time.Duration
}

type outcomeKind int

const (
	nothingToProbe outcomeKind = iota // no node, no library: the probe was not run
	disabled                          // Timeout 0
	notStarted                        // the probe could not start
	answered                          // the probe exited 0 with a report
	failed                            // exited non-zero or said nothing readable
	crashed                           // killed by a signal
	timedOut                          // killed by Wait at the timeout
	cancelled                         // killed because Start's context ended
)

// run spawns the probe in the background and reports its outcome.
func (p *Probe) run(o outcome) {
	defer close(p.finished)
	p.spawn(&o)
	p.result <- o
}

func (p *Probe) findLibrary(o *outcome) string {
	o.library = findLibrary(p.opt.Root, lookupEnv(p.opt.Environ, "LD_LIBRARY_PATH"))
	return o.library
}

// spawn runs the probe to its end and records how it ended.
func (p *Probe) spawn(o *outcome) {
	if p.opt.Probe == "" {
		o.kind, o.err = notStarted, errors.New("no probe executable configured")
		return
	}
	var stdout limitedBuffer
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		o.kind = cancelled
		return
	}
	began := time.Now()
	ch, err := startChild(p.opt.Children, p.opt.Probe, []string{p.opt.Probe}, probeEnv(p.opt.Environ), nil,
		func(r io.Reader) { io.Copy(&stdout, r) })
	if err == nil {
		p.proc = ch
	}
	p.mu.Unlock()
	if err != nil {
		o.kind, o.err = notStarted, err
		return
	}
	ws, ok := <-ch.exited
	p.mu.Lock()
	p.proc = nil // no status may be signalled by pid after its status came
	p.mu.Unlock()
	o.probeRan = time.Since(began)
	o.stderr = ch.finish(reapGrace)
	switch {
	case !ok:
		o.kind, o.err = failed, errors.New("its exit status was lost (reaped elsewhere)")
	case ws.Signaled():
		o.kind, o.signal = crashed, ws.Signal()
	case ws.ExitStatus() != 0:
		o.kind, o.err = failed, fmt.Errorf("exit status %d", ws.ExitStatus())
	default:
		var r Report
		if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
			o.kind, o.err = failed, fmt.Errorf("unreadable answer: %w", err)
			return
		}
		o.kind, o.report = answered, &r
	}
}

// Wait returns the inventory, at most Timeout after Start, or at once when
// Start's context is done. It logs why when the count is not NVML's. Later
// calls return the same inventory.
func (p *Probe) Wait() Inventory {
	p.once.Do(func() {
		timer := time.NewTimer(time.Until(p.start.Add(p.opt.Timeout)))
		defer timer.Stop()
		var o outcome
		select {
		case o = <-p.result: // an answer already there wins over a due timer
		default:
			select {
			case o = <-p.result:
			case <-timer.C:
				o = p.abandon(timedOut)
			case <-p.ctx.Done():
				o = p.abandon(cancelled)
			}
		}
		p.inv = p.conclude(o)
	})
	return p.inv
}

// abandon kills the probe, unless its answer arrived meanwhile.
func (p *Probe) abandon(kind outcomeKind) outcome {
	p.kill()
	select {
	case o := <-p.result:
		if o.kind == answered {
			return o
		}
	default:
	}
	return outcome{kind: kind, nodes: deviceNodes(p.opt.Root)}
}

// Stop abandons the probe, killing its process if still running. It waits
// for the process to be reaped only briefly: a process stuck in the kernel
// is left behind rather than waited for.
func (p *Probe) Stop() {
	p.kill()
	timer := time.NewTimer(reapGrace)
	defer timer.Stop()
	select {
	case <-p.finished:
	case <-timer.C:
	}
}

func (p *Probe) kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = true
	if p.proc != nil {
		p.proc.kill()
	}
}

// conclude turns an outcome into the inventory, logging why it is not NVML's.
func (p *Probe) conclude(o outcome) Inventory {
	log := p.log
	inv := Inventory{Source: SourceNone}
	fallback := true
	switch o.kind {
	case nothingToProbe:
		log.Debug("no GPUs: no NVIDIA device node and no "+LibraryName+" on the loader's path; the GPU probe was not run",
			"dev", filepath.Join(p.opt.Root, "dev"))
	case disabled:
		log.Debug("PADDLE_GPU_TIMEOUT is 0: NVML not asked")
	case notStarted:
		log.Warn("GPU probe could not start; GPU fields come from device nodes, if any",
			"probe", p.opt.Probe, "err", o.err)
	case failed:
		log.Warn("GPU probe failed; GPU fields come from device nodes, if any",
			"probe", p.opt.Probe, "err", o.err, "stderr", o.stderr)
	case crashed:
		if crashSignal(o.signal) {
			log.Warn("the NVIDIA library crashed the GPU probe; the start goes on, GPU fields come from device nodes, if any",
				"signal", signalName(o.signal), "stderr", o.stderr)
		} else {
			log.Warn("GPU probe killed; GPU fields come from device nodes, if any",
				"signal", signalName(o.signal), "stderr", o.stderr)
		}
	case timedOut:
		log.Warn("NVML did not answer within PADDLE_GPU_TIMEOUT; the GPU probe was killed, GPU fields come from device nodes, if any",
			"timeout", p.opt.Timeout)
	case cancelled:
		log.Debug("GPU probe abandoned: the start is being stopped")
	case answered:
		fallback = p.concludeReport(o, &inv)
	}
	if fallback && len(o.nodes) > 0 {
		inv = Inventory{Source: SourceDeviceNodes, Devices: make([]Device, len(o.nodes)), DriverVersion: inv.DriverVersion}
		for i := range o.nodes {
			inv.Devices[i] = Device{Index: i}
		}
		log.Info("GPUs counted from device nodes", "source", SourceDeviceNodes,
			"nodes", strings.Join(o.nodes, ","))
	}
	p.filter(&inv)
	p.share(&inv)
	log.Debug("GPUs", "source", inv.Source, "count", len(inv.Devices),
		"uuids", strings.Join(inv.UUIDs(), ","), "driver", inv.DriverVersion,
		"probe_time", o.probeRan, "since_start", time.Since(p.start))
	return inv
}

// concludeReport reads the probe's report into inv; fallback is true when
// NVML gave no count.
func (p *Probe) concludeReport(o outcome, inv *Inventory) (fallback bool) {
	r := o.report
	for _, problem := range r.Problems {
		p.log.Warn("NVML query failed; the GPU is counted with what is known", "problem", problem)
	}
	inv.DriverVersion = r.DriverVersion
	if r.Error == nil {
		inv.Source, inv.Devices = SourceNVML, r.Devices
		inv.mig, inv.migOn = r.MIGDevices, map[int]bool{}
		for _, i := range r.MIGEnabled {
			inv.migOn[i] = true
		}
		return false
	}
	attrs := []any{"call", r.Error.Call, "code", r.Error.Code, "message", r.Error.Message}
	switch {
	case r.Error.Code == ReturnLibraryNotFound && len(o.nodes) > 0:
		p.log.Info(LibraryName+" did not load (is the 'utility' driver capability missing?)", attrs...)
	case r.Error.Code == ReturnLibraryNotFound:
		p.log.Debug("no GPUs: "+LibraryName+" did not load", append(attrs, "found", o.library)...)
	case r.Error.Code == ReturnDriverNotLoaded && len(o.nodes) == 0:
		p.log.Debug("no GPUs: NVML found no NVIDIA driver (a CPU node)", attrs...)
	default:
		p.log.Warn("NVML unusable; GPU fields come from device nodes, if any", attrs...)
	}
	return true
}

// filter applies CUDA_VISIBLE_DEVICES to inv and puts the MIG instances
// in place of the GPUs whose MIG mode is on (see Select).
func (p *Probe) filter(inv *Inventory) {
	value, set := lookupEnvOK(p.opt.Environ, "CUDA_VISIBLE_DEVICES")
	defer func() { inv.mig, inv.migOn = nil, nil }()
	if len(inv.Devices) == 0 {
		return
	}
	if inv.Source == SourceDeviceNodes {
		if !set {
			return
		}
		if mentionsUUID(value) {
			p.log.Warn("CUDA_VISIBLE_DEVICES names GPUs by UUID, which device nodes do not carry; every node is counted",
				"CUDA_VISIBLE_DEVICES", value)
			return
		}
		visible, err := Visible(inv.Devices, value)
		if err != nil {
			p.log.Warn("CUDA_VISIBLE_DEVICES names a device that does not exist", "err", err)
		}
		inv.Devices = visible
		return
	}
	nvidia := lookupEnv(p.opt.Environ, "NVIDIA_VISIBLE_DEVICES")
	visible, missing, err := Select(inv.Devices, inv.mig, inv.migOn, value, set, nvidia)
	if err != nil {
		p.log.Warn("CUDA_VISIBLE_DEVICES names a device that does not exist", "err", err)
	}
	for _, m := range missing {
		p.log.Warn("NVIDIA_VISIBLE_DEVICES names a MIG device that NVML does not list; it is not counted",
			"NVIDIA_VISIBLE_DEVICES", nvidia, "mig_uuid", m)
	}
	inv.Devices = visible
}

// share sets each device's share: slices / total_slices for a MIG
// instance, Options.Share (PADDLE_GPU_SHARE) for a whole GPU, device nodes
// included.
func (p *Probe) share(inv *Inventory) {
	whole := p.opt.Share
	if whole <= 0 || whole > 1 {
		whole = 1
	}
	for i := range inv.Devices {
		inv.Devices[i].Share = ShareOf(inv.Devices[i], whole)
	}
}

// probeEnv is the task's environment less LD_BIND_NOW: bound eagerly, the
// probe's hundreds of NVML symbols that no library provides at start would
// stop it before main.
func probeEnv(environ []string) []string {
	out := make([]string, 0, len(environ))
	for _, kv := range environ {
		if !strings.HasPrefix(kv, "LD_BIND_NOW=") {
			out = append(out, kv)
		}
	}
	return out
}

func lookupEnv(environ []string, key string) string {
	v, _ := lookupEnvOK(environ, key)
	return v
}

// lookupEnvOK returns the first value of key, as getenv does.
func lookupEnvOK(environ []string, key string) (string, bool) {
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v, true
		}
	}
	return "", false
}

// crashSignal reports whether s is a program fault rather than a kill.
func crashSignal(s syscall.Signal) bool {
	switch s {
	case syscall.SIGSEGV, syscall.SIGBUS, syscall.SIGFPE, syscall.SIGILL, syscall.SIGABRT, syscall.SIGSYS, syscall.SIGTRAP:
		return true
	}
	return false
}

func signalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGSEGV:
		return "SIGSEGV"
	case syscall.SIGBUS:
		return "SIGBUS"
	case syscall.SIGFPE:
		return "SIGFPE"
	case syscall.SIGILL:
		return "SIGILL"
	case syscall.SIGABRT:
		return "SIGABRT"
	case syscall.SIGSYS:
		return "SIGSYS"
	case syscall.SIGTRAP:
		return "SIGTRAP"
	case syscall.SIGKILL:
		return "SIGKILL"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGINT:
		return "SIGINT"
	}
	return fmt.Sprintf("signal %d", int(s))
}

// firstLine returns the first non-blank line of s, shortened for a log line.
func firstLine(s string) string {
	for _, line := range strings.Split(s, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			if len(line) > 300 {
				line = line[:300] + "..."
			}
			return line
		}
	}
	return ""
}

// limitedBuffer keeps the first maxOutput bytes written to it and discards
// the rest, so a babbling probe neither grows memory nor blocks on a pipe.
type limitedBuffer struct{ bytes.Buffer }

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := maxOutput - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}
