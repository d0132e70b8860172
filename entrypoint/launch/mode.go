package launch

import (
	"context"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/entrypoint/command"
	"github.com/paddle-entrypoint/paddle-entrypoint/entrypoint/config"
	"github.com/paddle-entrypoint/paddle-entrypoint/entrypoint/earlysignal"
	"github.com/paddle-entrypoint/paddle-entrypoint/gpu"
)

// Mode is how the command runs once the labels file is written: exec'd in
// place of the entrypoint (the default) or supervised as its child
// (docs/supervise.md). A start asks its mode, never a flag, at each step
// where the two differ.
type Mode interface {
	// catchers are what the start's watch for signals runs in the
	// background, in order (nil: nothing): supervise mode's reaper, then
	// its forwarder (earlysignal.Watch).
	catchers(t *Task) (before, then func())
	// gpuOptions adjusts the GPU probe's options (supervise mode: the
	// reaper waits for the probe).
	gpuOptions(o gpu.Options) gpu.Options
	// outlivesCommand reports whether the entrypoint is still there when
	// the command ends, to remove the textfile and evaluate a gate.
	outlivesCommand() bool
	// run runs the command and returns the start's exit status.
	run(ctx context.Context, t *Task, cmd Command, r run) int
}

// modeOf is the mode cfg asks for.
func modeOf(cfg *config.Config) Mode {
	if cfg.Mode == config.ModeSupervise {
		return &superviseMode{}
	}
	return execMode{}
}

// execMode registers the task within the budget, then execs the command:
// after execve nothing of the entrypoint is left.
type execMode struct{}

func (execMode) catchers(*Task) (before, then func()) { return nil, nil }
func (execMode) gpuOptions(o gpu.Options) gpu.Options { return o }
func (execMode) outlivesCommand() bool                { return false }

func (execMode) run(ctx context.Context, t *Task, cmd Command, r run) int {
	t.registerTask(ctx)
	// From here to execve a signal gets the kernel's default action, as
	// after execve, never the Go runtime's exit 2 (which os/signal's Stop
	// alone would leave it to, as PID 1); Stop then waits for a signal
	// still on its way to the channel, which stopSignals looks at last.
	earlysignal.ResetDefault()
	earlysignal.Stop()
	if status, stopped := r.stopSignals(); stopped {
		t.log.Warn("stopped by a signal before exec; the registration is spooled", "exit", status)
		return status
	}
	t.log.Debug("exec", "path", cmd.Path, "since_start", time.Since(r.start))
	return t.cannotExec(command.Exec(cmd.Path, cmd.Argv, cmd.Env))
}
