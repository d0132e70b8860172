// Command paddle-entrypoint is the ENTRYPOINT of PaddlePaddle GPU images: it
// labels the task, counts its GPUs, writes the labels file, registers the
// task with the monitor (spooling what it cannot deliver), and execs the
// training command. Monitoring never breaks training.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/command"
	"github.com/paddle-entrypoint/paddle-entrypoint/config"
	"github.com/paddle-entrypoint/paddle-entrypoint/earlysignal"
	"github.com/paddle-entrypoint/paddle-entrypoint/gpu"
	"github.com/paddle-entrypoint/paddle-entrypoint/labels"
	"github.com/paddle-entrypoint/paddle-entrypoint/policy"
	"github.com/paddle-entrypoint/paddle-entrypoint/register"
	"github.com/paddle-entrypoint/paddle-entrypoint/spool"
	"github.com/paddle-entrypoint/paddle-entrypoint/supervise"
	"github.com/spf13/pflag"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// Exit statuses of the entrypoint itself (after exec, the command's own).
const (
	exitUsage    = 2
	exitRejected = 65
)

// probeName is the GPU probe executable, installed beside the entrypoint.
const probeName = "paddle-gpu-probe"

// gpuRootHook is a test hook, not a setting: the directory under which the
// GPU count looks for dev/nvidia<N> device nodes, the loader cache and the
// standard library directories, since tests cannot create /dev/nvidia0.
// Unset (production) means "/". See docs/gpu.md.
const gpuRootHook = "PADDLE_ENTRYPOINT_TEST_GPU_ROOT"

// backlogPerStart bounds the older pending entries one start sends.
const backlogPerStart = 20

// spoolLockTimeout bounds a wait for another container's spool lock.
const spoolLockTimeout = time.Second

func main() {
	os.Exit(dispatch(os.Args[1:], os.Environ()))
}

// dispatch picks the mode: a subcommand, or run mode for anything else.
// Run mode and the spool commands take the signals caught since the start
// (package earlysignal); the others end with 128+N when one arrived.
func dispatch(args, environ []string) int {
	start := time.Now()
	flags := config.NewFlagSet("paddle-entrypoint", false)
	showVersion := flags.BoolP("version", "v", false, "print the version and exit")
	if err := flags.Parse(args); err != nil {
		return exitOnEarlySignal(flagError(err, func(w io.Writer) { runHelp(w, flags) }))
	}
	rest := flags.Args()
	if *showVersion {
		return exitOnEarlySignal(printVersion(nil))
	}
	if len(rest) > 0 && flags.ArgsLenAtDash() != 0 {
		switch rest[0] {
		case "labels":
			return exitOnEarlySignal(labelsCmd(args, environ))
		case "spool":
			return exitOnEarlySignal(spoolCmd(args, environ))
		case "version":
			return exitOnEarlySignal(printVersion(rest[1:]))
		}
	}
	if len(rest) == 0 {
		return exitOnEarlySignal(usage(errors.New("no command to run")))
	}
	cfg, err := config.Build(flags, environ, os.Geteuid())
	if err != nil {
		return exitOnEarlySignal(usage(err))
	}
	if _, err := checkGate(cfg, cfg.Mode == config.ModeSupervise); err != nil {
		return exitOnEarlySignal(usage(err))
	}
	return run(cfg, rest, environ, start)
}

