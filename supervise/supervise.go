// Package supervise runs the training command as a child of the entrypoint
// (supervise mode, docs/supervise.md): the entrypoint stays as its parent,
// PID 1 of the container, and reports how the task ended.
//
// Guarantees:
//   - The command gets what exec mode gives it (argv, environment, cwd,
//     umask, rlimits, an empty signal mask, the dispositions exec mode
//     leaves, no descriptor of ours), and starts before anything touches
//     the network: the registration runs alongside it.
//   - Every catchable signal is forwarded to the command (or its process
//     group), but SIGCHLD, SIGURG, SIGTTIN, SIGTTOU and the fault signals;
//     a signal the caller ignored stays ignored and is not forwarded.
//   - One place waits for children (Reaper); orphans are reaped, as PID 1
//     or as a child subreaper.
//   - The exit status is the command's (128+N when killed by signal N);
//     reporting never changes it, and the time from the command's end to
//     Run's return is bounded by the completion budget.
package supervise

import (
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"syscall"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/command"
	"github.com/paddle-entrypoint/paddle-entrypoint/gpu"
	"github.com/paddle-entrypoint/paddle-entrypoint/labels"
	"github.com/paddle-entrypoint/paddle-entrypoint/register"
)

// drainBatch is how many older spool entries of each kind one drain pass
// sends while the command runs.
const drainBatch = 5

// Task is everything supervise mode needs to run and report one command.
type Task struct {
	Command Command
	// Signals forwards signals to the command; its Catch is called as
	// early in the start as possible, and Run waits until it has returned.
	Signals    *Signals
	Labels     *labels.Set
	LabelsFile string
	// Monitor, nil when no monitor is configured, returns how the task
	// reaches it. It is called once the command has started: building the
	// client, the spool and the body is no part of the time to the command.
	Monitor func() Monitor
	// CompleteBudget bounds the time from the command's end to Run's return.
	CompleteBudget time.Duration
	Heartbeat      time.Duration // 0: off
	// Sampling's GPUs are the task's GPUs (the inventory's devices): the
	// completion's gpus and gpu_seconds come from them, sampled or not.
	// No GPU with a key or no interval: no sampling.
	Sampling gpu.SamplerOptions
	// Finish, when set, runs once the command has ended, before the
	// completion is written: it may fill the completion's gate and metrics,
	// remove files that lived as long as the command, and returns the
	// supervisor's exit status (code, the command's, unless a quality gate
	// says otherwise). It shares the completion budget.
	Finish func(ctx context.Context, code int, c *register.Completion) int
	Log    *slog.Logger
}

// Monitor is how a task reaches the monitor.
type Monitor struct {
	Registration []byte // the registration body
	Registrar    *register.Registrar
	Completer    *register.Completer
	Client       *register.Client // for heartbeats
}

// Run starts the command, forwards signals to it, and once it has ended
// reports its completion; it returns the supervisor's exit status. The
// reaper must have been started before any child (the GPU probe's too).
func Run(r *Reaper, t Task) int {
	log := t.Log
	sigs := t.Signals
	sigs.Caught()
	c, err := startChild(r, t.Command)
	if err != nil {
		ce := command.StartError(t.Command.Argv[0], err)
		log.Error("command cannot start", "err", ce)
		if t.Finish != nil {
			// What lives as long as the command (the textfile) goes; a
			// command that never ran is not gated and not reported.
			t.Finish(context.Background(), ce.Status, &register.Completion{})
		}
		return ce.Status
	}
	sigs.forward(c.pid, c.group, log.Debug)
	log.Debug("command started", "pid", c.pid, "signal_group", c.group)

	ctx, cancel := context.WithCancel(context.Background())
	var reg *register.Alongside
	var m Monitor
	if t.Monitor != nil {
		m = t.Monitor()
		// Its own context: Finish ends it, within the completion budget.
		reg = m.Registrar.RegisterAlongside(context.Background(), t.Labels.TaskID, m.Registration, drainer(m))
	}
	if t.Heartbeat > 0 && m.Client != nil {
		go heartbeat(ctx, m.Client, t.Labels.TaskID, t.Heartbeat, log)
	}
	var smp *gpu.Sampler
	if t.Sampling.Interval > 0 && len(t.Sampling.GPUs) > 0 {
		smp = gpu.StartSampler(ctx, t.Sampling)
	}

	ws := <-c.exited
	ended := time.Now()
	sigs.end()
	budget, stop := context.WithDeadline(context.Background(), ended.Add(t.CompleteBudget))
	defer stop()
	code := exitCode(ws)
	comp := completion(t, c.started, ended, ws)
	if smp != nil {
		comp.GPUs = smp.Stop()
	}
	cancel() // heartbeats end with the command
	attrs := []any{"exit_code", code, "duration", ended.Sub(c.started).Round(time.Millisecond)}
	if comp.Signal != "" {
		attrs = append(attrs, "signal", comp.Signal)
	}
	log.Info("command ended", attrs...)

	status := code
	if t.Finish != nil {
		status = t.Finish(budget, code, &comp)
	}
	if reg == nil {
		writeEnd(t, ended, code)
		return status
	}
	// Write-ahead first: Complete spools the completion, then runs the
	// rest of the end (the labels file rewritten, the wait for the
	// registration), so a supervisor killed at any moment after the
	// command's end loses nothing. It is sent once the registration is no
	// longer pending.
	reg.WaitWriteAhead(budget)
	reg.StopDrain(budget)
	m.Completer.Complete(budget, t.Labels.TaskID, comp.Marshal(), func(ctx context.Context) bool {
		writeEnd(t, ended, code)
		return reg.Finish(ctx) != register.Spooled
	})
	return status
}

