package gpu

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
)

// SamplerOptions configure a Sampler.
type SamplerOptions struct {
	// Probe is the probe executable, run as "Probe sample --interval
	// Interval KEY...", a key per GPU (Device.Key: a MIG instance's MIG
	// UUID, else the GPU's UUID).
	Probe string
	// Interval between samples (PADDLE_GPU_SAMPLE); 0 or less: no sampling.
	Interval time.Duration
	// GPUs are the task's GPUs (the inventory's devices), in the order of
	// the summaries; those without a key are left out. None: no sampling.
	GPUs []Device
	// Environ is the task's environment; the sampler runs with it, less
	// LD_BIND_NOW, as the inventory probe does.
	Environ []string
	// Root is where to look for the library and device nodes (see Options);
	// "" means "/". Unused by the sampler itself, which only samples GPUs
	// the inventory found, and kept for symmetry with Options.
	Root   string
	Logger *slog.Logger
	// Children starts the sampler when the caller owns waiting for children
	// (supervise mode); nil: the package waits for it itself.
	Children Children

	// firstLine bounds the wait for the first line when longer than three
	// intervals (minFirstLine); a test hook.
	firstLine time.Duration
}

// A GPU's summary is the completion body's entry of it (wire.GPUUsage),
// built here from the samples so that no other shape of it exists: with no
// sample, Samples is 0 and every measure nil (JSON null). UtilP95 is the
// 95th percentile of the utilisation in percent by the nearest-rank method
// (the smallest sampled value that at least 95 % of the samples are less
// than or equal to, the ceil(0.95·n)-th smallest: always one of the
// sampled values); IdleShare the fraction of the utilisation samples at
// 0 %; EnergyJoules what the GPU's total energy counter (a MIG instance's
// parent's) rose by between the first and the last sample that read it,
// × Share for a MIG instance or a shared GPU (a GPU's energy cannot be
// split by instance or process), which EnergyEstimated then says: nil with
// fewer than two readings, or when the counter went back (the driver
// reloaded).

// SummaryOf is the summary of a GPU that was not sampled: no sample, the
// entry's identity and share.
func SummaryOf(d Device) wire.GPUUsage {
	var g gpuStats
	return g.summary(d)
}

// Timing of the sampler's end. A sampler told to stop (stdin closed) gets
// stopGrace to exit, then it is killed and gets killGrace to be reaped; one
// stuck in the kernel is then left behind. Its pipes get drainGrace to be
// read to their end. Stop is bounded by their sum.
const (
	stopGrace  = 300 * time.Millisecond
	killGrace  = 300 * time.Millisecond
	drainGrace = 200 * time.Millisecond
	// minFirstLine: NVML's start (nvmlInit without persistence mode) takes
	// seconds on a large node, so a short interval must not kill a sampler
	// that is still starting.
	minFirstLine = 10 * time.Second
	// hangIntervals: a sampler silent this many intervals is hung.
	hangIntervals = 3
	// maxSampleLine bounds one line kept in memory (a line per sample for
	// 64 GPUs is about 4 KiB); longer lines are dropped.
	maxSampleLine = 16 << 10
)

// Sampler streams GPU utilisation and used memory from the probe's sampling
// mode into bounded summaries: per GPU a 101-bucket histogram of the
// utilisation (an integer percentage, so the percentile is exact), the
// sums and the peak memory. Its memory does not grow with the run time.
//
// Nothing the sampler does reaches the task: it fails only into its logs,
// and the summaries then say what was learnt (possibly nothing).
type Sampler struct {
	opt   SamplerOptions
	log   *slog.Logger
	gpus  []Device       // opt.GPUs with a key
	index map[string]int // key → position in gpus

	stop    chan struct{} // closed by Stop
	done    chan struct{} // closed when the sampler has ended
	alive   chan struct{} // a line arrived (capacity 1)
	once    sync.Once
	summary []wire.GPUUsage

	mu       sync.Mutex
	stats    []gpuStats      // per GPU, in order
	interval []intervalStats // per GPU: since the last TakeInterval
	seen     []bool          // per GPU: read in the line being recorded
	lines    int             // complete lines read
	badLines int             // lines dropped
}

