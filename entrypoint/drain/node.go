package drain

import (
	"context"
	"log/slog"

	"github.com/paddle-entrypoint/paddle-entrypoint/entrypoint/config"
	"github.com/paddle-entrypoint/paddle-entrypoint/entrypoint/policy"
	"github.com/paddle-entrypoint/paddle-entrypoint/internal/deliver"
	"github.com/paddle-entrypoint/paddle-entrypoint/internal/drain"
	"github.com/paddle-entrypoint/paddle-entrypoint/labels"
	"github.com/paddle-entrypoint/paddle-entrypoint/register"
	"github.com/paddle-entrypoint/paddle-entrypoint/spool"
)

// Node is the entrypoint's sender of spooled entries: its settings table
// (config.Config), the logger, and the User-Agent its requests carry. A
// start, a supervisor and `spool flush` each build one; Shared is what it
// hands the drainer every program shares (internal/drain).
type Node struct {
	Config    *config.Config
	Log       *slog.Logger
	UserAgent string // "paddle-entrypoint/<version>"
}

// Settings fills the shared drainer's settings from the entrypoint's table.
func Settings(cfg *config.Config) drain.Settings {
	return drain.Settings{
		MonitorURL: cfg.MonitorURL,
		TokenFile:  cfg.MonitorTokenFile,
		CAFile:     cfg.MonitorCAFile,
		SpoolPath:  cfg.SpoolPath,
		NodeMax:    cfg.SpoolNodeMax,
		NodeMaxAge: cfg.SpoolNodeMaxAge,
		AddLimit:   ownBound(cfg.SpoolMax, config.DefaultSpoolMax),
		AddMaxAge:  ownBound(cfg.SpoolMaxAge, config.DefaultSpoolMaxAge),
	}
}

// Shared is n as the shared drainer takes it, with the entrypoint's check
// of stored payloads.
func (n Node) Shared() drain.Node {
	return drain.Node{Settings: Settings(n.Config), Log: n.Log, UserAgent: n.UserAgent, Check: n.payloadCheck()}
}

// Spool returns the configured spool, or nil when it is off.
func (n Node) Spool(sendable func(string) bool) *spool.Spool { return n.Shared().Spool(sendable) }

// Client returns the client of the configured monitor (drain.Node.Client).
func (n Node) Client() *deliver.Client { return n.Shared().Client() }

// Registrar returns a registrar for the configured monitor and spool,
// which sends only the entries written for its own token.
func (n Node) Registrar() *register.Registrar {
	sh := n.Shared()
	own := sh.Client()
	sendable, clientFor := drain.OwnToken(own)
	r := &register.Registrar{Client: own, ClientFor: clientFor, Logger: n.Log, Check: sh.Check}
	if s := sh.Spool(sendable); s != nil {
		r.Queue, r.Outages = s.Registrations(), s
	}
	return r
}

// payloadCheck returns the check every stored payload passes before it is
// sent (a start's backlog, spool flush): the name rule, the sensitive-data
// check and the node's label policy, as a start applies them, and its
// task_id as the Idempotency-Key. The policy is the node's
// (/etc/paddle-entrypoint/policy.json, or the one this process was given),
// read once, when the first payload needs it.
func (n Node) payloadCheck() deliver.Check {
	var pol *policy.Policy
	loaded := false
	return func(payload []byte) (string, error) {
		if !loaded {
			loaded = true
			var err error
			if pol, err = policy.Resolve(policy.SystemPath, n.Config.PolicyFile); err != nil {
				n.Log.Error("label policy unusable; stored payloads are checked by the built-in rules", "err", err)
			}
		}
		return labels.CheckPayload(payload, pol)
	}
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

// FlushCompletions sends spooled completions whose registration is no
// longer pending, at most limit (0: all), with r's client and check,
// adding to what a registration flush did (res).
func FlushCompletions(ctx context.Context, r *register.Registrar, q *spool.Spool, limit int, res deliver.FlushResult, log *slog.Logger) (deliver.FlushResult, error) {
	return drain.FlushCompletions(ctx, deliver.Spooled{Client: r.Client, ClientFor: r.ClientFor, Check: r.Check}, q, limit, res, log)
}

// LogLegacy says, once per start, how many spooled entries of the previous
// format (no token fingerprint) wait for `spool flush --legacy`.
func LogLegacy(ctx context.Context, q register.Queue, log *slog.Logger) { drain.LogLegacy(ctx, q, log) }
