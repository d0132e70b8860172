package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/settings"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/access"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/accounts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/focus"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
)

// shutdownGrace bounds how long SIGTERM waits for requests in flight
// (Kubernetes' default grace period is 30 s).
const shutdownGrace = 10 * time.Second

// serveConfig is serve's settings after flags and environment.
type serveConfig struct {
	listen, tokens      string
	sources             // db, prices, budgets
	openTTL, claimGrace time.Duration
	execTTL             time.Duration
	maxOpenPerToken     int
	maxInFlight         int
	metricsAuth         bool
	level, format       string
	nodes               nodeSettings          // node reports and the ledger (nodes.go)
	fleet               *monitor.LedgerConfig // the ledger's configuration, once the store is open
	accounts            *accounts.Accounts    // every view's figures, once the store is open
	log                 *slog.Logger
	books               booksSettings  // --auto-close, --retain (books.go)
	focus               focus.Settings // --focus-* (export.go)
	hourlyRetention     time.Duration  // --hourly-retention (hourly.go)
}

// serveSettings are serve's settings (docs/monitor.md, Settings).
var serveSettings = settings.Table[serveConfig]{Policy: settings.Refuse, Entries: slices.Concat([]entry[serveConfig]{
	{Flag: "listen", Var: "PADDLE_MONITOR_LISTEN", Type: "string", Default: "127.0.0.1:8080", Doc: "address to listen on",
		Parse: str(func(c *serveConfig) *string { return &c.listen })},
	{Flag: "tokens", Var: "PADDLE_MONITOR_TOKENS", Type: "string", Doc: "tokens file (JSON); none: everything open",
		Parse: str(func(c *serveConfig) *string { return &c.tokens })},
}, sourceEntries(func(c *serveConfig) *sources { return &c.sources },
	"GPU prices file (JSON) for the report", "monthly budgets of projects (JSON); a cost budget needs --prices"), []entry[serveConfig]{
	{Flag: "log-level", Var: "PADDLE_MONITOR_LOG", Type: "string", Default: "info", Doc: "debug, info, warn or error",
		Parse: str(func(c *serveConfig) *string { return &c.level })},
	{Flag: "log-format", Var: "PADDLE_MONITOR_LOG_FORMAT", Type: "string", Default: "text", Doc: "text or json",
		Parse: str(func(c *serveConfig) *string { return &c.format })},
	{Flag: "open-ttl", Var: "PADDLE_MONITOR_OPEN_TTL", Type: "duration", Default: (168 * time.Hour).String(),
		Doc:   "open tasks not seen for this long leave /metrics",
		Parse: func(c *serveConfig, s string) (err error) { c.openTTL, err = settings.PositiveDuration(s); return err }},
	{Flag: "exec-ttl", Var: "PADDLE_MONITOR_EXEC_TTL", Type: "duration", Default: monitor.DefaultExecTTL.String(),
		Doc:   "an open task that reported nothing since its start (exec mode: no heartbeat, no completion) leaves /metrics this long after its start",
		Parse: func(c *serveConfig, s string) (err error) { c.execTTL, err = settings.PositiveDuration(s); return err }},
	{Flag: "claim-grace", Var: "PADDLE_MONITOR_CLAIM_GRACE", Type: "duration", Default: store.DefaultClaimGrace.String(),
		Doc: "a task of another token's scope keeps its GPU claim until not seen for this long",
		Parse: func(c *serveConfig, s string) (err error) {
			c.claimGrace, err = settings.PositiveDuration(s)
			return err
		}},
	{Flag: "max-open-per-token", Var: "PADDLE_MONITOR_MAX_OPEN_PER_TOKEN", Type: "int", Default: strconv.Itoa(store.DefaultMaxOpenPerToken),
		Doc:   "open tasks and pending completions a token may have (admin tokens: no bound; no tokens file: for all)",
		Parse: func(c *serveConfig, s string) (err error) { c.maxOpenPerToken, err = settings.Positive(s); return err }},
	{Flag: "max-in-flight", Var: "PADDLE_MONITOR_MAX_IN_FLIGHT", Type: "int", Default: strconv.Itoa(monitor.DefaultMaxInFlight),
		Doc:   "write requests handled at once (then 503 with Retry-After)",
		Parse: func(c *serveConfig, s string) (err error) { c.maxInFlight, err = settings.Positive(s); return err }},
	{Flag: "metrics-auth", Var: "PADDLE_MONITOR_METRICS_AUTH", Type: "bool", Default: "false", Alone: "true",
		Doc:   "/metrics needs an admin token (or a viewer of every project)",
		Parse: func(c *serveConfig, s string) (err error) { c.metricsAuth, err = settings.Bool(s); return err }},
}, nodeEntries(func(c *serveConfig) *nodeSettings { return &c.nodes }, true),
	booksEntries(func(c *serveConfig) *booksSettings { return &c.books }),
	focusEntries(func(c *serveConfig) *focus.Settings { return &c.focus }),
	hourlyEntries(func(c *serveConfig) *time.Duration { return &c.hourlyRetention }))}

func parseServe(args []string, stderr io.Writer) (*serveConfig, error) {
	fs := flagsOf("serve", serveSettings)
	c := &serveConfig{}
	if err := settle(fs, args, "serve", serveSettings, c); err != nil {
		return nil, err
	}
	if c.metricsAuth && c.tokens == "" {
		return nil, fmt.Errorf("%w: --metrics-auth needs --tokens (an admin token must exist)", errUsage)
	}
	var err error
	if c.log, err = newLogger(stderr, c.level, c.format); err != nil {
		return nil, err
	}
	return c, nil
}

