// Package accounts is the monitor's read side (MONITOR.md 17, "One
// owner"): every figure of GPU-hours or money a view shows — the report in
// every format and grouping, the chargeback by task, the page (its month,
// its twelve months, its table by label, its Fleet section), the
// statement page of a team, the ledger, discrepancies, the statements'
// ledger and the project and fleet month series of /metrics — comes from
// here, for one set of inputs (Inputs) over one store (Sources).
//
// Guarantees:
//   - A view hands over the window, the caller's scope and the grouping;
//     it never builds a report.Query or a ledger.Query, and never calls a
//     calculation (report.Compute, ledger.Compute, books.Report, …) or the
//     store's figure statements itself (test/repository checks it).
//   - Whether a window is answered live or from a closed month's statement
//     is decided in one place per kind of figure: Report (through
//     books.Report): a whole closed month by project or by project and
//     owner is its statement's, by any other grouping the sum of the task
//     facts it froze, an open month carries its adjustments, a window
//     retention trimmed is refused; Ledger (through books.FrozenLedger):
//     a window that is exactly a closed month is grouped from the ledger
//     facts its statement froze (every --by, every scope, the page's
//     Fleet section), byte-identical to the live ledger at the close
//     whatever node report arrives later; every other window, a reopened
//     month and a statement closed before migration 0020 are live, and so
//     are discrepancies.
//   - The calculations stay in their packages: report (GPU-hours, cost,
//     budgets, the chargeback), ledger (the fleet's states,
//     discrepancies), books (statements, adjustments), focus (the FOCUS
//     rows); this package chooses which one answers and with which inputs.
package accounts

import (
	"context"
	"errors"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/access"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/books"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/ledger"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/report"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
)