// run is the product: labels, GPUs, labels file, registration, exec. It
// returns only when the command could not be started.
func run(cfg config.Config, argv, environ []string, start time.Time) int {
	log := newLogger(os.Stderr, cfg)
	// Supervise mode: the reaper, the one place that waits for children,
	// starts before the first child, the GPU probe. Signals are caught
	// first of all, in the background (see catchSignals).
	var reaper *supervise.Reaper
	var fwd *supervise.Signals
	var catchChildren, catchAll func()
	if cfg.Mode == config.ModeSupervise {
		clearInheritedMask(environ, log)
		reaper = supervise.NewReaper(log)
		fwd = supervise.NewSignals()
		// The terminating signals stay on earlysignal's channel, which
		// the forwarder reads once the command runs: a second channel
		// asking for them next to it is what let a SIGTERM through to
		// the Go runtime's exit 2 as PID 1 (docs/supervise.md).
		fwd.Also(earlysignal.Channel())
		catchChildren, catchAll = reaper.Catch, fwd.Catch
	}
	ctx, stopSignals := catchSignals(catchChildren, catchAll)
	routeStdLog(log)
	reportSettings(log, cfg)
	gpuOpt := gpuOptions(cfg, environ, log)
	if reaper != nil {
		gpuOpt.Children = reaper
	}

	probe := gpu.Start(ctx, gpuOpt)
	defer probe.Stop()

	pol, err := policy.Resolve(policy.SystemPath, cfg.PolicyFile)
	if err != nil {
		log.Error("label policy unusable; built-in rules apply", "err", err)
	}
	set, rejected := checkLabels(cfg, pol, environ, log)
	if rejected {
		return exitRejected
	}
	path, err := command.Resolve(argv[0], lookupEnv(environ, "PATH"))
	if err != nil {
		return cannotExec(log, err)
	}

	inv := probe.Wait()
	set.SetGPUs(len(inv.Devices), inv.UUIDs())
	log.Info("task labels", labelAttrs(set))

	if err := labels.WriteFile(cfg.LabelsFile, set); err != nil {
		log.Warn("labels file not written; the task runs without it", "err", err)
	}
	written := writeTextfile(cfg, set, inv, cfg.Mode == config.ModeSupervise, log)

	env := commandEnv(cfg, environ, set)
	if cfg.Mode == config.ModeSupervise {
		cmd := supervise.Command{Path: path, Argv: argv, Env: env, Group: cfg.SignalGroup}
		return superviseCommand(cfg, reaper, fwd, set, inv, cmd, stopSignals, finisher(cfg, set, written, log), log)
	}

	registerTask(ctx, cfg, set, inv, log)
	// From here to execve a signal gets the kernel's default action, as
	// after execve, never the Go runtime's exit 2 (which os/signal's Stop
	// alone would leave it to, as PID 1); Stop then waits for a signal
	// still on its way to the channel, which stopSignals looks at last.
	earlysignal.ResetDefault()
	earlysignal.Stop()
	if status, stopped := stopSignals(); stopped {
		log.Warn("stopped by a signal before exec; the registration is spooled", "exit", status)
		return status
	}

	log.Debug("exec", "path", path, "since_start", time.Since(start))
	return cannotExec(log, command.Exec(path, argv, env))
}

// registerTask delivers the registration within the budget, or spools it.
// The budget starts here: unused probe time is not lent to it. Without a
// monitor the body is not even built.
func registerTask(ctx context.Context, cfg config.Config, set *labels.Set, inv gpu.Inventory, log *slog.Logger) {
	if cfg.MonitorURL == "" {
		log.Debug("no PADDLE_MONITOR_URL: nothing sent, nothing spooled")
		return
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.RegisterBudget)
	defer cancel()
	r := newRegistrar(cfg, log)
	r.Backlog = backlogPerStart
	r.OutageHold = cfg.OutageHold
	if r.Register(ctx, set.TaskID, register.Body(set, inv)) == register.Delivered && ctx.Err() == nil {
		if q, ok := r.Queue.(*spool.Spool); ok {
			flushCompletions(ctx, r, q, backlogPerStart, register.FlushResult{}, log)
		}
	}
	if ctx.Err() == nil {
		logLegacy(ctx, r.Queue, log)
	}
}

// checkLabels parses the task's labels under the policy in force and
// reports each problem. rejected is true when enforce mode refuses the start.
// pol is the policy in force; nil means built-in rules only.
func checkLabels(cfg config.Config, pol *policy.Policy, environ []string, log *slog.Logger) (set *labels.Set, rejected bool) {
	mode := cfg.LabelsMode
	if pol != nil && pol.Mode != "" {
		mode = pol.Mode
	}
	host, _ := os.Hostname()
	set, problems := labels.Parse(environ, labels.Options{Policy: pol, Hostname: host, Now: time.Now()})
	refused := false
	for _, p := range problems {
		switch {
		case p.Notice:
			log.Warn("label note", "var", p.Var, "rule", p.Rule)
		case mode == "enforce":
			refused = true
			log.Error("label rejected", "var", p.Var, "rule", p.Rule)
		default:
			log.Warn("label dropped", "var", p.Var, "rule", p.Rule)
		}
	}
	return set, refused
}

func gpuOptions(cfg config.Config, environ []string, log *slog.Logger) gpu.Options {
	return gpu.Options{Probe: probePath(cfg), Timeout: cfg.GPUTimeout, Environ: environ, Logger: log,
		Root: lookupEnv(environ, gpuRootHook), Share: cfg.GPUShare}
}

// probePath is the GPU probe's executable: the configured one, or the one
// installed beside the entrypoint.
func probePath(cfg config.Config) string {
	if cfg.GPUProbe != "" {
		return cfg.GPUProbe
	}
	if self, err := os.Executable(); err == nil {
		return filepath.Join(filepath.Dir(self), probeName)
	}
	return ""
}

