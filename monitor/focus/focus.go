// Package focus exports a month's GPU bill as FOCUS rows (the FinOps
// Foundation's cost and usage format, 1.3; docs/cost.md, "The FOCUS
// export"), so that finance imports it beside its cloud bills.
//
// Guarantees:
//   - Every figure comes from the report and the ledger packages (and the
//     books for adjustments): report.Compute over one UTC day at a time,
//     split by billing basis by handing it the store's observations in
//     parts (declared, attributed, undeclared), and ledger.Compute by
//     model for the platform's capacity nobody was billed for. The
//     projects' rows add up nothing the report does not; the platform's
//     offset (offset.go) prices declared GPU-seconds by the report's rule
//     for an entry (report.Prices.EntryPrice).
//   - One row per (day, project, owner, model and profile, basis, ledger
//     state); the platform's unattributed, unallocated and unobserved
//     capacity are rows of its own sub-account, the unobserved ones less
//     what tasks were billed on the declared basis for the same GPUs and
//     instants (GPU-second by GPU-second, never below zero), so that Σ
//     BilledCost of the month's usage rows = the ledger's capacity cost +
//     Σ over GPU-seconds of max(0, declared cost − unobserved cost), GPUs
//     and instants outside the ledger counting with unobserved cost 0
//     (MONITOR.md 20.15, exactly).
//   - BilledCost = EffectiveCost = ListCost = ContractedCost =
//     ListUnitPrice × PricingQuantity on every usage row (no discounts).
//   - A closed month's late data of earlier months are rows with
//     ChargeClass "Correction", keeping the day of the month they correct
//     as their charge period (20.17).
//   - Rows come out in one order (day, sub-account, owner, SKU, basis,
//     state), so the same inputs give the same bytes.
package focus

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/access"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/books"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/ledger"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/report"
)

// Settings are the FOCUS export's deployment settings (--focus-*).
type Settings struct {
	// Provider is --focus-provider: InvoiceIssuerName, ServiceProviderName,
	// ProviderName and PublisherName.
	Provider string
	// BillingAccount is --focus-billing-account (default Provider).
	BillingAccount string
	// HostProvider is --focus-host-provider (default Provider).
	HostProvider string
	// PlatformAccount is --focus-platform-account: the sub-account of the
	// capacity nobody was billed for.
	PlatformAccount string
}

// Defaults of the settings.
const (
	DefaultProvider        = "paddle-monitor"
	DefaultPlatformAccount = "platform"
)

// WithDefaults fills the empty settings.
func (s Settings) WithDefaults() Settings {
	if s.Provider == "" {
		s.Provider = DefaultProvider
	}
	if s.BillingAccount == "" {
		s.BillingAccount = s.Provider
	}
	if s.HostProvider == "" {
		s.HostProvider = s.Provider
	}
	if s.PlatformAccount == "" {
		s.PlatformAccount = DefaultPlatformAccount
	}
	return s
}

// Source is what an export reads (a *store.Store).
type Source interface {
	facts.Source
	report.TaskLister
}

// Config is what Generate needs.
type Config struct {
	Source Source
	// Books answer adjustments and closed months (nil: none).
	Books books.Store
	// Ledger is the ledger's source (nil: no platform rows).
	Ledger     ledger.Source
	Prices     *report.Prices
	Namespaces *ledger.NamespaceProjects
	// Split is the ledger's split rule (equal when empty); Retire
	// --node-retire.
	Split  string
	Retire time.Duration
	Settings
}

// ErrCurrency: the export needs a prices file whose currency is an ISO
// 4217 code (FOCUS's BillingCurrency).
var ErrCurrency = errors.New("focus: the prices file's currency must be an ISO 4217 code")

// iso4217 is the form of an ISO 4217 alphabetic code.
var iso4217 = regexp.MustCompile(`^[A-Z]{3}$`)

