// Package launch is one start of a task, the product's steps in order:
// label the task, count its GPUs, write the labels file (and the
// node_exporter textfile), register the task with the monitor, then run
// the command, exec'd in place of the entrypoint or supervised as its
// child (a Mode). Monitoring never breaks training: every step but a
// refused label set or a command that cannot start ends in a warning.
//
// Guarantees: the command runs exactly as asked (its argv, environment
// plus PADDLE_TASK_ID and OTEL_RESOURCE_ATTRIBUTES, umask, limits, signal
// mask); a terminating signal before it starts ends the start with 128+N,
// the registration spooled (exec mode) or nothing registered (supervise
// mode); the start's own time is bounded by the GPU probe's timeout plus
// the registration budget (docs/contract.md, section 2).
package launch

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/entrypoint/command"
	"github.com/paddle-entrypoint/paddle-entrypoint/entrypoint/config"
	"github.com/paddle-entrypoint/paddle-entrypoint/entrypoint/drain"
	"github.com/paddle-entrypoint/paddle-entrypoint/entrypoint/earlysignal"
	"github.com/paddle-entrypoint/paddle-entrypoint/entrypoint/policy"
	"github.com/paddle-entrypoint/paddle-entrypoint/gpu"
	"github.com/paddle-entrypoint/paddle-entrypoint/internal/deliver"
	"github.com/paddle-entrypoint/paddle-entrypoint/internal/logging"
	"github.com/paddle-entrypoint/paddle-entrypoint/labels"
	"github.com/paddle-entrypoint/paddle-entrypoint/register"
	"github.com/paddle-entrypoint/paddle-entrypoint/spool"
)

// ExitRejected is the exit status of a start (or `labels`) whose labels
// enforce mode refuses, or whose policy file is unusable (`labels`).
const ExitRejected = 65

// probeName is the GPU probe executable, installed beside the entrypoint.
const probeName = "paddle-gpu-probe"

// gpuRootHook is a test hook, not a setting: the directory under which the
// GPU count looks for dev/nvidia<N> device nodes, the loader cache and the
// standard library directories, since tests cannot create /dev/nvidia0.
// Unset (production) means "/". See docs/gpu.md.
const gpuRootHook = "PADDLE_ENTRYPOINT_TEST_GPU_ROOT"

// backlogPerStart bounds the older pending entries one start sends.
const backlogPerStart = 20

// Task is one start: its settings, logger, environment, and what the
// steps found (the labels, the GPUs).
type Task struct {
	cfg     *config.Config
	log     *slog.Logger
	environ []string
	version string // the entrypoint's, for the User-Agent
	mode    Mode

	set *labels.Set
	inv gpu.Inventory
}

// New returns the start of a task with these settings and environment,
// logging to stderr; version is the entrypoint's.
func New(cfg *config.Config, environ []string, version string) *Task {
	return &Task{cfg: cfg, log: logging.New(os.Stderr, cfg.LogLevel, cfg.LogFormat),
		environ: environ, version: version, mode: modeOf(cfg)}
}

// Run is the product: labels, GPUs, labels file, registration, then the
// command. In exec mode it returns only when the command could not be
// started; in supervise mode, with the supervisor's exit status.
func (t *Task) Run(argv []string, start time.Time) int {
	cfg, log := t.cfg, t.log
	// Signals are caught first of all, in the background; supervise mode
	// starts its reaper, the one place that waits for children, before
	// the first child, the GPU probe.
	ctx, stopSignals := earlysignal.Watch(t.mode.catchers(t))
	logging.RouteStdLog(log)
	logging.Settings(log, cfg.Warnings)

	probe := gpu.Start(ctx, t.mode.gpuOptions(t.gpuOptions()))
	defer probe.Stop()

	// The policy file was read with the settings (config.Build): one
	// file decides both.
	pol, err := cfg.Policy, cfg.PolicyErr
	if err != nil {
		log.Error("label policy unusable; built-in rules apply", "err", err)
	}
	if rejected := t.checkLabels(pol); rejected {
		return ExitRejected
	}
	path, err := command.Resolve(argv[0], lookupEnv(t.environ, "PATH"))
	if err != nil {
		return t.cannotExec(err)
	}

	t.inv = probe.Wait()
	t.set.SetGPUs(len(t.inv.Devices), t.inv.UUIDs())
	log.Info("task labels", labelAttrs(t.set))

	if err := labels.WriteFile(cfg.LabelsFile, t.set); err != nil {
		log.Warn("labels file not written; the task runs without it", "err", err)
	}
	written := t.writeTextfile()

	cmd := Command{Path: path, Argv: argv, Env: t.commandEnv()}
	return t.mode.run(ctx, t, cmd, run{stopSignals: stopSignals, textfile: written, start: start})
}

