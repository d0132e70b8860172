package main

// serve --hourly-retention: once a day, the ledger's hourly rows of closed
// months older than it are deleted; their day and month facts stay
// (docs/cost.md, "Facts at three grains").

import (
	"context"
	"log/slog"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
)

// hourlyEntries is serve's --hourly-retention (0: off).
func hourlyEntries[T any](d func(*T) *time.Duration) []entry[T] {
	return []entry[T]{
		{Flag: "hourly-retention", Var: "PADDLE_MONITOR_HOURLY_RETENTION", Type: "duration", Default: "0",
			Doc:   "delete, once a day, the ledger's hourly rows of closed months older than this (62d), keeping their day and month facts; 0: off",
			Parse: func(c *T, s string) (err error) { *d(c), err = parseDays(s); return err }},
	}
}

// startHourly runs --hourly-retention d (0: nothing) until stop.
func startHourly(st *store.Store, d time.Duration, log *slog.Logger) (stop func()) {
	if d <= 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		every(ctx, 24*time.Hour, func() {
			n, err := st.TrimHourly(ctx, time.Now().Add(-d))
			if err != nil {
				log.Error("hourly retention failed", "err", err)
				return
			}
			log.Info("hourly retention", "hourly_retention", d.String(), "node_hours_deleted", n)
		})
	}()
	return func() { cancel(); <-done }
}
