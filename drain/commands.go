package drain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/config"
	"github.com/paddle-entrypoint/paddle-entrypoint/register"
	"github.com/paddle-entrypoint/paddle-entrypoint/spool"
)

// Exit status of a spool command that did not finish its work: entries left
// pending by flush, or a spool that could not be read.
const exitIncomplete = 1

// defaultFlushInterval is the wait between passes of `spool flush --watch`.
const defaultFlushInterval = 30 * time.Second

// spoolFlags are the subcommands' own flags, and which subcommand takes each.
var spoolFlags = map[string][]string{
	"list":    {"dead", "completions"},
	"stats":   nil,
	"flush":   {"all", "watch", "interval", "token-dir", "legacy"},
	"requeue": nil,
	"purge":   {"dead"},
}

// spoolCmd runs `paddle-entrypoint spool list|stats|flush|requeue|purge`, on
// the spool file that a start with the same settings would use. Results go
// to stdout as JSON lines; logs to stderr.
func spoolCmd(args, environ []string) int {
	flags := config.NewFlagSet("paddle-entrypoint spool", true)
	dead := flags.Bool("dead", false, "list: dead letters instead of pending entries; purge: required")
	all := flags.Bool("all", false, "flush: every spool-*.db file in the spool file's directory (run as root on the node)")
	watch := flags.Bool("watch", false, "flush: keep draining every --interval until SIGTERM or SIGINT")
	interval := flags.Duration("interval", defaultFlushInterval, "flush --watch: time between passes")
	completions := flags.Bool("completions", false, "list: completions (supervise mode) instead of registrations")
	tokenDir := flags.String("token-dir", lookupEnv(environ, "PADDLE_SPOOL_TOKEN_DIR"), "flush: a directory of monitor tokens, one per file (PADDLE_SPOOL_TOKEN_DIR): each entry is sent with the token it was written for")
	legacy := flags.Bool("legacy", false, "flush: also send the entries of the previous format (no token fingerprint), with the token of PADDLE_MONITOR_TOKEN_FILE")
	if err := flags.Parse(args); err != nil {
		return flagError(err, func(w io.Writer) { spoolHelp(w, flags, args) })
	}
	rest := flags.Args()
	if len(rest) != 2 {
		return usage(errors.New("spool takes one of list, stats, flush, requeue, purge"))
	}
	sub := rest[1]
	allowed, ok := spoolFlags[sub]
	if !ok {
		return usage(fmt.Errorf("spool: unknown subcommand %q (list, stats, flush, requeue, purge)", sub))
	}
	for _, name := range []string{"dead", "all", "watch", "interval", "completions", "token-dir", "legacy"} {
		if flags.Changed(name) && !slices.Contains(allowed, name) {
			return usage(fmt.Errorf("spool %s does not take --%s", sub, name))
		}
	}
	cfg, err := config.Build(flags, environ, os.Geteuid())
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
	switch {
	case cfg.SpoolPath == "":
		return usage(errors.New("spool: the spool is off (PADDLE_SPOOL_PATH=off)"))
	case sub == "purge" && !*dead:
		return usage(errors.New("spool purge deletes dead letters only, and says so: spool purge --dead"))
	case sub == "flush" && cfg.MonitorURL == "":
		return usage(errors.New("spool flush: no monitor configured (PADDLE_MONITOR_URL or --monitor-url)"))
	case sub == "flush" && badMonitorURL(cfg.MonitorURL) != nil:
		return usage(fmt.Errorf("spool flush: %w", badMonitorURL(cfg.MonitorURL)))
	case sub == "flush" && *interval <= 0:
		return usage(fmt.Errorf("spool flush: --interval %v is not a positive duration", *interval))
	}
	log := newLogger(os.Stderr, cfg)
	routeStdLog(log)
	reportSettings(log, cfg)
	ctx, stop := signalContext()
	defer stop()
	code := spoolSub(ctx, cfg, log, sub, *dead, *completions, flushOptions{all: *all, watch: *watch, interval: *interval, tokenDir: *tokenDir, legacy: *legacy})
	// A signal ends every command but the drainer's watch (whose normal
	// end it is) with 128+N: a transaction it cut short was rolled back.
	if s, ok := context.Cause(ctx).(stopSignal); ok && !(sub == "flush" && *watch) {
		log.Warn("spool: stopped by a signal", "signal", s.sig.String(), "spool", cfg.SpoolPath)
		return 128 + int(s.sig)
	}
	return code
}

// flushOptions are spool flush's own flags.
type flushOptions struct {
	all, watch bool
	interval   time.Duration
	tokenDir   string // "": none
	legacy     bool
}

