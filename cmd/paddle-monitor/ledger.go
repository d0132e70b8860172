package main

import (
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/focus"

	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/settings"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/accounts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/ledger"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/report"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/termtable"
)

// fleetConfig is the ledger's configuration of serve (also the page's
// "Fleet" section's).
func fleetConfig(st *store.Store, c *serveConfig, prices *report.Prices) (*monitor.LedgerConfig, error) {
	ns, err := c.nodes.namespaces()
	if err != nil {
		return nil, err
	}
	return &monitor.LedgerConfig{Source: st, Prices: prices, Namespaces: ns, Split: c.nodes.split, Retire: c.nodes.retire}, nil
}

// mountLedger adds GET /v1/ledger and GET /v1/discrepancies.
func mountLedger(api *monitor.API, cfg *monitor.LedgerConfig) {
	monitor.MountLedger(api, *cfg)
}

// ledgerConfig is the settings of ledger and discrepancies.
type ledgerConfig struct {
	sources
	nodes nodeSettings
	focus focus.Settings // close and export focus only (export.go)
}

// ledgerSettings: the database, the prices and the ledger's settings.
var ledgerSettings = settings.Table[ledgerConfig]{Policy: settings.Refuse, Entries: slices.Concat(
	sourceEntries(func(c *ledgerConfig) *sources { return &c.sources }, "GPU prices file (JSON)", "")[:2],
	nodeEntries(func(c *ledgerConfig) *nodeSettings { return &c.nodes }, false))}

// ledgerCmd is `paddle-monitor ledger` and `paddle-monitor discrepancies`.
func ledgerCmd(name string, args []string, stdout io.Writer) error {
	fs := flagsOf(name, ledgerSettings)
	from := fs.String("from", "", "start of the window, included (a whole hour): RFC 3339, YYYY-MM-DD or YYYY-MM; with --to, wins over --month")
	to := fs.String("to", "", "end of the window, excluded (a whole hour); with --from")
	month := fs.String("month", "", "calendar month YYYY-MM (UTC); default: the current month")
	var by, format *string
	var columns *[]string
	var wide *bool
	if name == "ledger" {
		by = fs.String("by", ledger.ByNode, "node, model, project, namespace or state")
		format = fs.String("format", "table", "table, csv or json")
		columns = fs.StringSlice("columns", nil, "table: the columns to show, comma-separated, names as in the JSON and CSV (the key always first)")
		wide = fs.Bool("wide", false, "table: show every column, however wide (default: what fits 120 columns)")
	} else {
		// JSON stays the default: scripts read it since wave 4.
		format = fs.String("format", "json", "table, csv or json")
	}
	var c ledgerConfig
	if err := settle(fs, args, name, ledgerSettings, &c); err != nil {
		return err
	}
	ns, err := c.nodes.namespaces()
	if err != nil {
		return err
	}
	in := accounts.Inputs{Namespaces: ns, Split: c.nodes.split, Retire: c.nodes.retire}
	q := accounts.LedgerRequest{By: ledger.ByNode, Now: time.Now()}
	if by != nil {
		q.By = *by
	}
	q.Window, err = facts.WindowParams{From: *from, To: *to, Month: *month, FromName: "--from", ToName: "--to", MonthName: "--month"}.Select(q.Now)
	if err != nil {
		return badQuery(err, "")
	}
	if err := in.CheckLedger(q); err != nil {
		return fmt.Errorf("%w: %s", errUsage, strings.TrimPrefix(err.Error(), ledger.ErrBadQuery.Error()+": "))
	}
	if wide == nil {
		wide, columns = new(bool), new([]string)
	}
	if format != nil {
		if err := checkFormat(*format, *wide, *columns); err != nil {
			return err
		}
	}
	if in.Prices, _, err = loadPricing(c.prices, ""); err != nil {
		return err
	}
	ctx, st, done, err := openStore(c.db, name)
	if err != nil {
		return err
	}
	defer done()
	acc := accounts.Of(st, in)
	if name == "discrepancies" {
		d, err := acc.Discrepancies(ctx, q)
		if err != nil {
			return err
		}
		return ledger.WriteDiscrepancies(stdout, d, *format)
	}
	l, err := acc.Ledger(ctx, q)
	if err != nil {
		return err
	}
	if *format != "table" {
		return ledger.Write(stdout, l, *format)
	}
	if _, err := termtable.Select(l.TableColumns(), termtable.Options{Columns: *columns}); err != nil {
		return fmt.Errorf("%w: --columns: %w", errUsage, err)
	}
	return ledger.WriteTable(stdout, l, termtable.Options{Columns: *columns, Wide: *wide})
}
