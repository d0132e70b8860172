// Command paddle-entrypoint is the ENTRYPOINT of PaddlePaddle GPU images: it
// labels the task, counts its GPUs, writes the labels file, registers the
// task with the monitor (spooling what it cannot deliver), and execs the
// training command. Monitoring never breaks training.
//
// This file parses, dispatches and returns exit statuses; the steps are in
// launch, drain, config and earlysignal (docs/architecture.md).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/spf13/pflag"

	"github.com/paddle-entrypoint/paddle-entrypoint/entrypoint/config"
	"github.com/paddle-entrypoint/paddle-entrypoint/entrypoint/drain"
	"github.com/paddle-entrypoint/paddle-entrypoint/entrypoint/earlysignal"
	"github.com/paddle-entrypoint/paddle-entrypoint/entrypoint/help"
	"github.com/paddle-entrypoint/paddle-entrypoint/entrypoint/launch"
	"github.com/paddle-entrypoint/paddle-entrypoint/internal/logging"
	"github.com/paddle-entrypoint/paddle-entrypoint/internal/monitorurl"
	"github.com/paddle-entrypoint/paddle-entrypoint/internal/program"
	"github.com/paddle-entrypoint/paddle-entrypoint/internal/settings"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// prog is the entrypoint as the programs' shared shell sees it (usage
// errors exit 2, the version line, the logger's marks).
func prog() program.Program {
	return program.Program{Name: "paddle-entrypoint", Version: version, Log: logging.Entrypoint}
}

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
		return earlysignal.Exit(flagError(err, func(w io.Writer) { help.Run(w, flags, usageText) }))
	}
	rest := flags.Args()
	if *showVersion {
		return earlysignal.Exit(printVersion(nil))
	}
	if len(rest) > 0 && flags.ArgsLenAtDash() != 0 {
		switch rest[0] {
		case "labels":
			return earlysignal.Exit(labelsCmd(args, environ))
		case "spool":
			return earlysignal.Exit(spoolCmd(args, environ))
		case "version":
			return earlysignal.Exit(printVersion(rest[1:]))
		}
	}
	if len(rest) == 0 {
		return earlysignal.Exit(usage(errors.New("no command to run")))
	}
	cfg, err := config.Build(flags, environ, os.Geteuid())
	if err != nil {
		return earlysignal.Exit(usage(err))
	}
	if _, err := launch.CheckGate(&cfg); err != nil {
		return earlysignal.Exit(usage(err))
	}
	return launch.New(&cfg, environ, version).Run(rest, start)
}

// labelsCmd is `paddle-entrypoint labels`: the labels a start would write.
func labelsCmd(args, environ []string) int {
	flags := config.NewFlagSet("paddle-entrypoint labels", true)
	if err := flags.Parse(args); err != nil {
		return flagError(err, func(w io.Writer) { help.Labels(w, flags) })
	}
	if rest := flags.Args(); len(rest) != 1 {
		return usage(fmt.Errorf("labels takes no arguments, got %q", rest[1:]))
	}
	cfg, err := config.Build(flags, environ, os.Geteuid())
	if err != nil {
		return usage(err)
	}
	return launch.Labels(&cfg, environ, version)
}

