package launch

import (
	"context"
	"log/slog"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/entrypoint/config"
	"github.com/paddle-entrypoint/paddle-entrypoint/entrypoint/drain"
	"github.com/paddle-entrypoint/paddle-entrypoint/entrypoint/earlysignal"
	"github.com/paddle-entrypoint/paddle-entrypoint/entrypoint/supervise"
	"github.com/paddle-entrypoint/paddle-entrypoint/gpu"
	"github.com/paddle-entrypoint/paddle-entrypoint/internal/deliver"
	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
	"github.com/paddle-entrypoint/paddle-entrypoint/labels"
	"github.com/paddle-entrypoint/paddle-entrypoint/register"
	"github.com/paddle-entrypoint/paddle-entrypoint/spool"
)

// drainBatch is how many older spool entries of each kind one drain pass
// sends while the command runs.
const drainBatch = 5

// superviseMode runs the command as a child and reports how it ended
// (docs/supervise.md): the reaper waits for every child, the forwarder
// passes signals on, the hooks (taskReport) register, beat and complete.
type superviseMode struct {
	reaper *supervise.Reaper
	fwd    *supervise.Signals
}

// catchers starts the supervisor: a supervisor started with blocked
// signals is re-executed with them unblocked first (see
// supervise.ClearInheritedMask), then the reaper catches SIGCHLD (the GPU
// probe's start waits for it) and the forwarder every signal.
func (m *superviseMode) catchers(t *Task) (before, then func()) {
	if err := supervise.ClearInheritedMask(t.environ); err != nil {
		t.log.Warn("signals blocked by the caller stay blocked for the command", "err", err)
	}
	m.reaper = supervise.NewReaper(t.log)
	m.fwd = supervise.NewSignals()
	// The terminating signals stay on earlysignal's channel, which the
	// forwarder reads once the command runs: a second channel asking for
	// them next to it is what let a SIGTERM through to the Go runtime's
	// exit 2 as PID 1 (docs/supervise.md).
	m.fwd.Also(earlysignal.Channel())
	return m.reaper.Catch, m.fwd.Catch
}

func (m *superviseMode) gpuOptions(o gpu.Options) gpu.Options {
	o.Children = m.reaper
	return o
}

func (m *superviseMode) outlivesCommand() bool { return true }

// run runs the command as a child once the labels file is written, and
// returns its exit status. A terminating signal received before it starts
// ends the start with 128+N, with nothing registered: the command never ran.
func (m *superviseMode) run(_ context.Context, t *Task, cmd Command, r run) int {
	cfg, log := t.cfg, t.log
	// The forwarder takes every signal over before the start's own catching
	// ends: none has its default action between the two.
	m.fwd.Caught()
	if status, stopped := r.stopSignals(); stopped {
		log.Warn("stopped by a signal before the command started; nothing registered", "exit", status)
		return status
	}
	rep := &taskReport{cfg: cfg, set: t.set, inv: t.inv, node: t.node(), finish: t.finisher(r.textfile), log: log,
		sampling: gpu.SamplerOptions{Interval: cfg.GPUSample, Probe: t.probePath(),
			GPUs: t.inv.Devices, Environ: cmd.Env, Logger: log, Children: m.reaper}}
	st := supervise.Task{Command: supervise.Command{Path: cmd.Path, Argv: cmd.Argv, Env: cmd.Env, Group: cfg.SignalGroup},
		Signals: m.fwd, EndBudget: cfg.CompleteBudget, Log: log, OnStart: rep, OnBeat: rep, OnEnd: rep}
	if cfg.MonitorURL != "" {
		st.Heartbeat = cfg.Heartbeat
	} else {
		log.Debug("no PADDLE_MONITOR_URL: nothing sent, nothing spooled")
	}
	return supervise.Run(m.reaper, st)
}

// taskReport is what a supervised task reports, wired into supervise.Run's
// hooks: at the start the registration (alongside the command) and the GPU
// sampler, on each tick a heartbeat, at the end the completion. Run calls
// the hooks one at a time, in that order (see package supervise).
type taskReport struct {
	cfg      *config.Config
	set      *labels.Set
	inv      gpu.Inventory
	node     drain.Node
	sampling gpu.SamplerOptions
	// finish runs once the command has ended, before the completion is
	// written: it may fill the completion's gate and metrics, remove files
	// that lived as long as the command, and returns the supervisor's exit
	// status. It shares the completion budget.
	finish func(ctx context.Context, code int, c *wire.Completion) int
	log    *slog.Logger

	smp       *gpu.Sampler        // nil: no sampling
	reg       *register.Alongside // nil: no monitor
	registrar *register.Registrar
	completer *register.Completer
	beats     *register.Heartbeats
}

// Started starts the registration alongside the command, then the GPU
// sampler. Building the client, the spool and the body is no part of the
// time to the command: it runs once the command has started.
func (r *taskReport) Started(time.Time) {
	if r.cfg.MonitorURL != "" {
		r.registrar = r.node.Registrar()
		r.completer = &register.Completer{Client: r.registrar.Client, ClientFor: r.registrar.ClientFor, Check: r.registrar.Check, Logger: r.log}
		r.beats = &register.Heartbeats{Client: r.registrar.Client, Logger: r.log}
		if q, ok := r.registrar.Queue.(*spool.Queue); ok {
			r.completer.Queue = q.Spool().Completions()
			drain.LogLegacy(context.Background(), q, r.log)
		}
		// Its own context: Finish ends it, within the completion budget.
		r.reg = r.registrar.RegisterAlongside(context.Background(), r.set.TaskID, register.Body(r.set, r.inv), r.drain)
	}
	if r.sampling.Interval > 0 && len(r.inv.UUIDs()) > 0 {
		// Stopped by Ended.
		r.smp = gpu.StartSampler(context.Background(), r.sampling)
	}
}

