package nodeagent

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/paddle-entrypoint/paddle-entrypoint/entrypoint/config"
	"github.com/paddle-entrypoint/paddle-entrypoint/entrypoint/drain"
)

// newDrainer is --drain-spools: the entrypoint's drainer over every
// per-UID spool file of the directory, each entry sent with the token it
// was written for (--token-dir), to the agent's monitor. It holds the
// teams' tokens, which is why it is off by default (docs/security.md).
func (a *agent) newDrainer() (*drain.Drainer, error) {
	env := []string{
		"PADDLE_MONITOR_URL=" + a.cfg.MonitorURL,
		"PADDLE_SPOOL_PATH=" + filepath.Join(a.cfg.DrainSpools, "spool-0.db"),
	}
	if a.cfg.CAFile != "" {
		env = append(env, "PADDLE_MONITOR_CA_FILE="+a.cfg.CAFile)
	}
	c, err := config.Build(nil, env, 0)
	if err != nil {
		return nil, fmt.Errorf("--drain-spools: %w", err)
	}
	return &drain.Drainer{
		Node:     drain.Node{Config: &c, Log: a.log.With("drain", a.cfg.DrainSpools), UserAgent: "paddle-node/" + a.version},
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
