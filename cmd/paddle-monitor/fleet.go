package main

import (
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor"
	"github.com/paddle-entrypoint/paddle-entrypoint/store"
)

// registerFleet adds the fleet's series to /metrics (docs/monitor.md,
// "Metrics"): the month's ledger by model and the nodes' latest reports,
// with serve's ledger settings.
func registerFleet(reg *prometheus.Registry, st *store.Store, c *serveConfig, log *slog.Logger) error {
	ns, err := c.nodes.namespaces()
	if err != nil {
		return err
	}
	reg.MustRegister(monitor.NewFleetCollector(monitor.FleetConfig{Source: st, Namespaces: ns, Split: c.nodes.split,
		Retire: c.nodes.retire, Log: log}))
	return nil
}
