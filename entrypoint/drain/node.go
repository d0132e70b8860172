package drain

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/entrypoint/config"
	"github.com/paddle-entrypoint/paddle-entrypoint/entrypoint/policy"
	"github.com/paddle-entrypoint/paddle-entrypoint/internal/deliver"
	"github.com/paddle-entrypoint/paddle-entrypoint/labels"
	"github.com/paddle-entrypoint/paddle-entrypoint/register"
	"github.com/paddle-entrypoint/paddle-entrypoint/spool"
)

// LockTimeout bounds a wait for another container's spool lock.
const LockTimeout = time.Second

// Node is what every sender of spooled entries needs: the settings (the
// monitor, its token and CA, the spool file and its bounds, the policy),
// the logger, and the User-Agent its requests carry. A start, a
// supervisor, `spool flush` and the node agent each build one.
type Node struct {
	Config    *config.Config
	Log       *slog.Logger
	UserAgent string // "paddle-entrypoint/<version>"
}

// Spool returns the configured spool, or nil when it is off. sendable
// is its Options.Sendable: which tokens' entries this process may send.
func (n Node) Spool(sendable func(string) bool) *spool.Spool {
	return n.spoolAt(n.Config.SpoolPath, sendable)
}

func (n Node) spoolAt(path string, sendable func(string) bool) *spool.Spool {
	cfg := n.Config
	if path == "" {
		return nil
	}
	return spool.New(spool.Options{
		Path:        path,
		MaxEntries:  cfg.SpoolNodeMax,
		MaxAge:      cfg.SpoolNodeMaxAge,
		AddLimit:    ownBound(cfg.SpoolMax, config.DefaultSpoolMax),
		AddMaxAge:   ownBound(cfg.SpoolMaxAge, config.DefaultSpoolMaxAge),
		Sendable:    sendable,
		LockTimeout: LockTimeout,
		Logger:      n.Log,
	})
}

// Client returns the client of the configured monitor. A CA file that
// cannot be used is logged; the client then fails every attempt, so
// registrations are spooled, never sent unverified.
func (n Node) Client() *deliver.Client {
	cfg := n.Config
	client, err := deliver.NewClient(deliver.ClientConfig{
		URL:       cfg.MonitorURL,
		TokenFile: cfg.MonitorTokenFile,
		CAFile:    cfg.MonitorCAFile,
		UserAgent: n.UserAgent,
		Logger:    n.Log,
	})
	if err != nil && cfg.MonitorURL != "" {
		level := slog.LevelError
		if errors.Is(err, deliver.ErrBadURL) {
			level = slog.LevelWarn // the task's own setting, not a broken installation
		}
		n.Log.Log(context.Background(), level, "monitor client unusable; registrations are spooled", "err", err)
	}
	return client
}

// Registrar returns a registrar for the configured monitor and spool,
// which sends only the entries written for its own token.
func (n Node) Registrar() *register.Registrar {
	return n.registrarWith(newTokens(n.Client()))
}

func (n Node) registrarWith(t *tokens) *register.Registrar {
	r := &register.Registrar{Client: t.own, ClientFor: t.ClientFor, Logger: n.Log, Check: n.payloadCheck()}
	if s := n.Spool(t.Sendable); s != nil {
		sendFrom(r, s)
	}
	return r
}

// sendFrom makes r send the registrations of spool file s, and keep its
// outage memory there.
func sendFrom(r *register.Registrar, s *spool.Spool) {
	r.Queue, r.Outages = s.Registrations(), s
}

// payloadCheck returns the check every stored payload passes before it is
// sent (a start's backlog, spool flush, the node's drainer): the name rule,
// the sensitive-data check and the node's label policy, as a start applies
// them, and its task_id as the Idempotency-Key. The policy is the node's
// (/etc/paddle-entrypoint/policy.json, or the one this process was given),
// read once, when the first payload needs it.
func (n Node) payloadCheck() func([]byte) (string, error) {
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
// longer pending, at most limit (0: all), adding to what a registration
// flush did (res).
func FlushCompletions(ctx context.Context, r *register.Registrar, q *spool.Spool, limit int, res deliver.FlushResult, log *slog.Logger) (deliver.FlushResult, error) {
	c := &register.Completer{Client: r.Client, ClientFor: r.ClientFor, Check: r.Check, Queue: q.Completions(), Logger: log}
	cr, err := c.Flush(ctx, limit)
	if err != nil {
		log.Warn("spooled completions not sent: spool unusable", "err", err)
	}
	if cr.Delivered+cr.Dead > 0 {
		log.Info("spooled completions sent", "delivered", cr.Delivered, "dead", cr.Dead)
	}
	res.Delivered += cr.Delivered
	res.Dead += cr.Dead
	res.Failed += cr.Failed
	res.Pending += cr.Pending
	if cr.Stopped != nil {
		res.Stopped = cr.Stopped
	}
	return res, err
}

// LogLegacy says, once per start, how many spooled entries of the previous
// format (no token fingerprint) wait for `spool flush --legacy`.
func LogLegacy(ctx context.Context, q register.Queue, log *slog.Logger) {
	sq, ok := q.(*spool.Queue)
	if !ok {
		return
	}
	s := sq.Spool()
	if n, err := s.LegacyPending(ctx); err == nil && n > 0 {
		log.Warn("spool: entries of the previous format (no token fingerprint) wait for `spool flush --legacy`", "count", n, "spool", s.Path())
	}
}
