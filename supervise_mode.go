package main

import (
	"context"
	"log/slog"

	"github.com/paddle-entrypoint/paddle-entrypoint/config"
	"github.com/paddle-entrypoint/paddle-entrypoint/gpu"
	"github.com/paddle-entrypoint/paddle-entrypoint/labels"
	"github.com/paddle-entrypoint/paddle-entrypoint/register"
	"github.com/paddle-entrypoint/paddle-entrypoint/spool"
	"github.com/paddle-entrypoint/paddle-entrypoint/supervise"
)

// clearInheritedMask re-executes a supervisor started with blocked signals
// (see supervise.ClearInheritedMask); it returns when none were blocked.
func clearInheritedMask(environ []string, log *slog.Logger) {
	if err := supervise.ClearInheritedMask(environ); err != nil {
		log.Warn("signals blocked by the caller stay blocked for the command", "err", err)
	}
}

// superviseCommand runs the command as a child (supervise mode) once the
// labels file is written, and returns its exit status. A terminating
// signal received before it starts ends the start with 128+N, with nothing
// registered: the command never ran.
func superviseCommand(cfg config.Config, reaper *supervise.Reaper, fwd *supervise.Signals, set *labels.Set, inv gpu.Inventory, cmd supervise.Command,
	stopSignals func() (int, bool), finish func(context.Context, int, *register.Completion) int, log *slog.Logger) int {
	// The forwarder takes every signal over before the start's own catching
	// ends: none has its default action between the two.
	fwd.Caught()
	if status, stopped := stopSignals(); stopped {
		log.Warn("stopped by a signal before the command started; nothing registered", "exit", status)
		return status
	}
	t := supervise.Task{
		Signals:        fwd,
		Finish:         finish,
		Command:        cmd,
		Labels:         set,
		LabelsFile:     cfg.LabelsFile,
		CompleteBudget: cfg.CompleteBudget,
		Heartbeat:      cfg.Heartbeat,
		Sampling: gpu.SamplerOptions{Interval: cfg.GPUSample, Probe: probePath(cfg),
			GPUs: inv.Devices, Environ: cmd.Env, Logger: log, Children: reaper},
		Log: log,
	}
	if cfg.MonitorURL != "" {
		t.Monitor = func() supervise.Monitor {
			r := newRegistrar(cfg, log)
			c := &register.Completer{Client: r.Client, Logger: log}
			if q, ok := r.Queue.(*spool.Spool); ok {
				c.Queue = q
			}
			return supervise.Monitor{Registration: register.Body(set, inv), Registrar: r, Completer: c, Client: r.Client}
		}
	} else {
		log.Debug("no PADDLE_MONITOR_URL: nothing sent, nothing spooled")
	}
	return supervise.Run(reaper, t)
}

// finisher is the end of a supervised task before its completion: the
// textfile removed, the quality gate evaluated (exports.go).
func finisher(cfg config.Config, set *labels.Set, written bool, log *slog.Logger) func(context.Context, int, *register.Completion) int {
	g, _ := checkGate(cfg, true) // checked before the start
	return func(_ context.Context, code int, c *register.Completion) int {
		status, verdict, metrics := finishTask(cfg, g, set, written, code, log)
		c.Gate, c.Metrics = verdict, metrics
		return status
	}
}

// flushCompletions sends spooled completions whose registration is no
// longer pending, at most limit (0: all), adding to what a registration
// flush did (res).
func flushCompletions(ctx context.Context, client *register.Client, q *spool.Spool, limit int, res register.FlushResult, log *slog.Logger) (register.FlushResult, error) {
	c := &register.Completer{Client: client, Queue: q, Logger: log}
	cr, err := c.Flush(ctx, limit)
	if err != nil {
		log.Warn("spooled completions not sent: spool unusable", "err", err)
	}
	if cr.Delivered+cr.Dead > 0 {
		log.Info("spooled completions sent", "delivered", cr.Delivered, "dead", cr.Dead)
	}
	res.Delivered += cr.Delivered
	res.Dead += cr.Dead
	res.Failed += cr.Failed
	res.Pending += cr.Pending
	if cr.Stopped != nil {
		res.Stopped = cr.Stopped
	}
	return res, err
}
