package gpu

// What the probe's outcome becomes: the inventory, filtered by
// CUDA_VISIBLE_DEVICES and with each device's share, and why it is not
// NVML's when it is not.

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

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
