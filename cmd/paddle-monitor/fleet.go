package main

import (
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
)

// registerFleet adds the fleet's series to /metrics (docs/monitor.md,
// "Metrics"): the month's ledger by model and the nodes' latest reports,
// with serve's ledger settings (fleet).
func registerFleet(reg *prometheus.Registry, st *store.Store, fleet *monitor.LedgerConfig, log *slog.Logger) {
	reg.MustRegister(monitor.NewFleetCollector(monitor.FleetConfig{Source: st, Namespaces: fleet.Namespaces, Split: fleet.Split,
		Retire: fleet.Retire, Log: log, Accounts: fleet.Accounts}))
	reg.MustRegister(monitor.NewRollupCollector(st))
}