// spoolSub runs one spool subcommand and returns its exit status.
func spoolSub(ctx context.Context, cfg config.Config, log *slog.Logger, sub string, dead, completions bool, fo flushOptions) int {
	// foreign and the fingerprints are those of the command's own token.
	s := newSpool(cfg, log, newTokens(newClient(cfg, log)).Sendable)
	out := json.NewEncoder(os.Stdout)

	if spool.IsAside(cfg.SpoolPath) && (sub == "list" || sub == "stats") {
		return asideCmd(log, out, cfg.SpoolPath, sub, dead)
	}
	switch sub {
	case "list":
		list := s.List
		if completions {
			list = s.ListCompletions
		}
		entries, err := list(ctx, dead)
		if err != nil {
			return spoolFailed(log, s.Path(), err)
		}
		for _, e := range entries {
			if ctx.Err() != nil {
				return exitIncomplete
			}
			out.Encode(e)
		}
	case "stats":
		st, err := s.Stats(ctx)
		if err != nil {
			return spoolFailed(log, s.Path(), err)
		}
		cst, err := s.CompletionStats(ctx)
		if err != nil {
			return spoolFailed(log, s.Path(), err)
		}
		out.Encode(struct {
			spool.Stats
			spool.CompletionStats
		}{st, cst})
	case "requeue":
		n, err := s.Requeue(ctx)
		if err != nil {
			return spoolFailed(log, s.Path(), err)
		}
		out.Encode(map[string]int{"requeued": n})
	case "purge":
		n, err := s.PurgeDead(ctx)
		if err != nil {
			return spoolFailed(log, s.Path(), err)
		}
		out.Encode(map[string]int{"purged": n})
	case "flush":
		return flushCmd(ctx, cfg, log, out, fo)
	}
	return 0
}

// flushResult is the line `spool flush` prints per spool file and pass.
type flushResult struct {
	Spool     string `json:"spool"`
	Delivered int    `json:"delivered"`
	Dead      int    `json:"dead"`
	// Pending is what is left after the pass; null when it could not be
	// counted (the file is locked or unreadable): never a reassuring 0.
	Pending *int `json:"pending"`
	// Foreign counts the pending entries this flush may not send: another
	// token's (one --token-dir does not hold), or of the previous format
	// without --legacy. They are left as they are; exit 0 does not wait
	// for them.
	Foreign int `json:"foreign"`
	// Legacy counts the pending entries of the previous format.
	Legacy int `json:"legacy,omitempty"`
	// Locked: another process held the file's lock past the timeout.
	Locked bool   `json:"locked,omitempty"`
	Error  string `json:"error,omitempty"`
}

// flushCmd drains the spool file (or, with all, every per-UID spool file of
// its directory) to the configured monitor, each entry with the token it
// was written for: the own token, one of the token directory (re-read at
// every pass), and with legacy the own token for the previous format too.
// Without watch it makes one pass and exits 0 when nothing it may send is
// left pending; with watch it makes a pass every interval until SIGTERM or
// SIGINT, and then exits 0.
func flushCmd(ctx context.Context, cfg config.Config, log *slog.Logger, out *json.Encoder, fo flushOptions) int {
	own := newClient(cfg, log)
	wasFailing := false
	for {
		t := newTokens(own)
		t.legacy, t.watch = fo.legacy, fo.watch
		if fo.tokenDir != "" {
			dir, err := readTokenDir(fo.tokenDir, own)
			if err != nil {
				log.Error("spool flush: token directory unreadable", "err", err)
				if !fo.watch {
					return exitIncomplete
				}
			}
			t.dir = dir
		}
		r := newRegistrarWith(cfg, log, t)
		r.Backoff = fo.watch // an operator's one-off flush tries every entry now
		paths := []string{cfg.SpoolPath}
		if fo.all {
			var err error
			paths, err = spool.Files(filepath.Dir(cfg.SpoolPath))
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				log.Error("spool directory unreadable", "dir", filepath.Dir(cfg.SpoolPath), "err", err)
				if !fo.watch {
					return exitIncomplete
				}
			}
		}
		complete, failing, lastErr := true, false, ""
		for _, path := range paths {
			res := flushFile(ctx, cfg, r, t, path, log)
			if res.Pending == nil || *res.Pending > 0 || res.Error != "" {
				complete = false
			}
			if res.Error != "" {
				failing, lastErr = true, res.Error
			}
			if !fo.watch || res.Delivered+res.Dead > 0 {
				out.Encode(res)
			}
		}
		if !fo.watch {
			if complete {
				return 0
			}
			log.Warn("spool flush: entries left pending", "err", lastErr)
			return exitIncomplete
		}
		if failing && !wasFailing {
			log.Warn("spool flush: entries left pending; trying again every interval", "interval", fo.interval, "err", lastErr)
		}
		wasFailing = failing
		tm := time.NewTimer(fo.interval)
		select {
		case <-ctx.Done():
			tm.Stop()
			log.Info("spool flush: stopped by a signal")
			return 0
		case <-tm.C:
		}
	}
}

