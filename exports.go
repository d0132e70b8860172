package main

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/paddle-entrypoint/paddle-entrypoint/command"
	"github.com/paddle-entrypoint/paddle-entrypoint/config"
	"github.com/paddle-entrypoint/paddle-entrypoint/gate"
	"github.com/paddle-entrypoint/paddle-entrypoint/gpu"
	"github.com/paddle-entrypoint/paddle-entrypoint/labels"
	"github.com/paddle-entrypoint/paddle-entrypoint/otelresource"
	"github.com/paddle-entrypoint/paddle-entrypoint/textfile"
)

// commandEnv is the command's environment: the caller's, plus
// PADDLE_TASK_ID and, unless PADDLE_OTEL=off, the task's identity merged
// into OTEL_RESOURCE_ATTRIBUTES (the caller's attributes win).
func commandEnv(cfg config.Config, environ []string, set *labels.Set) []string {
	env := command.Env(environ, set.TaskID)
	if !cfg.OTel {
		return env
	}
	caller := lookupEnv(environ, otelresource.Var)
	return command.Setenv(env, otelresource.Var, otelresource.Merge(caller, otelresource.Attributes(set)))
}

// checkGate parses the quality gate before anything starts: a malformed
// PADDLE_GATE, or a gate where nothing is left to evaluate it (exec mode),
// is a usage error, never a surprise after hours of training. It returns
// nil when no gate is configured.
func checkGate(cfg config.Config, supervised bool) (*gate.Gate, error) {
	if cfg.Gate == "" && cfg.GateFile == "" {
		return nil, nil
	}
	switch {
	case cfg.Gate == "":
		return nil, errors.New("PADDLE_GATE_FILE is set but PADDLE_GATE is not: say which metrics must hold, e.g. PADDLE_GATE='accuracy>=0.95'")
	case cfg.GateFile == "":
		return nil, errors.New("PADDLE_GATE is set but PADDLE_GATE_FILE is not: name the JSON file of metrics the step writes")
	}
	g, err := gate.Parse(cfg.Gate)
	if err != nil {
		return nil, fmt.Errorf("PADDLE_GATE: %w", err)
	}
	if !supervised {
		return nil, errors.New("PADDLE_GATE needs supervise mode (PADDLE_ENTRYPOINT_MODE=supervise): in exec mode nothing is left to evaluate it after the command")
	}
	return g, nil
}

// writeTextfile writes the task's node_exporter textfile when
// PADDLE_TEXTFILE_DIR is set: first removing other tasks' files that claim
// this task's GPUs (unless PADDLE_GPU_SHARED=1). In exec mode nothing is
// left to remove the file at the end, so it is written only for a task with
// GPUs (the next task on them replaces it). It reports whether a file was
// written; every failure is a warning.
func writeTextfile(cfg config.Config, set *labels.Set, inv gpu.Inventory, supervised bool, log *slog.Logger) bool {
	if cfg.TextfileDir == "" {
		return false
	}
	if !supervised && set.GPUCount == 0 {
		log.Debug("no GPU: no textfile in exec mode (nothing would remove it)")
		return false
	}
	if !cfg.GPUShared {
		stale, err := textfile.RemoveStale(cfg.TextfileDir, set.TaskID, set.GPUUUIDs)
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
