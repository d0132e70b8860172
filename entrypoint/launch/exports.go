package launch

import (
	"errors"
	"fmt"

	"github.com/paddle-entrypoint/paddle-entrypoint/entrypoint/command"
	"github.com/paddle-entrypoint/paddle-entrypoint/entrypoint/config"
	"github.com/paddle-entrypoint/paddle-entrypoint/entrypoint/gate"
	"github.com/paddle-entrypoint/paddle-entrypoint/entrypoint/otelresource"
	"github.com/paddle-entrypoint/paddle-entrypoint/entrypoint/textfile"
)

// commandEnv is the command's environment: the caller's, plus
// PADDLE_TASK_ID and, unless PADDLE_OTEL=off, the task's identity merged
// into OTEL_RESOURCE_ATTRIBUTES (the caller's attributes win).
func (t *Task) commandEnv() []string {
	env := command.Env(t.environ, t.set.TaskID)
	if !t.cfg.OTel {
		return env
	}
	caller := lookupEnv(t.environ, otelresource.Var)
	return command.Setenv(env, otelresource.Var, otelresource.Merge(caller, otelresource.Attributes(t.set)))
}

// CheckGate parses the quality gate before anything starts: a malformed
// PADDLE_GATE, or a gate where nothing is left to evaluate it (a mode that
// does not outlive the command: exec), is a usage error, never a surprise
// after hours of training. It returns nil when no gate is configured.
func CheckGate(cfg *config.Config) (*gate.Gate, error) {
	// PADDLE_GATE_FILE alone does nothing: a template can set it for
	// every step and PADDLE_GATE only on the one to gate.
	if cfg.Gate == "" {
		return nil, nil
	}
	switch {
	case cfg.GateFile == "":
		return nil, errors.New("PADDLE_GATE is set but PADDLE_GATE_FILE is not: name the JSON file of metrics the step writes")
	}
	g, err := gate.Parse(cfg.Gate)
	if err != nil {
		return nil, fmt.Errorf("PADDLE_GATE: %w", err)
	}
	if !modeOf(cfg).outlivesCommand() {
		return nil, errors.New("PADDLE_GATE needs supervise mode (PADDLE_ENTRYPOINT_MODE=supervise): in exec mode nothing is left to evaluate it after the command")
	}
	return g, nil
}

// gate is the task's quality gate (nil: none), checked before the start.
func (t *Task) gate() (*gate.Gate, error) { return CheckGate(t.cfg) }

// writeTextfile writes the task's node_exporter textfile when
// PADDLE_TEXTFILE_DIR is set: first removing other tasks' files that claim
// this task's GPUs (unless PADDLE_GPU_SHARED=1). Where the mode does not
// outlive the command (exec) nothing is left to remove the file at the end,
// so it is written only for a task with GPUs (the next task on them
// replaces it). It reports whether a file was written; every failure is a
// warning.
func (t *Task) writeTextfile() bool {
	cfg, set, inv, log := t.cfg, t.set, t.inv, t.log
	if cfg.TextfileDir == "" {
		return false
	}
	if !t.mode.outlivesCommand() && set.GPUCount == 0 {
		log.Debug("no GPU: no textfile in exec mode (nothing would remove it)")
		return false
	}
	if !cfg.GPUShared {
		stale, err := textfile.RemoveStale(cfg.TextfileDir, set.TaskID, inv.Devices)
		if err != nil {
			log.Warn("textfile directory unreadable; stale files not checked", "err", err)
		}
		for _, s := range stale {
			if s.Err != nil {
				log.Warn("stale textfile claims this task's GPU but cannot be removed", "file", s.Path, "gpu", s.UUID, "err", s.Err)
			} else {
				log.Info("stale textfile removed: it claimed this task's GPU", "file", s.Path, "gpu", s.UUID)
			}
		}
	}
	path, err := textfile.Write(cfg.TextfileDir, set, inv.Devices)
	if err != nil {
		log.Warn("textfile not written; the task runs without it", "err", err)
		return false
	}
	log.Debug("textfile written", "file", path)
	return true
}

// finishTask runs when a supervised command has ended with code: it removes
// the task's textfile (written reports whether one was), and, when a gate
// is configured and the command exited 0, evaluates it. It returns the
// supervisor's exit status — code, or cfg.GateExit when the gate fails or
// its file is missing or unusable — and, for the completion, the gate's
// verdict and the metrics (nil when the gate was not evaluated: a command
// that failed is not gated, its own status stands).
func (t *Task) finishTask(g *gate.Gate, written bool, code int) (int, *gate.Result, map[string]float64) {
	cfg, set, log := t.cfg, t.set, t.log
	if written {
		if err := textfile.Remove(cfg.TextfileDir, set.TaskID); err != nil {
			log.Warn("textfile not removed", "err", err)
		}
	}
	if g == nil {
		return code, nil, nil
	}
	if code != 0 {
		log.Info("quality gate not evaluated: the command failed", "exit_code", code)
		return code, nil, nil
	}
	verdict, metrics := g.Evaluate(cfg.GateFile)
	if !verdict.Passed {
		log.Error("quality gate failed", "gate", verdict.Expr, "reason", verdict.Reason, "exit", cfg.GateExit)
		return cfg.GateExit, &verdict, metrics
	}
	log.Info("quality gate passed", "gate", verdict.Expr, "reason", verdict.Reason)
	return code, &verdict, metrics
}
