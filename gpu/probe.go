package gpu

// The probe's process: started in the background, waited for within its
// timeout, killed when abandoned.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"syscall"
	"time"
)

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