// flushFile makes one pass over one spool file.
func flushFile(ctx context.Context, cfg config.Config, r *register.Registrar, t *tokens, path string, log *slog.Logger) flushResult {
	if spool.IsAside(path) {
		return drainAside(ctx, r, t, path, log)
	}
	c := cfg
	c.SpoolPath = path
	s := newSpool(c, log, t.Sendable)
	if s != nil && !t.watch {
		// An operator's one-off flush: the entries of a supervisor
		// killed a moment ago are sent now, not after their hold.
		s = s.IgnoringHolds()
	}
	r.Queue = s
	res := flushResult{Spool: path}
	fr, err := r.Flush(ctx, 0)
	if err == nil && fr.Stopped == nil {
		fr, err = flushCompletions(ctx, r, s, 0, fr, log)
	}
	res.Delivered, res.Dead = fr.Delivered, fr.Dead
	switch {
	case err != nil:
		res.Error = r.Client.Redact(err.Error())
		res.Locked = errors.Is(err, spool.ErrLocked)
		log.Warn("spool flush: spool unusable", "spool", path, "err", res.Error)
	case fr.Stopped != nil && ctx.Err() == nil:
		res.Error = r.Client.Redact(fr.Stopped.Error())
	}
	// A fresh context: the count is wanted even when a signal ended the pass.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), spoolLockTimeout)
	defer cancel()
	st, err := s.Stats(sctx)
	if err != nil {
		res.Locked = res.Locked || errors.Is(err, spool.ErrLocked)
		if res.Error == "" {
			res.Error = r.Client.Redact(err.Error())
		}
		return res
	}
	pending := st.Pending
	if cst, err := s.CompletionStats(sctx); err == nil {
		pending += cst.Pending
	}
	// What is left that this flush may send; the others are foreign.
	pending -= st.Foreign
	res.Pending, res.Foreign, res.Legacy = &pending, st.Foreign, st.Legacy
	if fr.Delivered+fr.Dead > 0 || st.Foreign > 0 {
		log.Info("spool flush", "spool", path, "delivered", fr.Delivered, "dead", fr.Dead, "pending", pending, "foreign", st.Foreign)
	}
	return res
}

func spoolFailed(log *slog.Logger, path string, err error) int {
	log.Error("spool unusable", "spool", path, "err", err)
	return exitIncomplete
}

// asideCmd lists or counts what can be salvaged from a corrupt file renamed
// aside, without renaming it again.
func asideCmd(log *slog.Logger, out *json.Encoder, path, sub string, dead bool) int {
	pending, deadLetters, err := spool.Salvaged(path)
	if err != nil && len(pending)+len(deadLetters) == 0 {
		return spoolFailed(log, path, err)
	}
	if err != nil {
		log.Warn("spool: corrupt file only partly read", "spool", path, "err", err)
	}
	if sub == "stats" {
		out.Encode(spool.Stats{Pending: len(pending), Dead: len(deadLetters)})
		return 0
	}
	if dead {
		pending = deadLetters
	}
	for _, e := range pending {
		out.Encode(e)
	}
	return 0
}

// drainAside delivers the pending entries salvaged from a corrupt file
// renamed aside (a quarantine carried them into the fresh spool too, but a
// salvage can only ever be as good as the version that made it: this one
// may read more). The file is never written; once every entry is delivered
// or refused for good, it is renamed to <name>.drained, which no drainer
// reads again. Entries are sent with their own task ids, so one already
// delivered from the fresh spool is answered 409.
func drainAside(ctx context.Context, r *register.Registrar, t *tokens, path string, log *slog.Logger) flushResult {
	res := flushResult{Spool: path}
	pending, _, err := spool.Salvaged(path)
	if err != nil && len(pending) == 0 {
		res.Error = r.Client.Redact(err.Error())
		return res
	}
	left := 0
	for _, e := range pending {
		if ctx.Err() != nil {
			left++
			continue
		}
		if !t.Sendable(e.Fingerprint) {
			res.Foreign++ // another token's: never sent with ours
			continue
		}
		switch serr := r.SendStored(ctx, e.Payload); {
		case serr == nil:
			res.Delivered++
		case register.Permanent(serr):
			res.Dead++
			log.Error("spool: entry salvaged from a corrupt file refused for good; it stays in that file", "spool", path, "task_id", e.TaskID, "answer", r.Client.Redact(serr.Error()))
		default:
			left++
			res.Error = r.Client.Redact(serr.Error())
		}
	}
	res.Pending = &left
	if left == 0 && ctx.Err() == nil {
		if err := os.Rename(path, path+spool.DrainedSuffix); err != nil {
			res.Error = err.Error()
		}
	}
	if res.Delivered+res.Dead > 0 {
		log.Info("spool flush: salvaged entries of a corrupt file", "spool", path, "delivered", res.Delivered, "dead", res.Dead, "pending", left)
	}
	return res
}