// StartSampler starts the probe's sampling mode and returns at once. It
// never fails the caller: with nothing to sample (no GPU, Interval 0) it
// starts nothing, and a sampler that cannot start is logged. ctx ends the
// sampling early, as Stop does.
func StartSampler(ctx context.Context, opt SamplerOptions) *Sampler {
	s := &Sampler{
		opt:   opt,
		log:   opt.Logger,
		index: make(map[string]int, len(opt.GPUs)),
		stop:  make(chan struct{}),
		done:  make(chan struct{}),
		alive: make(chan struct{}, 1),
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	var keys []string
	for _, d := range opt.GPUs {
		if d.Key() == "" {
			continue
		}
		if _, dup := s.index[d.Key()]; !dup {
			s.index[d.Key()] = len(s.gpus)
		}
		s.gpus = append(s.gpus, d)
		keys = append(keys, d.Key())
	}
	s.stats = make([]gpuStats, len(s.gpus))
	s.interval = make([]intervalStats, len(s.gpus))
	s.seen = make([]bool, len(s.gpus))
	switch {
	case opt.Interval <= 0:
		s.log.Debug("GPU sampling off (PADDLE_GPU_SAMPLE is 0)")
		close(s.done)
		return s
	case len(s.gpus) == 0:
		s.log.Debug("GPU sampling off: the task has no GPU with a known UUID")
		close(s.done)
		return s
	case opt.Probe == "":
		s.log.Warn("GPU sampler could not start; the completion carries no GPU efficiency",
			"err", "no probe executable configured")
		close(s.done)
		return s
	}
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		s.log.Warn("GPU sampler could not start; the completion carries no GPU efficiency", "err", err)
		close(s.done)
		return s
	}
	argv := append([]string{opt.Probe, "sample", "--interval", opt.Interval.String(), "--"}, keys...)
	ch, err := startChild(opt.Children, opt.Probe, argv, probeEnv(opt.Environ), stdinR, s.read)
	stdinR.Close()
	if err != nil {
		stdinW.Close()
		s.log.Warn("GPU sampler could not start; the completion carries no GPU efficiency",
			"probe", opt.Probe, "err", err)
		close(s.done)
		return s
	}
	s.log.Debug("GPU sampler started", "pid", ch.pid, "interval", opt.Interval, "uuids", strings.Join(keys, ","))
	go s.watch(ctx, ch, stdinW)
	return s
}

// Stop ends the sampling and returns one summary per GPU with a key, in
// the order given. It takes at most about a second, whatever the probe does. Later
// calls return the same summaries.
func (s *Sampler) Stop() []wire.GPUUsage {
	s.once.Do(func() {
		close(s.stop)
		<-s.done // watch is bounded: stopGrace + killGrace + drainGrace
		s.mu.Lock()
		defer s.mu.Unlock()
		s.summary = make([]wire.GPUUsage, len(s.gpus))
		for i, d := range s.gpus {
			s.summary[i] = s.stats[i].summary(d)
		}
	})
	return s.summary
}

// endReason says why the sampler ended, once it was asked or made to.
type endReason int

const (
	running endReason = iota
	stopped           // Stop: stdin closed
	ctxDone           // ctx done
	hung              // no line for hangIntervals intervals
)

// watch owns the sampler's process: it kills one that hangs, ends it on
// Stop or when ctx is done, and logs how it ended.
func (s *Sampler) watch(ctx context.Context, ch *child, stdinW *os.File) {
	defer close(s.done)
	defer stdinW.Close()
	hang := time.NewTimer(max(hangIntervals*s.opt.Interval, s.firstLineBound()))
	defer hang.Stop()
	reason := running
	var grace <-chan time.Time
	killed := false
	stop, done, eof := s.stop, ctx.Done(), ch.stdoutDone
	for {
		select {
		case <-eof:
			// No line can come any more: the sampler is ending, and its
			// status is on the way; a silence now is not a hang.
			eof = nil
			hang.Stop()
		case <-s.alive:
			if reason == running && eof != nil {
				hang.Reset(hangIntervals * s.opt.Interval)
			}
		case <-hang.C:
			if reason == running && eof != nil {
				s.log.Warn("GPU sampler sent nothing for three intervals (a hung NVIDIA driver?); it is killed and sampling ends",
					"interval", s.opt.Interval, "pid", ch.pid)
				reason, killed = hung, true
				ch.kill()
				grace = time.After(killGrace)
			}
		case <-stop:
			stop = nil
			select {
			case ws, ok := <-ch.exited: // it had ended by itself: say how
				s.ended(ws, ok, reason, ch.finish(drainGrace))
				return
			default:
			}
			if reason == running {
				reason = stopped
				stdinW.Close() // the sampler exits at the end of its stdin
				grace = time.After(stopGrace)
			}
		case <-done:
			done = nil
			if reason == running {
				reason, killed = ctxDone, true
				ch.kill()
				grace = time.After(killGrace)
			}
		case <-grace:
			if !killed {
				killed = true
				ch.kill()
				grace = time.After(killGrace)
				continue
			}
			// Stuck in the kernel: it dies when the driver call returns, and
			// its status then goes to whoever reaps it.
			ch.finish(drainGrace)
			s.log.Warn("GPU sampler did not die after SIGKILL (stuck in the driver?); left behind", "pid", ch.pid)
			return
		case ws, ok := <-ch.exited:
			s.ended(ws, ok, reason, ch.finish(drainGrace))
			return
		}
	}
}

func (s *Sampler) firstLineBound() time.Duration {
	if s.opt.firstLine > 0 {
		return s.opt.firstLine
	}
	return minFirstLine
}