// CheckPrices returns ErrCurrency (wrapped, naming the currency) unless p
// is a prices file the export can bill in.
func CheckPrices(p *report.Prices) error {
	if p == nil {
		return fmt.Errorf("%w: no prices file is loaded (the export bills in its currency)", ErrCurrency)
	}
	if !iso4217.MatchString(p.Currency) {
		return fmt.Errorf("%w (three capital letters, such as EUR, USD or CNY): %q", ErrCurrency, p.Currency)
	}
	return nil
}

// Export is a month's rows.
type Export struct {
	Month   string
	Window  facts.Window
	Version int // the statement's version; 0 while the month is open
	Rows    []Row
}

// Generate computes month's export for scope (nil: everything, the
// platform's rows too; a team's scope: its projects' rows only).
func Generate(ctx context.Context, cfg Config, month string, scope *access.Scope) (*Export, error) {
	w, err := facts.ParseMonth("month", month)
	if err != nil {
		return nil, err
	}
	if err := CheckPrices(cfg.Prices); err != nil {
		return nil, err
	}
	cfg.Settings = cfg.Settings.WithDefaults()
	if cfg.Split == "" {
		cfg.Split = ledger.SplitEqual
	}
	out := &Export{Month: month, Window: w}
	if cfg.Books != nil {
		c, err := cfg.Books.Statement(ctx, month)
		if err != nil {
			return nil, err
		}
		if c != nil {
			out.Version = c.Version
		}
	}
	g := &gen{cfg: cfg, month: w, scope: scope, version: out.Version, now: time.Now(), decl: &declaredOnce{}, tasks: &monthTasks{}}
	days, err := g.days(ctx)
	if err != nil {
		return nil, err
	}
	for _, rows := range days {
		out.Rows = append(out.Rows, rows...)
	}
	corr, err := g.corrections(ctx)
	if err != nil {
		return nil, fmt.Errorf("focus: corrections: %w", err)
	}
	out.Rows = append(out.Rows, corr...)
	slices.SortStableFunc(out.Rows, compareRows)
	return out, nil
}

// daysAtOnce is how many days of the export are computed at once: each
// day's reads are its own (its own connection of the store), so a month
// takes about the time of eight days, not thirty (MONITOR.md 18: the
// export ≤ 2 s), within the SQLite store's eight readers.
const daysAtOnce = 4

// days are the rows of each day of the month, in the days' order: the
// days are computed daysAtOnce at a time, each as g.day computes it
// alone, so the rows are those of the days one after the other.
func (g *gen) days(ctx context.Context) ([][]Row, error) {
	var starts []time.Time
	for day := g.month.From; day.Before(g.month.To); day = day.AddDate(0, 0, 1) {
		starts = append(starts, day)
	}
	out := make([][]Row, len(starts))
	eg, ctx := errgroup.WithContext(ctx)
	eg.SetLimit(daysAtOnce)
	for i, day := range starts {
		eg.Go(func() (err error) {
			if out[i], err = g.day(ctx, facts.Window{From: day, To: day.AddDate(0, 0, 1)}); err != nil {
				return fmt.Errorf("focus: %s: %w", day.Format(time.DateOnly), err)
			}
			return nil
		})
	}
	if err := eg.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

// compareRows is the export's order.
func compareRows(a, b Row) int {
	for _, c := range [][2]string{
		{a.ChargeClass, b.ChargeClass},
		{a.ChargePeriodStart.Format(time.RFC3339), b.ChargePeriodStart.Format(time.RFC3339)},
		{a.SubAccountID, b.SubAccountID}, {a.owner, b.owner}, {a.SkuID, b.SkuID},
		{a.BillingBasis, b.BillingBasis}, {a.LedgerState, b.LedgerState}, {a.ChargeDescription, b.ChargeDescription},
	} {
		if n := strings.Compare(c[0], c[1]); n != 0 {
			return n
		}
	}
	return 0
}
