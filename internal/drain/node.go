package drain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/deliver"
	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
	"github.com/paddle-entrypoint/paddle-entrypoint/spool"
)

// LockTimeout bounds a wait for another container's spool lock.
const LockTimeout = time.Second

// The node's bound of a spool file (every entry, whoever wrote it), as the
// entrypoint's settings default it (PADDLE_SPOOL_MAX, PADDLE_SPOOL_MAX_AGE)
// and the node agent's drainer keeps it.
const (
	DefaultMax    = 10000
	DefaultMaxAge = 30 * 24 * time.Hour
)

// ExitIncomplete is the exit status of a spool command that did not finish
// its work: entries left pending by flush, or a spool that could not be
// read.
const ExitIncomplete = 1

// Settings are what a sender of spooled entries is configured with. Each
// program fills them from its own settings table (the entrypoint's
// PADDLE_* variables, the node agent's flags), so that neither reads the
// other's.
type Settings struct {
	MonitorURL string
	TokenFile  string // "": no Authorization header
	CAFile     string
	// SpoolPath is the spool file (with Drainer.All, one of the
	// directory's); "": the spool is off.
	SpoolPath string
	// NodeMax and NodeMaxAge bound the file as a whole (the node's bound);
	// AddLimit and AddMaxAge are the writer's own bounds (0: none).
	NodeMax    int
	NodeMaxAge time.Duration
	AddLimit   int
	AddMaxAge  time.Duration
}

// Node is what every sender of spooled entries needs: the settings, the
// logger, the User-Agent its requests carry, and the check every stored
// payload passes before it is sent. A start, a supervisor, `spool flush`
// and the node agent each build one.
type Node struct {
	Settings  Settings
	Log       *slog.Logger
	UserAgent string // "paddle-entrypoint/<version>", "paddle-node/<version>"
	// Check vets a stored payload and returns its task id; nil: only its
	// task_id is read (deliver.TaskIDOf). The entrypoint passes its policy and sensitive-data
	// checks (labels.CheckPayload); the node agent passes ContractRule
	// (docs/security.md, "What the node agent's drainer checks").
	Check deliver.Check
}

// ContractRule is the check of a stored payload that any program can
// apply: the body must be a registration or a completion the contract
// accepts (wire.DecodeRegistration, wire.DecodeCompletion: the name rule
// for every name and label, the bounds, the types), and its task_id is the
// Idempotency-Key it is sent with. The error names the field and the rule,
// never the value. It is what the monitor would check first, so a payload
// it refuses would have been answered 400 and buried anyway; refusing it
// here keeps it from being sent at all.
func ContractRule(payload []byte) (string, error) {
	reg, rerr := wire.DecodeRegistration(payload)
	if rerr == nil {
		return reg.TaskID, nil
	}
	comp, cerr := wire.DecodeCompletion(payload)
	if cerr == nil {
		return comp.TaskID, nil
	}
	return "", fmt.Errorf("payload refused: neither a registration (%v) nor a completion (%v) the contract accepts", rerr, cerr)
}

// Spool returns the configured spool, or nil when it is off. sendable
// is its Options.Sendable: which tokens' entries this process may send.
func (n Node) Spool(sendable func(string) bool) *spool.Spool {
	return n.spoolAt(n.Settings.SpoolPath, sendable)
}

func (n Node) spoolAt(path string, sendable func(string) bool) *spool.Spool {
	st := n.Settings
	if path == "" {
		return nil
	}
	return spool.New(spool.Options{
		Path:        path,
		MaxEntries:  st.NodeMax,
		MaxAge:      st.NodeMaxAge,
		AddLimit:    st.AddLimit,
		AddMaxAge:   st.AddMaxAge,
		Sendable:    sendable,
		LockTimeout: LockTimeout,
		Logger:      n.Log,
	})
}

// Client returns the client of the configured monitor. A CA file that
// cannot be used is logged; the client then fails every attempt, so
// registrations are spooled, never sent unverified.
func (n Node) Client() *deliver.Client {
	st := n.Settings
	client, err := deliver.NewClient(deliver.ClientConfig{
		URL:       st.MonitorURL,
		TokenFile: st.TokenFile,
		CAFile:    st.CAFile,
		UserAgent: n.UserAgent,
		Logger:    n.Log,
	})
	if err != nil && st.MonitorURL != "" {
		level := slog.LevelError
		if errors.Is(err, deliver.ErrBadURL) {
			level = slog.LevelWarn // the task's own setting, not a broken installation
		}
		n.Log.Log(context.Background(), level, "monitor client unusable; registrations are spooled", "err", err)
	}
	return client
}

// check is the stored payloads' check (nil: deliver.Spooled's default).
func (n Node) check() deliver.Check { return n.Check }

// FlushCompletions sends spooled completions of spool file q, at most
// limit (0: all), adding to what a registration flush did (res).
func FlushCompletions(ctx context.Context, sp deliver.Spooled, q *spool.Spool, limit int, res deliver.FlushResult, log *slog.Logger) (deliver.FlushResult, error) {
	sp.Logger = log
	cr, err := sp.Completions(q.Completions()).Flush(ctx, limit)
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
func LogLegacy(ctx context.Context, q any, log *slog.Logger) {
	sq, ok := q.(*spool.Queue)
	if !ok {
		return
	}
	s := sq.Spool()
	if n, err := s.LegacyPending(ctx); err == nil && n > 0 {
		log.Warn("spool: entries of the previous format (no token fingerprint) wait for `spool flush --legacy`", "count", n, "spool", s.Path())
	}
}

// FileStats is what `spool stats` prints: the registrations' counts, with
// foreign and legacy counting the completions too, and the completions'.
type FileStats struct {
	spool.Stats
	CompletionsPending int `json:"completions_pending"`
	CompletionsDead    int `json:"completions_dead"`
	CompletionsDropped int `json:"completions_dropped"`
}

// StatsOf counts the entries of spool file s, every kind the entrypoint
// writes.
func StatsOf(ctx context.Context, s *spool.Spool) (FileStats, error) {
	st, err := s.Registrations().Stats(ctx)
	if err != nil {
		return FileStats{}, err
	}
	cst, err := s.Completions().Stats(ctx)
	if err != nil {
		return FileStats{}, err
	}
	st.Foreign += cst.Foreign
	st.Legacy += cst.Legacy
	return FileStats{Stats: st, CompletionsPending: cst.Pending, CompletionsDead: cst.Dead, CompletionsDropped: cst.Dropped}, nil
}
