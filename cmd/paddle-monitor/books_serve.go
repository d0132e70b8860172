package main

// What serve runs of the books: the settings of --auto-close and --retain,
// the retention and auto-close loops.

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/books"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
)

// booksSettings are serve's settings of --auto-close and --retain: 0 is off.
type booksSettings struct {
	autoClose, retain time.Duration
}

// booksEntries are serve's --auto-close and --retain.
func booksEntries[T any](b func(*T) *booksSettings) []entry[T] {
	return []entry[T]{
		{Flag: "auto-close", Var: "PADDLE_MONITOR_AUTO_CLOSE", Type: "duration", Default: "0",
			Doc:   "close each month this long after it ends (72h, 3d); 0: off",
			Parse: func(c *T, s string) (err error) { b(c).autoClose, err = parseDays(s); return err }},
		{Flag: "retain", Var: "PADDLE_MONITOR_RETAIN", Type: "duration", Default: "0",
			Doc:   "delete, once a day, tasks of closed months counted to before now minus this (400d); 0: off, nothing is deleted",
			Parse: func(c *T, s string) (err error) { b(c).retain, err = parseDays(s); return err }},
	}
}

// parseDays reads a Go duration or a whole number of days ("400d"); "0"
// is off.
func parseDays(s string) (time.Duration, error) {
	if s == "0" {
		return 0, nil
	}
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil || days < 1 {
			return 0, fmt.Errorf("%q: not a positive number of days (400d) nor a Go duration (72h)", s)
		}
		return time.Duration(days) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%q: not a positive number of days (400d) nor a Go duration (72h)", s)
	}
	return d, nil
}

// startBooks mounts the statements on a serving monitor and starts
// --auto-close and --retain; stop ends them.
func startBooks(api *monitor.API, reg *prometheus.Registry, st *store.Store, c *serveConfig, log *slog.Logger) (stop func(), err error) {
	in, err := booksInputs(c.prices, c.budgets)
	if err != nil {
		return nil, err
	}
	if c.fleet != nil {
		in.Ledger = c.accounts.StatementLedger()
		if err := withNamespaces(&in, c.fleet.Namespaces, c.nodes.namespacesFile); err != nil {
			return nil, err
		}
	}
	fc, err := focusConfig(st, in.Prices, c.nodes, c.focus)
	if err != nil {
		return nil, err
	}
	monitor.MountStatements(api, monitor.BooksConfig{Store: st, Inputs: in, Log: log, Focus: &fc, Accounts: c.accounts})
	deleted := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "paddle_monitor_retention_deleted_total",
		Help: "Rows deleted by --retain, by kind (tasks; node_hours: the ledger's hourly rows)."}, []string{"kind"})
	hold := prometheus.NewGauge(prometheus.GaugeOpts{Name: "paddle_monitor_retention_longest_hold_seconds",
		Help: "The longest a batch of the last --retain run held the write lock."})
	deleted.WithLabelValues("tasks")
	deleted.WithLabelValues("node_hours")
	if err := reg.Register(deleted); err != nil {
		return nil, err
	}
	if err := reg.Register(hold); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 3)
	go func() {
		defer func() { done <- struct{}{} }()
		recordInputs(ctx, st, servingInputs(in, c.nodes.split), log)
	}()
	if d := c.books.autoClose; d > 0 {
		go func() {
			defer func() { done <- struct{}{} }()
			every(ctx, time.Hour, func() { autoClose(ctx, st, in, d, log, focusOnClose(st, &fc)) })
		}()
	} else {
		done <- struct{}{}
	}
	if d := c.books.retain; d > 0 {
		go func() {
			defer func() { done <- struct{}{} }()
			every(ctx, 24*time.Hour, func() {
				res, err := st.Trim(ctx, time.Now().Add(-d), 500)
				if err != nil {
					log.Error("retention failed", "err", err)
					return
				}
				deleted.WithLabelValues("tasks").Add(float64(res.Tasks))
				deleted.WithLabelValues("node_hours").Add(float64(res.NodeHours))
				hold.Set(res.LongestHold.Seconds())
				log.Info("retention", "retain", d.String(), "cutoff", res.Cutoff, "tasks_deleted", res.Tasks, "node_hours_deleted", res.NodeHours,
					"batches", res.Batches, "longest_hold", res.LongestHold.String())
			})
		}()
	} else {
		done <- struct{}{}
	}
	return func() { cancel(); <-done; <-done; <-done }, nil
}

// every runs f now and then every period until ctx ends.
func every(ctx context.Context, period time.Duration, f func()) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		f()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// autoClose closes the latest month that ended at least after ago, unless
// it is closed or was ever reopened (a reopened month is closed by hand).
func autoClose(ctx context.Context, st *store.Store, in books.Inputs, after time.Duration, log *slog.Logger,
	onClose func(ctx context.Context, month string, version int) error) {
	now := time.Now().UTC()
	m := facts.Month(now.Add(-after)).From.AddDate(0, -1, 0)
	month := m.Format("2006-01")
	all, err := st.Statements(ctx)
	if err != nil {
		log.Error("auto-close", "month", month, "err", err)
		return
	}
	for _, c := range all {
		if c.Month == month && c.ReopenedAt != nil {
			log.Info("auto-close: the month was reopened; close it by hand", "month", month)
			return
		}
		if c.Month == month {
			return
		}
	}
	c, created, err := books.Close(ctx, st, month, "auto-close", in, now)
	if err != nil {
		log.Error("auto-close", "month", month, "err", err)
		return
	}
	if created && onClose != nil {
		if err := onClose(ctx, c.Month, c.Version); err != nil {
			log.Error("auto-close: the FOCUS export", "month", month, "err", err)
		}
	}
	if created {
		log.Info("month closed", "month", c.Month, "version", c.Version, "by", "auto-close", "sha256", c.SHA256)
	}
}
