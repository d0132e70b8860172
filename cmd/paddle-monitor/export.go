package main

// export focus: the month's FOCUS file (docs/cost.md, "The FOCUS export"),
// and the --focus-* settings serve and close share with it.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/settings"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/accounts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/books"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/focus"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/report"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
)

// exportCommand is export's usage line, after statements.
var exportCommand = struct{ name, synopsis, summary string }{"export",
	"export focus --month YYYY-MM --prices FILE [--format csv|csv.gz|parquet] [--db DSN] [flags]",
	"Print the month's FOCUS 1.3 cost and usage rows (CSV, or gzip-compressed CSV) for finance's cost tools; a closed month's are the bytes kept with its statement."}

func init() {
	i := len(commands)
	for j, c := range commands {
		if c.name == "statements" {
			i = j + 1
		}
	}
	commands = slices.Insert(commands, i, exportCommand)
}

// focusEntries are the --focus-* settings.
func focusEntries[T any](field func(*T) *focus.Settings) []entry[T] {
	return []entry[T]{
		{Flag: "focus-provider", Var: "PADDLE_MONITOR_FOCUS_PROVIDER", Type: "string", Default: focus.DefaultProvider,
			Doc:   "the FOCUS export's ServiceProviderName, InvoiceIssuerName, ProviderName and PublisherName",
			Parse: str(func(c *T) *string { return &field(c).Provider })},
		{Flag: "focus-billing-account", Var: "PADDLE_MONITOR_FOCUS_BILLING_ACCOUNT", Type: "string",
			Doc:   "the FOCUS export's BillingAccountId and BillingAccountName (default: --focus-provider)",
			Parse: str(func(c *T) *string { return &field(c).BillingAccount })},
		{Flag: "focus-host-provider", Var: "PADDLE_MONITOR_FOCUS_HOST_PROVIDER", Type: "string",
			Doc:   "the FOCUS export's HostProviderName (default: --focus-provider)",
			Parse: str(func(c *T) *string { return &field(c).HostProvider })},
		{Flag: "focus-platform-account", Var: "PADDLE_MONITOR_FOCUS_PLATFORM_ACCOUNT", Type: "string", Default: focus.DefaultPlatformAccount,
			Doc:   "the FOCUS export's SubAccountId of the capacity nobody was billed for (unattributed, unallocated, unobserved)",
			Parse: str(func(c *T) *string { return &field(c).PlatformAccount })},
	}
}

// exportConfig is export focus's settings: the ledger's and --focus-*.
type exportConfig = ledgerConfig

var exportSettings = settings.Table[exportConfig]{Policy: settings.Refuse, Entries: slices.Concat(
	sourceEntries(func(c *exportConfig) *sources { return &c.sources }, "GPU prices file (JSON); its currency (ISO 4217) is the BillingCurrency", "")[:2],
	nodeEntries(func(c *exportConfig) *nodeSettings { return &c.nodes }, false),
	focusEntries(func(c *exportConfig) *focus.Settings { return &c.focus }))}

// focusConfig is the export's configuration over st: the read side's
// (accounts) for prices and the ledger's settings n.
func focusConfig(st *store.Store, prices *report.Prices, n nodeSettings, s focus.Settings) (focus.Config, error) {
	ns, err := n.namespaces()
	if err != nil {
		return focus.Config{}, err
	}
	return accounts.Of(st, accounts.Inputs{Prices: prices, Namespaces: ns, Split: n.split, Retire: n.retire}).Focus(s), nil
}

func exportCmd(args []string, stdout io.Writer) error {
	if len(args) == 0 || args[0] != "focus" {
		if len(args) > 0 && (args[0] == "--help" || args[0] == "-h") {
			return &helpRequested{command: "export", flags: "  focus   the FOCUS export (export focus --help)\n"}
		}
		return fmt.Errorf("%w: export: the one export is focus (export focus --month YYYY-MM --prices FILE)", errUsage)
	}
	fs := flagsOf("export", exportSettings)
	month := fs.String("month", "", "the month, YYYY-MM (UTC); required")
	format := fs.String("format", focus.FormatCSV, "csv, or csv.gz (gzip-compressed CSV); parquet is not built")
	if err := parseNoArgs(fs, args[1:], "export focus"); err != nil {
		return err
	}
	switch *format {
	case focus.FormatCSV, focus.FormatCSVGz:
	case "parquet":
		return fmt.Errorf("%w: export focus: --format parquet is not built (no Parquet library among this monitor's dependencies): use csv or csv.gz, which FOCUS tools import", errUsage)
	default:
		return fmt.Errorf("%w: export focus: --format %q: allowed: csv, csv.gz", errUsage, *format)
	}
	if *month == "" {
		return fmt.Errorf("%w: export focus: --month is required (YYYY-MM)", errUsage)
	}
	if _, err := facts.ParseMonth("--month", *month); err != nil {
		return badQuery(err, "")
	}
	var c exportConfig
	if err := resolve(exportSettings, &c, fs); err != nil {
		return err
	}
	prices, _, err := loadPricing(c.prices, "")
	if err != nil {
		return err
	}
	if err := focus.CheckPrices(prices); err != nil {
		return fmt.Errorf("%w: export focus: --prices: %v", errUsage, err)
	}
	ctx, st, done, err := openStore(c.db, "export focus")
	if err != nil {
		return err
	}
	defer done()
	cfg, err := focusConfig(st, prices, c.nodes, c.focus)
	if err != nil {
		return err
	}
	b, err := focus.Bytes(ctx, cfg, st, *month, *format, nil)
	if errors.Is(err, facts.ErrBadQuery) {
		return badQuery(err, "")
	}
	if err != nil {
		return err
	}
	_, err = stdout.Write(b)
	return err
}

// storeFocusExports keeps the FOCUS export of a month just closed from the
// CLI, when the close has prices the export can bill in (otherwise its
// first export keeps one).
func storeFocusExports(ctx context.Context, st *store.Store, lc ledgerConfig, s focus.Settings, in books.Inputs, c *store.Closed) error {
	if focus.CheckPrices(in.Prices) != nil {
		return nil
	}
	cfg, err := focusConfig(st, in.Prices, lc.nodes, s)
	if err != nil {
		return err
	}
	_, err = focus.StoreClosed(ctx, cfg, st, c.Month, c.Version)
	return err
}

// focusOnClose keeps the export of each month --auto-close closes.
func focusOnClose(st *store.Store, cfg *focus.Config) func(ctx context.Context, month string, version int) error {
	return func(ctx context.Context, month string, version int) error {
		if focus.CheckPrices(cfg.Prices) != nil {
			return nil
		}
		ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		defer cancel()
		_, err := focus.StoreClosed(ctx, *cfg, st, month, version)
		return err
	}
}
