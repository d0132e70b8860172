// Package drain is the entrypoint's side of the spool: the spool commands
// (list, stats, flush, requeue, purge), its settings handed to the drainer
// every program shares (internal/drain, Settings), its check of stored
// payloads (the name rule, the sensitive-data check and the node's label
// policy: labels.CheckPayload), and the registrar a start or a supervisor
// sends with.
package drain

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/drain"
	"github.com/paddle-entrypoint/paddle-entrypoint/spool"
)

// ExitIncomplete is the exit status of a spool command that did not finish
// its work: entries left pending by flush, or a spool that could not be
// read.
const ExitIncomplete = drain.ExitIncomplete

// Flags are the spool subcommands' own flags, and which subcommand takes
// each.
var Flags = map[string][]string{
	"list":    {"dead", "completions"},
	"stats":   nil,
	"flush":   {"all", "watch", "interval", "token-dir", "legacy"},
	"requeue": nil,
	"purge":   {"dead"},
}

// Commands say what each spool subcommand does, for its help.
var Commands = []struct{ Name, Summary string }{
	{"list", "print the pending entries (--dead: the dead letters; --completions: the completions) as JSON lines"},
	{"stats", "print the counts of entries as one JSON object"},
	{"flush", "send the pending entries to the monitor (--all: every spool file of the directory; --watch: keep draining)"},
	{"requeue", "move the dead letters back to the pending entries"},
	{"purge", "delete the dead letters (purge --dead)"},
}

// Options are a spool command's own flags.
type Options struct {
	Dead, Completions bool // list, purge
	Flush             drain.Drainer
	Interval          time.Duration // flush --watch: time between passes
}

// Command runs one spool subcommand (list, stats, flush, requeue, purge)
// on the spool file of n's settings (or with --all every spool file of its
// directory), results on w as JSON lines, and returns its exit status: 0,
// or ExitIncomplete.
func Command(ctx context.Context, n Node, sub string, o Options, w io.Writer) int {
	cfg, log := n.Config, n.Log
	// foreign and the fingerprints are those of the command's own token.
	sendable, _ := drain.OwnToken(n.Client())
	s := n.Spool(sendable)
	out := json.NewEncoder(w)
	dead, completions := o.Dead, o.Completions

	if spool.IsAside(cfg.SpoolPath) && (sub == "list" || sub == "stats") {
		return asideCmd(log, out, cfg.SpoolPath, sub, dead)
	}
	switch sub {
	case "list":
		q := s.Registrations()
		if completions {
			q = s.Completions()
		}
		entries, err := q.List(ctx, dead)
		if err != nil {
			return spoolFailed(log, s.Path(), err)
		}
		for _, e := range entries {
			if ctx.Err() != nil {
				return ExitIncomplete
			}
			out.Encode(e)
		}
	case "stats":
		st, err := drain.StatsOf(ctx, s)
		if err != nil {
			return spoolFailed(log, s.Path(), err)
		}
		out.Encode(st)
	case "requeue":
		// Every kind's dead letters, in one transaction.
		n, err := s.Registrations().Requeue(ctx, spool.Completions)
		if err != nil {
			return spoolFailed(log, s.Path(), err)
		}
		out.Encode(map[string]int{"requeued": n})
	case "purge":
		n, err := s.Registrations().PurgeDead(ctx, spool.Completions)
		if err != nil {
			return spoolFailed(log, s.Path(), err)
		}
		out.Encode(map[string]int{"purged": n})
	case "flush":
		d := o.Flush
		d.Node = n.Shared()
		return d.Flush(ctx, out, o.Interval)
	}
	return 0
}

func spoolFailed(log *slog.Logger, path string, err error) int {
	log.Error("spool unusable", "spool", path, "err", err)
	return ExitIncomplete
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