// ended logs how the sampler ended. Only an end nobody asked for is a
// warning; the hang was warned about when it was killed.
func (s *Sampler) ended(ws syscall.WaitStatus, ok bool, reason endReason, stderr string) {
	s.mu.Lock()
	lines, bad := s.lines, s.badLines
	s.mu.Unlock()
	attrs := []any{"lines", lines, "dropped_lines", bad}
	if stderr != "" {
		attrs = append(attrs, "stderr", stderr)
	}
	switch {
	case reason != running:
		if ok {
			attrs = append(attrs, "status", describeStatus(ws))
		}
		s.log.Debug("GPU sampler ended", attrs...)
	case !ok:
		s.log.Warn("GPU sampler ended, its exit status unknown; sampling ended", attrs...)
	case ws.Signaled() && crashSignal(ws.Signal()):
		s.log.Warn("the NVIDIA library crashed the GPU sampler; sampling ended, the task goes on",
			append(attrs, "signal", signalName(ws.Signal()))...)
	case ws.Signaled():
		s.log.Warn("GPU sampler killed; sampling ended, the task goes on",
			append(attrs, "signal", signalName(ws.Signal()))...)
	default:
		s.log.Warn("GPU sampler exited; sampling ended, the task goes on",
			append(attrs, "exit_code", ws.ExitStatus())...)
	}
}

func describeStatus(ws syscall.WaitStatus) string {
	if ws.Signaled() {
		return signalName(ws.Signal())
	}
	return "exit " + strconv.Itoa(ws.ExitStatus())
}

// read consumes the sampler's stdout line by line, in a fixed amount of
// memory. A line without its "\n" at the end (a sampler killed while
// writing) is dropped.
func (s *Sampler) read(r io.Reader) {
	br := bufio.NewReaderSize(r, 4096)
	line := make([]byte, 0, 4096)
	overlong := false
	for {
		frag, err := br.ReadSlice('\n')
		if !overlong && len(line)+len(frag) <= maxSampleLine {
			line = append(line, frag...)
		} else {
			overlong = true
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil {
			return
		}
		if overlong {
			s.record(nil, errors.New("sample line too long"))
		} else {
			sample, err := ParseSample(string(line[:len(line)-1]))
			s.record(sample, err)
		}
		line, overlong = line[:0], false
		select {
		case s.alive <- struct{}{}:
		default:
		}
	}
}

// record adds a parsed line to the summaries; the first bad line is warned
// about, the others counted.
func (s *Sampler) record(sample Sample, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lines++
	if err != nil {
		s.badLines++
		if s.badLines == 1 {
			s.log.Warn("GPU sampler wrote a line that is not a sample; it is dropped (are the probe and the entrypoint the same version?)",
				"err", err)
		}
		return
	}
	clear(s.seen) // a GPU named twice in one line counts once
	for _, r := range sample {
		i, ok := s.index[r.UUID]
		if !ok || s.seen[i] {
			continue
		}
		s.seen[i] = true
		s.stats[i].add(r)
		s.interval[i].add(r)
	}
}

// gpuStats is the bounded summary of one GPU's readings.
type gpuStats struct {
	samples   int
	utilHist  [101]uint64 // utilHist[p]: samples at p %
	utilCount uint64
	utilSum   uint64
	memPeak   uint64
	memKnown  bool
	// The energy counter's first and last readings (millijoules).
	energyFirst, energyLast uint64
	energyReadings          int
}

func (g *gpuStats) add(r Reading) {
	if r.HasEnergy {
		if g.energyReadings == 0 {
			g.energyFirst = r.Energy
		}
		g.energyLast = r.Energy
		g.energyReadings++
	}
	if !r.HasUtil && !r.HasMemory {
		return
	}
	g.samples++
	if r.HasUtil && r.Util <= 100 {
		g.utilHist[r.Util]++
		g.utilCount++
		g.utilSum += uint64(r.Util)
	}
	if r.HasMemory && (!g.memKnown || r.MemoryUsed > g.memPeak) {
		g.memPeak, g.memKnown = r.MemoryUsed, true
	}
}

func (g *gpuStats) summary(d Device) wire.GPUUsage {
	share := d.Share
	if share <= 0 {
		share = 1
	}
	out := wire.GPUUsage{UUID: d.UUID, Share: &share, Samples: int64(g.samples), EnergyEstimated: new(bool)}
	if d.MIG != nil {
		out.MIGUUID = d.MIG.UUID
	}
	if g.energyReadings >= 2 && g.energyLast >= g.energyFirst {
		j := float64(g.energyLast-g.energyFirst) / 1000
		if d.MIG != nil || share < 1 {
			j *= share
			*out.EnergyEstimated = true
		}
		out.EnergyJoules = &j
	}
	if g.memKnown {
		peak := int64(g.memPeak)
		out.MemoryUsedPeakBytes = &peak
	}
	if g.utilCount == 0 {
		return out
	}
	n := g.utilCount
	mean := float64(g.utilSum) / float64(n)
	idle := float64(g.utilHist[0]) / float64(n)
	rank := (95*n + 99) / 100 // ceil(0.95·n), in integers
	var p95 float64
	var seen uint64
	for p, c := range g.utilHist {
		seen += c
		if seen >= rank {
			p95 = float64(p)
			break
		}
	}
	out.UtilMean, out.UtilP95, out.IdleShare = &mean, &p95, &idle
	return out
}
