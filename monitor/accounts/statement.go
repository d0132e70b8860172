package accounts

import (
	"context"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/access"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/books"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/report"
)

// ProjectReport is one project's part of closed month win that the
// reader's scope allows, for the statement page of a team: the
// statement's report narrowed to the project. A reader of some owners'
// tasks only, who may not see every owner of the project's, reads the
// statement by project and owner narrowed to its owners, their rows
// summed into the project's one row (the figures the same reader's
// report and chargeback show), without the budget: the project's budget
// is spent by owners it may not read.
func (a *Accounts) ProjectReport(ctx context.Context, win facts.Window, project string, scope *access.Scope, now time.Time) (*report.Report, error) {
	q := report.Query{Window: win, By: []string{"project"}, Prices: a.in.Prices, Budgets: a.in.Budgets, Now: now,
		Scope: func(p, _ string) bool { return p == project }}
	whole, err := books.Report(ctx, a.src.Books, q, false)
	if err != nil || scope == nil || len(scope.Owners) == 0 {
		return whole, err
	}
	q.By, q.Budgets = []string{"project", "owner"}, nil
	owners, err := books.Report(ctx, a.src.Books, q, false)
	if err != nil {
		return nil, err
	}
	q.Scope = func(p, owner string) bool { return p == project && scope.Allows(p, owner) }
	mine, err := books.Report(ctx, a.src.Books, q, false)
	if err != nil {
		return nil, err
	}
	if len(mine.Rows) == len(owners.Rows) {
		// Every owner's rows: the project's figures and budget, with the
		// late tasks the reader may see.
		whole.Adjustments = mine.Adjustments
		return whole, nil
	}
	out := *mine
	out.By, out.Rows = []string{"project"}, []report.Row{}
	if len(mine.Rows) > 0 {
		out.Rows = append(out.Rows, report.Row{Key: map[string]string{"project": project}, Figures: mine.Total})
	}
	return &out, nil
}

// ProjectLines are the chargeback lines of project in month win that the
// reader's scope allows, for the statement page of a team (nil when the
// store lists no tasks).
func (a *Accounts) ProjectLines(ctx context.Context, win facts.Window, project string, scope *access.Scope) (*report.Statement, error) {
	lister, ok := a.src.Books.(report.TaskLister)
	if !ok {
		return nil, nil
	}
	q := report.Query{Window: win, Prices: a.in.Prices,
		Scope: func(p, owner string) bool { return p == project && (scope == nil || scope.Allows(p, owner)) }}
	if a.in.Namespaces != nil {
		q.Namespaces = a.in.Namespaces.Project
	}
	return books.Chargeback(ctx, a.src.Books, lister, q)
}