// newSpool returns the configured spool, or nil when it is off. sendable
// is its Options.Sendable: which tokens' entries this process may send.
func newSpool(cfg config.Config, log *slog.Logger, sendable func(string) bool) *spool.Spool {
	if cfg.SpoolPath == "" {
		return nil
	}
	return spool.New(spool.Options{
		Path:        cfg.SpoolPath,
		MaxEntries:  cfg.SpoolNodeMax,
		MaxAge:      cfg.SpoolNodeMaxAge,
		AddLimit:    ownBound(cfg.SpoolMax, config.DefaultSpoolMax),
		AddMaxAge:   ownBound(cfg.SpoolMaxAge, config.DefaultSpoolMaxAge),
		Sendable:    sendable,
		LockTimeout: spoolLockTimeout,
		Logger:      log,
	})
}

// newClient returns the client of the configured monitor. A CA file that
// cannot be used is logged; the client then fails every attempt, so
// registrations are spooled, never sent unverified.
func newClient(cfg config.Config, log *slog.Logger) *register.Client {
	client, err := register.NewClient(register.ClientConfig{
		URL:       cfg.MonitorURL,
		TokenFile: cfg.MonitorTokenFile,
		CAFile:    cfg.MonitorCAFile,
		UserAgent: "paddle-entrypoint/" + version,
		Logger:    log,
	})
	if err != nil && cfg.MonitorURL != "" {
		level := slog.LevelError
		if errors.Is(err, register.ErrBadURL) {
			level = slog.LevelWarn // the task's own setting, not a broken installation
		}
		log.Log(context.Background(), level, "monitor client unusable; registrations are spooled", "err", err)
	}
	return client
}

// logLegacy says, once per start, how many spooled entries of the previous
// format (no token fingerprint) wait for `spool flush --legacy`.
func logLegacy(ctx context.Context, q register.Queue, log *slog.Logger) {
	s, ok := q.(*spool.Spool)
	if !ok {
		return
	}
	if n, err := s.LegacyPending(ctx); err == nil && n > 0 {
		log.Warn("spool: entries of the previous format (no token fingerprint) wait for `spool flush --legacy`", "count", n, "spool", s.Path())
	}
}

// newRegistrar returns a registrar for the configured monitor and spool,
// which sends only the entries written for its own token.
func newRegistrar(cfg config.Config, log *slog.Logger) *register.Registrar {
	return newRegistrarWith(cfg, log, newTokens(newClient(cfg, log)))
}

func newRegistrarWith(cfg config.Config, log *slog.Logger, t *tokens) *register.Registrar {
	r := &register.Registrar{Client: t.own, ClientFor: t.ClientFor, Logger: log, Check: payloadCheck(cfg, log)}
	if q := newSpool(cfg, log, t.Sendable); q != nil {
		r.Queue = q
	}
	return r
}

// ownBound is a task's own spool bound: none when it is the default, which
// the node's bound already is (a task at the default must not keep its
// entry out of a full spool, where the node drops the oldest instead).
func ownBound[T comparable](v, def T) T {
	var none T
	if v == def {
		return none
	}
	return v
}

// badMonitorURL says why the configured monitor URL can never work; nil
// when it can (or when there is none).
func badMonitorURL(url string) error {
	if url == "" {
		return nil
	}
	_, err := register.ParseBase(url)
	return err
}

func cannotExec(log *slog.Logger, err error) int {
	log.Error("command cannot start", "err", err)
	if ce := (*command.Error)(nil); errors.As(err, &ce) {
		return ce.Status
	}
	return command.ExitNotExecutable
}

// flagError reports a flag parsing error as a usage error, except --help,
// which prints the mode's help (help.go) on stdout and succeeds.
func flagError(err error, help func(w io.Writer)) int {
	if !errors.Is(err, pflag.ErrHelp) {
		return usage(err)
	}
	help(os.Stdout)
	return 0
}

const usageText = `usage: paddle-entrypoint [flags] [--] COMMAND [ARG...]
       paddle-entrypoint labels [flags]
       paddle-entrypoint spool list|stats|flush|requeue|purge [flags]
       paddle-entrypoint version | --version | -v`

// printVersion prints "paddle-entrypoint version X", as tini and
// dcgm-exporter print theirs; the subcommand takes no argument.
func printVersion(extra []string) int {
	if len(extra) > 0 {
		return usage(fmt.Errorf("version takes no argument, got %q", extra[0]))
	}
	fmt.Println("paddle-entrypoint version", version)
	return 0
}

func usage(err error) int {
	fmt.Fprintf(os.Stderr, "paddle-entrypoint: %v\n%s\n", err, usageText)
	return exitUsage
}

func lookupEnv(environ []string, key string) string {
	for _, kv := range environ {
		if len(kv) > len(key) && kv[len(key)] == '=' && kv[:len(key)] == key {
			return kv[len(key)+1:]
		}
	}
	return ""
}
