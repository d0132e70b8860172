// Package supervise runs the training command as a child of the entrypoint
// (supervise mode, docs/supervise.md): the entrypoint stays its parent, PID
// 1 of the container, as tini would. It owns the child, the signals and the
// reaping, and nothing else: what the task reports, and to whom, is the
// caller's, reached through the small interfaces declared here (Starter,
// Beater, Ender), so the init runs and is tested without any monitor.
//
// Guarantees:
//   - The command gets what exec mode gives it (argv, environment, cwd,
//     umask, rlimits, an empty signal mask, the dispositions exec mode
//     leaves, no descriptor of ours), and starts before any hook runs.
//   - Every catchable signal is forwarded to the command (or its process
//     group), but SIGCHLD, SIGURG, SIGTTIN, SIGTTOU and the fault signals;
//     a signal the caller ignored stays ignored and is not forwarded. No
//     hook delays a forwarded signal (the forwarder runs on its own).
//   - One place waits for children (Reaper); orphans are reaped, as PID 1
//     or as a child subreaper.
//   - Hooks, in this order: Started once, right after the command started;
//     Beat every Task.Heartbeat while it runs, never two at once, never
//     once it has ended; Ended once, after the last Beat returned, with a
//     context that ends Task.EndBudget after the command's end. A Beat in
//     flight never delays the noticing of the command's end: its context
//     ends then. A command that cannot start gets Ended alone.
//   - The exit status is the one Ended returns; with no Ender, the
//     command's (128+N when killed by signal N). An Ender that honours its
//     context keeps the time from the command's end to Run's return within
//     the budget.
package supervise

import (
	"context"
	"log/slog"
	"syscall"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/entrypoint/command"
)

// Starter is told once the command has started. It runs before the
// command's end is acted on, so it should return quickly: long work goes
// to the background.
type Starter interface {
	Started(at time.Time)
}

// Beater is called on every heartbeat tick while the command runs, one
// call at a time, off the supervisor's loop. ctx ends when the command
// does; a call still running then is waited for, up to the end budget.
type Beater interface {
	Beat(ctx context.Context, t Tick)
}

// Ender is called once the command has ended and been reaped (or could
// not start). ctx ends at the end budget. It returns the supervisor's exit
// status: the command's (e.Code), unless the caller's own rules (a quality
// gate) say otherwise.
type Ender interface {
	Ended(ctx context.Context, e End) int
}

// Tick is one heartbeat tick.
type Tick struct {
	Time time.Time // now
	// Since is the previous tick given to Beat, or the command's start:
	// a tick dropped while a Beat ran leaves Since where it was.
	Since time.Time
}

// End is how the command ended.
type End struct {
	// Ran is false when the command could not start: Code is then exec
	// mode's status (126, 127) and the times are zero.
	Ran            bool
	Started, Ended time.Time // the command's start, and its reaping
	Code           int       // exit code, or 128+N when killed by signal N
	Signal         string    // the signal that killed it (SIGKILL), if one did
}

// Duration is the command's measured run time.
func (e End) Duration() time.Duration { return e.Ended.Sub(e.Started) }

// Task is what Run needs to run one command. Every hook may be nil.
type Task struct {
	Command Command
	// Signals forwards signals to the command; its Catch is called as
	// early in the start as possible, and Run waits until it has returned.
	Signals *Signals
	// Heartbeat is the interval between Beat calls; 0: no ticks.
	Heartbeat time.Duration
	// EndBudget bounds the time from the command's end to Run's return:
	// Ended's context ends then.
	EndBudget time.Duration
	OnStart   Starter
	OnBeat    Beater
	OnEnd     Ender
	Log       *slog.Logger
}

// Run starts the command, forwards signals to it, calls the hooks, and
// returns the supervisor's exit status once the command has ended. The
// reaper must have been started before any child (the GPU probe's too).
func Run(r *Reaper, t Task) int {
	log := t.Log
	sigs := t.Signals
	sigs.Caught()
	c, err := startChild(r, t.Command)
	if err != nil {
		ce := command.StartError(t.Command.Argv[0], err)
		log.Error("command cannot start", "err", ce)
		return t.ended(time.Now(), End{Code: ce.Status})
	}
	sigs.forward(c.pid, c.group, log.Debug)
	log.Debug("command started", "pid", c.pid, "signal_group", c.group)
	if t.OnStart != nil {
		t.OnStart.Started(c.started)
	}

	ws, ended := t.wait(c)
	sigs.end()
	e := End{Ran: true, Started: c.started, Ended: ended, Code: exitCode(ws)}
	attrs := []any{"exit_code", e.Code, "duration", e.Duration().Round(time.Millisecond)}
	if ws.Signaled() {
		e.Signal = signalName(ws.Signal())
		attrs = append(attrs, "signal", e.Signal)
	}
	log.Info("command ended", attrs...)
	return t.ended(ended, e)
}

// wait is the supervisor's loop: it waits for the command's end, starting
// a Beat on each tick when none is running, and returns the command's wait
// status and the time it was reaped, once the last Beat has returned (or
// the end budget is spent).
func (t Task) wait(c *child) (syscall.WaitStatus, time.Time) {
	var tick <-chan time.Time
	if t.Heartbeat > 0 && t.OnBeat != nil {
		tk := time.NewTicker(t.Heartbeat)
		defer tk.Stop()
		tick = tk.C
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	since := c.started
	var beating chan struct{} // closed when the Beat in flight returns
	for {
		select {
		case now := <-tick:
			if beating != nil {
				continue // dropped: one Beat at a time
			}
			beating = make(chan struct{})
			go func(tk Tick, done chan struct{}) {
				defer close(done)
				t.OnBeat.Beat(ctx, tk)
			}(Tick{Time: now, Since: since}, beating)
			since = now
		case <-beating:
			beating = nil
		case ws := <-c.exited:
			ended := time.Now()
			cancel()
			if beating != nil { // still running: its context has ended
				bound := time.NewTimer(time.Until(ended.Add(t.EndBudget)))
				defer bound.Stop()
				select {
				case <-beating:
				case <-bound.C:
					t.Log.Warn("a heartbeat outlived the command's end budget; the end goes on without it")
				}
			}
			return ws, ended
		}
	}
}

// ended calls Ended, its context ending EndBudget after end, and returns
// the exit status.
func (t Task) ended(end time.Time, e End) int {
	if t.OnEnd == nil {
		return e.Code
	}
	budget, stop := context.WithDeadline(context.Background(), end.Add(t.EndBudget))
	defer stop()
	return t.OnEnd.Ended(budget, e)
}