// Beat posts a heartbeat: {task_id, time}, and with sampling on the
// interval's length and per-GPU samples. It is never spooled (only the
// latest matters); failures are logged at warning, at most once a minute
// (register.Heartbeats).
func (r *taskReport) Beat(ctx context.Context, t supervise.Tick) {
	var gpus []gpu.GPUInterval
	if r.smp != nil {
		gpus = r.smp.TakeInterval()
	}
	h := register.NewHeartbeat(r.set.TaskID, t.Since, t.Time, gpus)
	actx, cancel := context.WithTimeout(ctx, min(deliver.AttemptTimeout, r.cfg.Heartbeat))
	defer cancel()
	r.beats.Send(actx, h) // ticks come only with a monitor; Send logs
}

// Ended reports the command's end: the sampler's summaries, then finish
// (the gate, the textfile), then the completion, write-ahead first:
// Complete spools it, then runs the rest of the end (the labels file
// rewritten, the wait for the registration), so a supervisor killed at any
// moment after the command's end loses nothing. It is sent once the
// registration is no longer pending.
func (r *taskReport) Ended(ctx context.Context, e supervise.End) int {
	if !e.Ran {
		// What lives as long as the command (the textfile) goes; a
		// command that never ran is not gated and not reported.
		r.finish(ctx, e.Code, &wire.Completion{})
		return e.Code
	}
	comp := completion(r.set, r.inv, e)
	if r.smp != nil {
		comp.GPUs = register.Usage(r.smp.Stop())
	}
	status := r.finish(ctx, e.Code, &comp)
	if r.reg == nil {
		r.writeEnd(e)
		return status
	}
	// The registration's write-ahead comes before the completion's, so a
	// kill never leaves a completion without its registration; the drain
	// stops before the completion is spooled, so no drain pass sends it a
	// second time.
	r.reg.WaitWriteAhead(ctx)
	r.reg.StopDrain(ctx)
	r.completer.Complete(ctx, r.set.TaskID, register.MarshalCompletion(comp), func(ctx context.Context) register.Outcome {
		r.writeEnd(e)
		return r.reg.Finish(ctx)
	})
	return status
}

// writeEnd rewrites the labels file with the command's end.
func (r *taskReport) writeEnd(e supervise.End) {
	if err := labels.WriteEndFile(r.cfg.LabelsFile, r.set, e.Ended, e.Code); err != nil {
		r.log.Warn("labels file not rewritten with the end", "err", err)
	}
}

// drain sends a few older spool entries (registrations, then completions
// whose registration is no longer pending) and reports whether there may
// be more.
func (r *taskReport) drain(ctx context.Context) bool {
	regs, err := r.registrar.Flush(ctx, drainBatch)
	if err != nil || regs.Stopped != nil {
		return false
	}
	comps, err := r.completer.Flush(ctx, drainBatch)
	if err != nil || comps.Stopped != nil {
		return false
	}
	return regs.Delivered+regs.Dead == drainBatch || comps.Delivered+comps.Dead == drainBatch
}

// completion is the completion body of a command that ended as e on the
// GPUs of inv; the GPUs have no samples yet.
func completion(set *labels.Set, inv gpu.Inventory, e supervise.End) wire.Completion {
	dur := e.Duration().Seconds()
	var summaries []wire.GPUUsage
	for _, d := range inv.Devices {
		if d.Key() != "" {
			summaries = append(summaries, gpu.SummaryOf(d))
		}
	}
	return wire.Completion{
		TaskID:          set.TaskID,
		StartTime:       ptr(set.StartTime),
		EndTime:         ptr(e.Ended.Unix()),
		DurationSeconds: ptr(dur),
		ExitCode:        ptr(int64(e.Code)),
		Signal:          e.Signal,
		GPUCount:        ptr(int64(set.GPUCount)),
		GPUSeconds:      ptr(gpuShares(inv.Devices, set.GPUCount) * dur),
		GPUs:            register.Usage(summaries),
	}
}

func ptr[T any](v T) *T { return &v }

// gpuShares is how many whole GPUs a task held: the share of each device
// (a share outside (0, 1] counts as a whole GPU), plus one for each GPU
// counted beyond the devices (counted from device nodes: no key, no
// share). gpu_seconds is gpuShares × the duration (docs/contract.md,
// section 12).
func gpuShares(devices []gpu.Device, count int) float64 {
	shares := 0.0
	for _, d := range devices {
		share := d.Share
		if share <= 0 || share > 1 {
			share = 1
		}
		shares += share
	}
	if extra := count - len(devices); extra > 0 {
		shares += float64(extra)
	}
	return shares
}

// finisher is the end of a supervised task before its completion: the
// textfile removed, the quality gate evaluated (exports.go).
func (t *Task) finisher(written bool) func(context.Context, int, *wire.Completion) int {
	g, _ := t.gate() // checked before the start
	return func(_ context.Context, code int, c *wire.Completion) int {
		status, verdict, metrics := t.finishTask(g, written, code)
		c.Gate, c.Metrics = register.Verdict(verdict), metrics
		return status
	}
}