// serve runs the monitor until SIGTERM or SIGINT: then it stops accepting,
// lets requests in flight finish (at most shutdownGrace), closes the
// database and returns nil (exit 0).
func serve(args []string, stderr io.Writer) error {
	c, err := parseServe(args, stderr)
	if err != nil {
		return err
	}
	log := c.log.With("logger", "paddle-monitor")
	// Signals are caught from the start: a SIGTERM while the database
	// opens still ends in an orderly exit 0.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	log.Debug("settings", "listen", c.listen, "tokens", c.tokens, "prices", c.prices, "open_ttl", c.openTTL.String(), "metrics_auth", c.metricsAuth,
		"claim_grace", c.claimGrace.String(), "max_open_per_token", c.maxOpenPerToken, "max_in_flight", c.maxInFlight)

	var tokens atomic.Pointer[access.Set]
	if c.tokens != "" {
		set, err := access.Load(c.tokens)
		if err != nil {
			return err
		}
		tokens.Store(set)
		log.Info("tokens loaded", "file", c.tokens, "tokens", set.Len())
	} else {
		log.Warn("no tokens file (--tokens): every write and read is open to anyone who can reach the monitor")
	}

	// Prices and budgets are read before the database opens: a bad file
	// is refused at once, naming the file and the field.
	prices, budgets, err := loadPricing(c.prices, c.budgets)
	if err != nil {
		return err
	}
	if prices != nil {
		log.Info("prices loaded", "file", c.prices, "currency", prices.Currency)
	}
	if budgets != nil {
		log.Info("budgets loaded", "file", c.budgets)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	st, err := store.Open(ctx, c.db, store.Options{ClaimGrace: c.claimGrace, OpenTTL: c.openTTL,
		MaxOpenPerToken: c.maxOpenPerToken, Log: log})
	cancel()
	if err != nil {
		return err
	}
	defer st.Close()
	// A restore refuses a SQLite file while this lock is held (books.go).
	release, err := store.HoldStore(c.db)
	if err != nil {
		return err
	}
	defer release()
	log.Info("database ready", "engine", st.Dialect(), "schema_version", store.SchemaVersion())

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	api := monitor.New(monitor.Config{
		Store:       st,
		Tokens:      tokens.Load,
		Registry:    reg,
		MetricsAuth: c.metricsAuth,
		Log:         log,
		MaxInFlight: c.maxInFlight,
		Prices:      prices,
	})
	if c.fleet, err = fleetConfig(st, c, prices); err != nil {
		return err
	}
	// One read side for every view: the report, the page, the ledger,
	// the statements and /metrics compute with the same inputs.
	c.accounts = accounts.Of(st, accounts.Inputs{Prices: prices, Budgets: budgets, Namespaces: c.fleet.Namespaces,
		Split: c.fleet.Split, Retire: c.fleet.Retire})
	c.fleet.Accounts = c.accounts
	if err := mountReport(api, reg, st, c, prices, budgets, log); err != nil {
		return err
	}
	nodesCtx, stopNodes := context.WithCancel(context.Background())
	defer stopNodes()
	if err := mountNodes(nodesCtx, api, st, &c.nodes, log); err != nil {
		return err
	}
	mountLedger(api, c.fleet)
	registerFleet(reg, st, c.fleet, log)

	stopBooks, err := startBooks(api, reg, st, c, log)
	if err != nil {
		return err
	}
	defer stopBooks()
	defer startHourly(st, c.hourlyRetention, log)()

	ln, err := net.Listen("tcp", c.listen)
	if err != nil {
		return fmt.Errorf("--listen %s: %w", c.listen, err)
	}
	srv := &http.Server{
		Handler:           api,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      120 * time.Second,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	log.Info("listening", "addr", ln.Addr().String())

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	reload := startReloader(log, c.tokens, &tokens)
	defer close(reload)
	for {
		select {
		case err := <-served:
			return fmt.Errorf("serving: %w", err)
		case sig := <-sigs:
			if sig == syscall.SIGHUP {
				// The reload runs on its own goroutine: whatever the file
				// does, this loop still answers SIGTERM at once.
				select {
				case reload <- struct{}{}:
				default:
					log.Info("SIGHUP: a reload of the tokens file is already pending")
				}
				continue
			}
			log.Info("stopping", "signal", sig.String())
			ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
			err := srv.Shutdown(ctx)
			cancel()
			if err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Warn("requests still in flight at the end of the grace period were cut", "err", err)
			}
			log.Info("stopped")
			return nil
		}
	}
}

// startReloader starts the goroutine that reloads the tokens file, once
// for each value received on the channel returned (one pending at most:
// SIGHUPs that come while a reload waits are the same reload); closing the
// channel ends it.
func startReloader(log *slog.Logger, path string, tokens *atomic.Pointer[access.Set]) chan<- struct{} {
	reload := make(chan struct{}, 1)
	go func() {
		for range reload {
			reloadTokens(log, path, tokens)
		}
	}()
	return reload
}

// reloadTokens re-reads the tokens file on SIGHUP. A file that no longer
// loads keeps the tokens in force (an editing mistake must not open the
// monitor or lock everyone out).
func reloadTokens(log *slog.Logger, path string, tokens *atomic.Pointer[access.Set]) {
	if path == "" {
		log.Warn("SIGHUP: no tokens file to reload (--tokens)")
		return
	}
	set, err := access.Load(path)
	if err != nil {
		log.Error("SIGHUP: the tokens file does not load; the previous tokens stay in force", "err", err)
		return
	}
	tokens.Store(set)
	log.Info("tokens reloaded", "file", path, "tokens", set.Len())
}
