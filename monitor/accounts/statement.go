package accounts

import (
	"context"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/access"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/books"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/report"
)

// ProjectReport is one project's part of closed month win, for the
// statement page of a team: the statement's report narrowed to the
// project (its rows are by project, with no owner to narrow by).
func (a *Accounts) ProjectReport(ctx context.Context, win facts.Window, project string, now time.Time) (*report.Report, error) {
	q := report.Query{Window: win, By: []string{"project"}, Prices: a.in.Prices, Budgets: a.in.Budgets, Now: now,
		Scope: func(p, _ string) bool { return p == project }}
	return books.Report(ctx, a.src.Books, q, false)
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