// Command is the command to run: its resolved executable, argv and
// environment.
type Command struct {
	Path string
	Argv []string
	Env  []string
}

// run is what Run hands its mode besides the command.
type run struct {
	// stopSignals ends the start's watch for signals, and reports the
	// exit status 128+N when one arrived (earlysignal.Watch).
	stopSignals func() (status int, stopped bool)
	textfile    bool // a textfile was written
	start       time.Time
}

// registerTask delivers the registration within the budget, or spools it.
// The budget starts here: unused probe time is not lent to it. Without a
// monitor the body is not even built.
func (t *Task) registerTask(ctx context.Context) {
	cfg, log := t.cfg, t.log
	if cfg.MonitorURL == "" {
		log.Debug("no PADDLE_MONITOR_URL: nothing sent, nothing spooled")
		return
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.RegisterBudget)
	defer cancel()
	r := t.node().Registrar()
	r.Backlog = backlogPerStart
	r.OutageHold = cfg.OutageHold
	if r.Register(ctx, t.set.TaskID, register.Body(t.set, t.inv)) == register.Delivered && ctx.Err() == nil {
		if q, ok := r.Queue.(*spool.Queue); ok {
			drain.FlushCompletions(ctx, r, q.Spool(), backlogPerStart, deliver.FlushResult{}, log)
		}
	}
	if ctx.Err() == nil {
		drain.LogLegacy(ctx, r.Queue, log)
	}
}

// node is what the task's senders share: settings, logger, User-Agent.
func (t *Task) node() drain.Node {
	return drain.Node{Config: t.cfg, Log: t.log, UserAgent: "paddle-entrypoint/" + t.version}
}

// checkLabels parses the task's labels under the policy in force (nil:
// built-in rules only) and reports each problem. rejected is true when
// enforce mode refuses the start.
func (t *Task) checkLabels(pol *policy.Policy) (rejected bool) {
	mode := t.cfg.LabelsMode
	if pol != nil && pol.Mode != "" {
		mode = pol.Mode
	}
	host, _ := os.Hostname()
	set, problems := labels.Parse(t.environ, labels.Options{Policy: pol, Hostname: host, Now: time.Now()})
	t.set = set
	for _, p := range problems {
		switch {
		case p.Notice:
			t.log.Warn("label note", "var", p.Var, "rule", p.Rule)
		case mode == "enforce":
			rejected = true
			t.log.Error("label rejected", "var", p.Var, "rule", p.Rule)
		default:
			t.log.Warn("label dropped", "var", p.Var, "rule", p.Rule)
		}
	}
	return rejected
}

func (t *Task) gpuOptions() gpu.Options {
	cfg := t.cfg
	return gpu.Options{Probe: t.probePath(), Timeout: cfg.GPUTimeout, Environ: t.environ, Logger: t.log,
		Root: lookupEnv(t.environ, gpuRootHook), Share: cfg.GPUShare}
}

// probePath is the GPU probe's executable: the configured one, or the one
// installed beside the entrypoint.
func (t *Task) probePath() string {
	if t.cfg.GPUProbe != "" {
		return t.cfg.GPUProbe
	}
	if self, err := os.Executable(); err == nil {
		return filepath.Join(filepath.Dir(self), probeName)
	}
	return ""
}

func (t *Task) cannotExec(err error) int {
	t.log.Error("command cannot start", "err", err)
	if ce := (*command.Error)(nil); errors.As(err, &ce) {
		return ce.Status
	}
	return command.ExitNotExecutable
}

// labelAttrs returns the labels as one "labels" group, in file order: a
// label is the task's to name (PADDLE_LABEL_LEVEL), so it must not sit
// beside the record's own level, logger, msg and time, where a parser
// would keep the last of two equal keys. JSON nests the group; text writes
// labels.<key>.
func labelAttrs(s *labels.Set) slog.Attr {
	pairs := s.Pairs()
	attrs := make([]any, 0, len(pairs))
	for _, p := range pairs {
		attrs = append(attrs, slog.String(p.Key, p.Value))
	}
	return slog.Group("labels", attrs...)
}

func lookupEnv(environ []string, key string) string {
	for _, kv := range environ {
		if len(kv) > len(key) && kv[len(key)] == '=' && kv[:len(key)] == key {
			return kv[len(key)+1:]
		}
	}
	return ""
}
