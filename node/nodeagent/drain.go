package nodeagent

import (
	"context"
	"path/filepath"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/drain"
)

// newDrainer is --drain-spools: the drainer every program shares, over
// every per-UID spool file of the directory, each entry sent with the
// token it was written for (--token-dir), to the agent's monitor. It holds
// the teams' tokens, which is why it is off by default (docs/security.md).
// Its settings come from the agent's own table; the spool files keep the
// node's bound (drain.DefaultMax, drain.DefaultMaxAge), as a spool command
// left at its defaults keeps it. Stored payloads pass drain.ContractRule, not
// the entrypoint's label policy: docs/security.md, "What the node agent's
// drainer checks", says why.
func (a *agent) newDrainer() (*drain.Drainer, error) {
	return &drain.Drainer{
		Node: drain.Node{
			Settings: drain.Settings{
				MonitorURL: a.cfg.MonitorURL,
				CAFile:     a.cfg.CAFile,
				SpoolPath:  filepath.Join(a.cfg.DrainSpools, "spool-0.db"),
				NodeMax:    drain.DefaultMax,
				NodeMaxAge: drain.DefaultMaxAge,
			},
			Log:       a.log.With("drain", a.cfg.DrainSpools),
			UserAgent: "paddle-node/" + a.version,
			Check:     drain.ContractRule,
		},
		All:      true,
		TokenDir: a.cfg.TokenDir,
		Watch:    true,
	}, nil
}

// drainPass drains the task spools once, logging what was sent.
func (a *agent) drainPass(ctx context.Context) {
	results, err := a.drainer.Pass(ctx)
	if err != nil {
		a.log.Error("--drain-spools", "error", err)
	}
	for _, r := range results {
		if r.Delivered > 0 || r.Dead > 0 || r.Error != "" {
			a.log.Info("task spool drained", "spool", r.Spool, "delivered", r.Delivered, "dead", r.Dead, "error", r.Error)
		}
	}
}