// spoolCmd runs `paddle-entrypoint spool list|stats|flush|requeue|purge`, on
// the spool file that a start with the same settings would use. Results go
// to stdout as JSON lines; logs to stderr.
func spoolCmd(args, environ []string) int {
	flags := config.NewFlagSet("paddle-entrypoint spool", true)
	var o drain.Options
	flags.BoolVar(&o.Dead, "dead", false, "list: dead letters instead of pending entries; purge: required")
	flags.BoolVar(&o.Flush.All, "all", false, "flush: every spool-*.db file in the spool file's directory (run as root on the node)")
	flags.BoolVar(&o.Flush.Watch, "watch", false, "flush: keep draining every --interval until SIGTERM or SIGINT")
	flags.DurationVar(&o.Interval, "interval", 30*time.Second, "flush --watch: time between passes")
	flags.BoolVar(&o.Completions, "completions", false, "list: completions (supervise mode) instead of registrations")
	tokenDir, _ := settings.Environ(environ)("PADDLE_SPOOL_TOKEN_DIR")
	flags.StringVar(&o.Flush.TokenDir, "token-dir", tokenDir, "flush: a directory of monitor tokens, one per file (PADDLE_SPOOL_TOKEN_DIR): each entry is sent with the token it was written for")
	flags.BoolVar(&o.Flush.Legacy, "legacy", false, "flush: also send the entries of the previous format (no token fingerprint), with the token of PADDLE_MONITOR_TOKEN_FILE")
	if err := flags.Parse(args); err != nil {
		return flagError(err, func(w io.Writer) { help.Spool(w, flags, args) })
	}
	rest := flags.Args()
	if len(rest) != 2 {
		return usage(errors.New("spool takes one of list, stats, flush, requeue, purge"))
	}
	sub := rest[1]
	allowed, ok := drain.Flags[sub]
	if !ok {
		return usage(fmt.Errorf("spool: unknown subcommand %q (list, stats, flush, requeue, purge)", sub))
	}
	for _, name := range []string{"dead", "all", "watch", "interval", "completions", "token-dir", "legacy"} {
		if flags.Changed(name) && !slices.Contains(allowed, name) {
			return usage(fmt.Errorf("spool %s does not take --%s", sub, name))
		}
	}
	cfg, err := config.BuildNode(flags, environ, os.Geteuid())
	if err != nil {
		return usage(err)
	}
	// The spool commands are the node's tools: their flags, given by the
	// administrator, bound every entry of the files they handle.
	// PADDLE_SPOOL_MAX and PADDLE_SPOOL_MAX_AGE in their environment are
	// a task's settings and bound nothing here.
	if flags.Changed("spool-max") {
		cfg.SpoolNodeMax = cfg.SpoolMax
	}
	if flags.Changed("spool-max-age") {
		cfg.SpoolNodeMaxAge = cfg.SpoolMaxAge
	}
	_, badURL := monitorurl.Parse(cfg.MonitorURL)
	switch {
	case cfg.SpoolPath == "":
		return usage(errors.New("spool: the spool is off (PADDLE_SPOOL_PATH=off)"))
	case sub == "purge" && !o.Dead:
		return usage(errors.New("spool purge deletes dead letters only, and says so: spool purge --dead"))
	case sub == "flush" && cfg.MonitorURL == "":
		return usage(errors.New("spool flush: no monitor configured (PADDLE_MONITOR_URL or --monitor-url)"))
	case sub == "flush" && badURL != nil:
		return usage(fmt.Errorf("spool flush: %w", badURL))
	case sub == "flush" && o.Interval <= 0:
		return usage(fmt.Errorf("spool flush: --interval %v is not a positive duration", o.Interval))
	}
	log := logging.New(os.Stderr, cfg.LogLevel, cfg.LogFormat)
	logging.RouteStdLog(log)
	logging.Settings(log, cfg.Warnings)
	ctx, stop := earlysignal.Context()
	defer stop()
	code := drain.Command(ctx, drain.Node{Config: &cfg, Log: log, UserAgent: "paddle-entrypoint/" + version}, sub, o, os.Stdout)
	// A signal ends every command but the drainer's watch (whose normal
	// end it is) with 128+N: a transaction it cut short was rolled back.
	if s, ok := context.Cause(ctx).(earlysignal.Stopped); ok && !(sub == "flush" && o.Flush.Watch) {
		log.Warn("spool: stopped by a signal", "signal", s.Signal.String(), "spool", cfg.SpoolPath)
		return s.Status()
	}
	return code
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
	prog().PrintVersion(os.Stdout)
	return 0
}

func usage(err error) int { return prog().Usage(os.Stderr, err, usageText) }