// Inputs are what every figure is computed with: the deployment's prices,
// budgets, namespace mapping and split rule (serve's flags; a CLI
// command's own).
type Inputs struct {
	// Prices turn GPU-hours into cost (nil: no cost).
	Prices *report.Prices
	// Budgets are the projects' monthly budgets (nil: none).
	Budgets *report.Budgets
	// Namespaces is --namespace-projects: undeclared use charged to
	// projects (nil: none is).
	Namespaces *ledger.NamespaceProjects
	// Charge is the report's charge of undeclared use when no mapping
	// file is at hand (a test's fleet gives a function alone); nil:
	// Namespaces.Project.
	Charge func(namespace string) (project string, ok bool)
	// Split is the ledger's split rule (ledger.SplitEqual when empty);
	// Retire --node-retire (the store's default when 0).
	Split  string
	Retire time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Sources are what the accounts read: the facts of the tasks, and the
// books and the ledger's node facts when the store keeps them.
type Sources struct {
	Facts facts.Source
	// Books answer closed months from their statements (nil: every window
	// is computed from the tasks).
	Books books.Store
	// Ledger is the node reports' facts (nil: no ledger, no Fleet).
	Ledger ledger.Source
}

// Accounts are the figures of one store for one set of inputs. Build one
// with New (or Of) and hand it to every view.
type Accounts struct {
	src Sources
	in  Inputs
}

// New returns the accounts of src with in.
func New(src Sources, in Inputs) *Accounts {
	if in.Now == nil {
		in.Now = time.Now
	}
	if in.Split == "" {
		in.Split = ledger.SplitEqual
	}
	if in.Charge == nil && in.Namespaces != nil {
		in.Charge = in.Namespaces.Project
	}
	return &Accounts{src: src, in: in}
}

// Of returns the accounts of st (its tasks, its books and its ledger).
func Of(st *store.Store, in Inputs) *Accounts {
	return New(Sources{Facts: st, Books: st, Ledger: st}, in)
}

// Inputs are the accounts' inputs, defaults filled.
func (a *Accounts) Inputs() Inputs { return a.in }

// ErrNoTaskList: the store lists no tasks, so there is no chargeback.
var ErrNoTaskList = errors.New("this store lists no tasks for a statement")

// Request is a report's window, grouping and reader.
type Request struct {
	Window facts.Window
	// By are the grouping keys (facts.ParseKeys; empty: project);
	// Metrics the completion metrics whose mean is shown.
	By      []string
	Metrics []string
	// Scope is the reader's (nil: every task).
	Scope *access.Scope
	// Now is the forecast's clock (zero: Inputs.Now).
	Now time.Time
	// Live recomputes a closed month from the tasks (audit).
	Live bool
}

// reportScope is the report's Scope for a reader's scope: nil for a nil
// one (no tokens file, or an admin token: every task), so that the store
// groups the report by its keys alone, not by project and owner too.
func reportScope(scope *access.Scope) func(project, owner string) bool {
	if scope == nil {
		return nil
	}
	return scope.Allows
}

func (a *Accounts) now(t time.Time) time.Time {
	if t.IsZero() {
		return a.in.Now()
	}
	return t
}

// query is r's report query with the accounts' inputs.
func (a *Accounts) query(r Request) report.Query {
	return report.Query{Window: r.Window, By: r.By, Metrics: r.Metrics, Prices: a.in.Prices, Budgets: a.in.Budgets,
		Now: a.now(r.Now), Scope: reportScope(r.Scope), Namespaces: a.in.Charge}
}

// Report is the report of r: through the books when the store keeps them
// (a closed month from its statement, an open month with its adjustments,
// retention's refusal), else computed from the tasks.
func (a *Accounts) Report(ctx context.Context, r Request) (*report.Report, error) {
	q := a.query(r)
	if a.src.Books == nil {
		return report.Compute(ctx, a.src.Facts, q)
	}
	return books.Report(ctx, a.src.Books, q, r.Live)
}

// monthsAtOnce is how many of Months' reports are read at once: each is
// one month's reads of the store (its own connection), so the twelve
// months of the page's chart take about the time of three, not twelve
// (MONITOR.md 18: the page ≤ 2 s), within the SQLite store's eight
// readers.
const monthsAtOnce = 4

// Months are the reports by project of the n months ending with win's
// (oldest first), as Report answers each: the page's month over month and
// its chart. last, when not nil, is the report of win itself, by project
// for scope at now, that the caller already has (the page's own month):
// it is not read again. Each month is the report Report gives for it
// alone, so the chart's figures are the month's report's.
func (a *Accounts) Months(ctx context.Context, win facts.Window, n int, scope *access.Scope, now time.Time, last *report.Report) ([]*report.Report, error) {
	out := make([]*report.Report, n)
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(monthsAtOnce)
	for i := range n {
		if i == n-1 && last != nil {
			out[i] = last
			continue
		}
		g.Go(func() (err error) {
			w := facts.Month(win.From.AddDate(0, i-n+1, 0))
			out[i], err = a.Report(ctx, Request{Window: w, By: []string{"project"}, Scope: scope, Now: now})
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

// Chargeback is the chargeback statement of r's window, one line per
// task: a whole closed month's is the lines its statement kept, an open
// month's lists the late tasks it carries (books.Chargeback).
func (a *Accounts) Chargeback(ctx context.Context, r Request) (*report.Statement, error) {
	lister, ok := a.src.Facts.(report.TaskLister)
	if !ok {
		return nil, ErrNoTaskList
	}
	r.By = []string{report.TaskKey}
	return books.Chargeback(ctx, a.src.Books, lister, a.query(r))
}

// ProjectMonth is the month of now by project as Report answers it, its
// adjustments left out (MONITOR.md 20.13: budgets and /metrics exclude
// them; the month's total is the sum of the rows without
// adjustment_of): /metrics' project month series and so the budget
// alerts, the same rows and budgets the page and the report show.
func (a *Accounts) ProjectMonth(ctx context.Context, now time.Time) (*report.Report, error) {
	rep, err := a.Report(ctx, Request{Window: facts.Month(now), By: []string{"project"}, Now: now})
	if err != nil {
		return nil, err
	}
	rep.Adjustments = nil
	return rep, nil
}