// writeEnd rewrites the labels file with the command's end.
func writeEnd(t Task, ended time.Time, code int) {
	if err := labels.WriteEndFile(t.LabelsFile, t.Labels, ended, code); err != nil {
		t.Log.Warn("labels file not rewritten with the end", "err", err)
	}
}

// completion is the completion body of a command that ran from started to
// ended and ended with ws.
func completion(t Task, started, ended time.Time, ws syscall.WaitStatus) register.Completion {
	dur := ended.Sub(started).Seconds()
	c := register.Completion{
		TaskID:          t.Labels.TaskID,
		StartTime:       t.Labels.StartTime,
		EndTime:         ended.Unix(),
		DurationSeconds: dur,
		ExitCode:        exitCode(ws),
		GPUCount:        t.Labels.GPUCount,
	}
	if ws.Signaled() {
		c.Signal = signalName(ws.Signal())
	}
	// gpu_seconds: Σ share × duration over the task's GPUs, those counted
	// from device nodes (no key, no entry in gpus) included.
	shares := 0.0
	for _, d := range t.Sampling.GPUs {
		share := d.Share
		if share <= 0 || share > 1 {
			share = 1
		}
		shares += share
		if d.Key() != "" {
			c.GPUs = append(c.GPUs, gpu.SummaryOf(d))
		}
	}
	if extra := t.Labels.GPUCount - len(t.Sampling.GPUs); extra > 0 {
		shares += float64(extra)
	}
	c.GPUSeconds = shares * dur
	return c
}

// drainer sends a few older spool entries (registrations, then
// completions whose registration is no longer pending) and reports whether
// there may be more.
func drainer(m Monitor) func(context.Context) bool {
	return func(ctx context.Context) bool {
		regs, err := m.Registrar.Flush(ctx, drainBatch)
		if err != nil || regs.Stopped != nil {
			return false
		}
		comps, err := m.Completer.Flush(ctx, drainBatch)
		if err != nil || comps.Stopped != nil {
			return false
		}
		return regs.Delivered+regs.Dead == drainBatch || comps.Delivered+comps.Dead == drainBatch
	}
}

// heartbeat posts {task_id, time} every interval until ctx is done. It is
// never spooled (only the latest matters); failures are logged at debug.
func heartbeat(ctx context.Context, c *register.Client, taskID string, every time.Duration, log *slog.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			body, _ := json.Marshal(struct {
				TaskID string `json:"task_id"`
				Time   int64  `json:"time"`
			}{taskID, now.Unix()})
			actx, cancel := context.WithTimeout(ctx, min(register.AttemptTimeout, every))
			err := c.SendHeartbeat(actx, taskID+"/heartbeat/"+strconv.FormatInt(now.Unix(), 10), body)
			cancel()
			if err != nil {
				log.Debug("heartbeat not delivered", "err", c.Redact(err.Error()))
			}
		}
	}
}
