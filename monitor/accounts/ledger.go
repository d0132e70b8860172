package accounts

import (
	"context"
	"encoding/json"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/access"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/books"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/focus"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/ledger"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
)

// LedgerRequest is a ledger's window, grouping and reader.
type LedgerRequest struct {
	Window facts.Window
	// By is ledger.ByNode, ByModel, …. There is no split rule here: it
	// is the deployment's (Inputs.Split, MONITOR.md 20.12), the same for
	// every request and every view.
	By string
	// Scope is the reader's (nil: the whole fleet, an admin).
	Scope *access.Scope
	// Now is the clock (zero: the store's, as ledger.Compute reads it).
	Now time.Time
}

// ledgerQuery is r's ledger query with in.
func (in Inputs) ledgerQuery(r LedgerRequest) ledger.Query {
	return ledger.Query{Window: r.Window, By: r.By, Split: in.Split, Prices: in.Prices, Namespaces: in.Namespaces, Scope: r.Scope,
		Retire: in.Retire, Now: r.Now}
}

// CheckLedger returns r's problem (ledger.ErrBadQuery or
// facts.ErrBadQuery, naming the parameter), before any store is opened.
func (in Inputs) CheckLedger(r LedgerRequest) error {
	q := in.ledgerQuery(r)
	return q.Check()
}

// Ledger is the ledger of r: every GPU-hour of the fleet in its five
// states. A window that is exactly a closed month (its statement in
// force) is grouped from the ledger facts the statement froze, with the
// close's prices, namespace mapping, split rule and --node-retire
// (MONITOR.md 17 invariant 3): the ledger the month had at its close,
// whatever node report is stored since. Every other window, a reopened
// month and a statement that froze no ledger (closed before migration
// 0020) are computed live.
func (a *Accounts) Ledger(ctx context.Context, r LedgerRequest) (*ledger.Ledger, error) {
	q := a.in.ledgerQuery(r)
	if err := q.Check(); err != nil {
		return nil, err
	}
	if a.src.Books != nil {
		f, err := books.FrozenLedger(ctx, a.src.Books, r.Window)
		if err != nil {
			return nil, err
		}
		if f != nil {
			return ledger.Group(f, q)
		}
	}
	return ledger.Compute(ctx, a.src.Ledger, q)
}

// Discrepancies are r's discrepancies between what tasks declared and what
// the node reports observed, by the money at stake.
func (a *Accounts) Discrepancies(ctx context.Context, r LedgerRequest) (*ledger.Discrepancies, error) {
	return ledger.FindDiscrepancies(ctx, a.src.Ledger, a.in.ledgerQuery(r))
}

// Fleet is the page's Fleet section's figures of the month win: the
// ledger by model and its discrepancies; nil, nil when the store keeps no
// ledger or no node report counts in the window.
func (a *Accounts) Fleet(ctx context.Context, win facts.Window, scope *access.Scope, now time.Time) (*ledger.Ledger, *ledger.Discrepancies, error) {
	if a.src.Ledger == nil {
		return nil, nil, nil
	}
	r := LedgerRequest{Window: win, By: ledger.ByModel, Scope: scope, Now: now}
	l, err := a.Ledger(ctx, r)
	if err != nil {
		return nil, nil, err
	}
	if len(l.Rows) == 0 {
		return nil, nil, nil
	}
	d, err := a.Discrepancies(ctx, r)
	if err != nil {
		return nil, nil, err
	}
	return l, d, nil
}

// FleetMonth is the ledger by model of the month of now, the query the
// page's Fleet section asks for its month (prices included): /metrics'
// fleet month series (GPU-seconds per state) are the Fleet section's.
func (a *Accounts) FleetMonth(ctx context.Context, now time.Time) (*ledger.Ledger, error) {
	return a.Ledger(ctx, LedgerRequest{Window: facts.Month(now), By: ledger.ByModel, Now: now})
}

// StatementLedger is the statements' ledger hook: the month's ledger
// facts for every reader, computed live with the accounts' inputs (the
// month is not closed yet), and the month's ledger by state grouped from
// them (as `paddle-monitor ledger --by state` prints it in JSON), or
// null when no node report covers the month.
func (a *Accounts) StatementLedger() books.Ledger {
	return func(ctx context.Context, w facts.Window) (*store.LedgerFacts, json.RawMessage, error) {
		q := a.in.ledgerQuery(LedgerRequest{Window: w, By: ledger.ByState, Now: time.Now()})
		f, err := ledger.Facts(ctx, a.src.Ledger, q)
		if err != nil {
			return nil, nil, err
		}
		l, err := ledger.Group(f, q)
		if err != nil {
			return nil, nil, err
		}
		if l.Total.Capacity == nil || *l.Total.Capacity == 0 {
			return f, nil, nil
		}
		b, err := json.Marshal(l)
		return f, b, err
	}
}

// Focus is the FOCUS export's configuration with the accounts' inputs and
// settings s: the export's rows are computed by package focus from the
// same store, prices, namespace mapping and split rule as every other
// view.
func (a *Accounts) Focus(s focus.Settings) focus.Config {
	return focus.Config{Source: a.src.Facts.(focus.Source), Books: a.src.Books, Ledger: a.src.Ledger, Prices: a.in.Prices,
		Namespaces: a.in.Namespaces, Split: a.in.Split, Retire: a.in.Retire, Settings: s}
}
