// Package books closes months: a closed month's statement is its report by
// project and by project and owner, with the prices and budgets used (and
// the ledger's states when the monitor keeps a ledger), frozen with the
// time it was closed and the SHA-256 of its canonical JSON; beside it the
// month's task facts (store.Frozen), from which both reports are computed,
// and its ledger facts (store.LedgerFacts), from which the ledger's states
// are grouped.
//
// Guarantees:
//   - A closed month's report (by project, or by project and owner) is
//     the statement's, byte for byte, whatever is stored later; by any
//     other grouping without metrics it is summed from the frozen task
//     facts (the live report of the month at the close), so every grouping
//     adds up to the statement's total; Live recomputes it from the tasks.
//   - A closed month's ledger facts are those of the close (FrozenLedger),
//     whatever node report is stored later; their SHA-256 is in the
//     statement (ledger_facts_sha256), so its hash covers them.
//   - Late data is never lost: what changes a closed month after its close
//     (a late registration, a completion or a heartbeat of a task open at
//     the close) is counted in the next open month as adjustment rows per
//     project (adjustment_of), each task listed, and frozen into that
//     month's statement when it closes.
//   - Closing is idempotent; reopening keeps the old version, and the next
//     close makes a new one.
//   - The canonical JSON is the statement's compact encoding as stored
//     (fields in the order of Statement, map keys sorted, no spaces); the
//     hash is over exactly those bytes, which `paddle-monitor statements
//     --json` prints.
package books

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/report"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
)

// Store is what the books need of the store.
type Store interface {
	facts.Source
	Statement(ctx context.Context, month string) (*store.Closed, error)
	Statements(ctx context.Context) ([]store.Closed, error)
	CloseMonth(ctx context.Context, req store.CloseRequest, build store.Build, hash func([]byte) string) (*store.Closed, bool, error)
	ReopenMonth(ctx context.Context, month, by string) (*store.Closed, error)
	LateTasks(ctx context.Context, c store.Closed) ([]store.LateTask, error)
	StatementBody(ctx context.Context, month string, version int) ([]byte, error)
	StatementReport(ctx context.Context, month string, version int, owner bool) ([]byte, error)
	TrimmedBefore(ctx context.Context) (time.Time, error)
	ReportCut(ctx context.Context) (*int64, error)
}

// Ledger returns the ledger of a window for a statement: its facts
// (package ledger's, for every reader), which the statement freezes and
// a closed month's ledger is grouped from, and its states grouped from
// them as JSON (nil when no node report covers the window). It is the
// statement's hook for node reports: nil when the monitor keeps no
// ledger.
type Ledger func(ctx context.Context, w facts.Window) (*store.LedgerFacts, json.RawMessage, error)

// Inputs are what a statement is computed with.
type Inputs struct {
	Prices  *report.Prices
	Budgets *report.Budgets
	// PricesJSON and BudgetsJSON are the files' contents, stored in the
	// statement as they were used (nil: none).
	PricesJSON, BudgetsJSON []byte
	// Namespaces charges undeclared use to projects (--namespace-projects)
	// as the live report does, so a statement bills what the serving
	// monitor billed; NamespacesJSON is the file, stored in the statement
	// (nil: no mapping, and the field is left out).
	Namespaces     func(namespace string) (project string, ok bool)
	NamespacesJSON []byte
	Ledger         Ledger
}

// Statement is a closed month's statement, as stored (its canonical JSON).
type Statement struct {
	Month    string          `json:"month"`
	Version  int             `json:"version"`
	From     time.Time       `json:"from"`
	To       time.Time       `json:"to"`
	ClosedAt time.Time       `json:"closed_at"`
	ClosedBy string          `json:"closed_by"`
	Currency *string         `json:"currency"`
	Prices   json.RawMessage `json:"prices"`
	Budgets  json.RawMessage `json:"budgets"`
	// NamespaceProjects is the --namespace-projects mapping the statement
	// charged undeclared use with (absent without one).
	NamespaceProjects json.RawMessage     `json:"namespace_projects,omitempty"`
	ByProject         *report.Report      `json:"by_project"`
	ByProjectOwner    *report.Report      `json:"by_project_owner"`
	Adjustments       []report.Adjustment `json:"adjustments"`
	// Ledger is the ledger's states of the month (null without node
	// reports), grouped from the ledger facts the statement froze.
	Ledger json.RawMessage `json:"ledger"`
	// ReportCut is the last node report time the statement includes
	// (MONITOR.md 20.14; absent without node reports, so a statement of a
	// fleet without them is as before): a report stored after the close
	// is an observed_after_close adjustment of a later month.
	ReportCut *time.Time `json:"report_cut,omitempty"`
	// TaskFactsSHA256 is the SHA-256 (hex) of the task facts the
	// statement froze, as canonical JSON Lines (store.Frozen.JSONLines;
	// MONITOR.md 20.10), so the statement's own hash covers them too
	// (absent where the store froze none).
	TaskFactsSHA256 string `json:"task_facts_sha256,omitempty"`
	// LedgerFactsSHA256 is the SHA-256 (hex) of the ledger facts the
	// statement froze, as canonical JSON Lines (store.LedgerFacts.JSONLines;
	// MONITOR.md 20.10), so the statement's own hash covers the closed
	// month's ledger too (absent where it froze none: no ledger).
	LedgerFactsSHA256 string `json:"ledger_facts_sha256,omitempty"`
}

// Errors of the books, for the callers' answers.
var (
	// ErrNotOver: a month cannot close before it ends.
	ErrNotOver = errors.New("books: the month is not over")
	// ErrTrimmed: the window reaches days retention deleted; only whole
	// closed months are served there, from their statements.
	ErrTrimmed = errors.New("books: the window reaches days deleted by --retain")
)

// TrimmedError is a report refused because its window reaches days
// retention trimmed: a facts.QueryError (ErrBadQuery) that is ErrTrimmed.
type TrimmedError struct{ facts.QueryError }

func (e *TrimmedError) Unwrap() error        { return &e.QueryError }
func (e *TrimmedError) Is(target error) bool { return target == ErrTrimmed }

// Hash is the SHA-256 of a statement's canonical JSON, hex.
func Hash(body []byte) string {
	h := sha256.Sum256(body)
	return hex.EncodeToString(h[:])
}

// Decode reads a stored statement.
func Decode(body []byte) (*Statement, error) {
	var s Statement
	if err := json.Unmarshal(body, &s); err != nil {
		return nil, fmt.Errorf("books: stored statement: %w", err)
	}
	return &s, nil
}

// stored reads statement version of month as it was stored.
func stored(ctx context.Context, st Store, month string, version int) (*Statement, error) {
	body, err := st.StatementBody(ctx, month, version)
	if err != nil {
		return nil, err
	}
	return Decode(body)
}

// compactJSON is a file's JSON as the statement stores it (nil: null).
func compactJSON(name string, b []byte) (json.RawMessage, error) {
	if b == nil {
		return nil, nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return nil, fmt.Errorf("books: the %s file is not JSON: %w", name, err)
	}
	return buf.Bytes(), nil
}

// Close closes a month (YYYY-MM) as by (the token's name, or "admin"):
// it stores the statement and returns it, or the one in force with
// created false.
func Close(ctx context.Context, st Store, month, by string, in Inputs, now time.Time) (c *store.Closed, created bool, err error) {
	w, err := facts.ParseMonth("month", month)
	if err != nil {
		return nil, false, err
	}
	if now.Before(w.To) {
		return nil, false, fmt.Errorf("%w: %s ends at %s", ErrNotOver, month, w.To.Format(time.RFC3339))
	}
	prices, err := compactJSON("prices", in.PricesJSON)
	if err != nil {
		return nil, false, err
	}
	budgets, err := compactJSON("budgets", in.BudgetsJSON)
	if err != nil {
		return nil, false, err
	}
	namespaces, err := compactJSON("namespace projects", in.NamespacesJSON)
	if err != nil {
		return nil, false, err
	}
	if len(in.NamespacesJSON) == 0 {
		namespaces = nil
	}
	earlier, err := closedBefore(ctx, st, w)
	if err != nil {
		return nil, false, err
	}
	req := store.CloseRequest{Month: month, Window: w, By: by, Earlier: earlier}
	build := func(ctx context.Context, src facts.Source, late map[string][]store.LateTask, closedAt time.Time, version int) (store.Built, error) {
		var out store.Built
		mark := &report.Closed{Month: month, Version: version, ClosedAt: closedAt}
		s := Statement{Month: month, Version: version, From: w.From, To: w.To, ClosedAt: closedAt, ClosedBy: by,
			Prices: prices, Budgets: budgets, NamespaceProjects: namespaces, Adjustments: []report.Adjustment{}}
		if in.Prices != nil {
			c := in.Prices.Currency
			s.Currency = &c
		}
		q := report.Query{Window: w, By: []string{"project"}, Prices: in.Prices, Budgets: in.Budgets, Now: closedAt,
			Namespaces: in.Namespaces}
		// The month's facts, read once: the statement's reports are
		// computed from them, and every other grouping of the closed
		// month will be (frozenReport), so all of them add up alike.
		if out.Frozen, err = freeze(ctx, src, w); err != nil {
			return out, err
		}
		reports := src
		if out.Frozen != nil {
			reports = frozenSource{out.Frozen}
		}
		// The chargeback lines, from the same read and the frozen
		// observations, kept in the close's transaction: a task stored
		// after it is the next month's adjustment, never a line of
		// this month (invariant 3), however late the lines are asked.
		if lister, ok := src.(report.TaskLister); ok {
			var l report.TaskLister = lister
			if out.Frozen != nil {
				l = frozenLister{lister, frozenSource{out.Frozen}}
			}
			cb, err := report.Chargeback(ctx, l, report.Query{Window: w, By: []string{report.TaskKey}, Prices: in.Prices,
				Namespaces: in.Namespaces})
			if err != nil {
				return out, err
			}
			body, err := json.Marshal(cb)
			if err != nil {
				return out, fmt.Errorf("books: chargeback of %s: %w", month, err)
			}
			out.Exports = append(out.Exports, store.Export{Format: keptChargeback, Body: body})
		}
		if s.ByProject, err = report.Compute(ctx, reports, q); err != nil {
			return out, err
		}
		q.By, q.Budgets = []string{"project", "owner"}, nil
		if s.ByProjectOwner, err = report.Compute(ctx, reports, q); err != nil {
			return out, err
		}
		lateOf := func(e store.Closed) ([]store.LateTask, error) { return late[e.Month], nil }
		adj, err := lateData(ctx, st, src, earlier, lateOf, report.Query{Prices: in.Prices, Namespaces: in.Namespaces, Now: closedAt})
		if err != nil {
			return out, err
		}
		s.Adjustments = append(s.Adjustments, adj...)
		s.ByProject.Closed, s.ByProjectOwner.Closed = mark, mark
		if len(s.Adjustments) > 0 {
			// Both reports the statement answers show the late data the
			// open month showed in every grouping (invariant 3).
			s.ByProject.Adjustments, s.ByProjectOwner.Adjustments = s.Adjustments, s.Adjustments
		}
		cut, err := st.ReportCut(ctx)
		if err != nil {
			return out, err
		}
		if cut != nil {
			t := time.Unix(*cut, 0).UTC()
			s.ReportCut = &t
		}
		if in.Ledger != nil {
			// The ledger's facts, frozen with the statement: the
			// closed month's ledger by every --by is grouped from them
			// (invariant 3), its states in the body too.
			if out.Ledger, s.Ledger, err = in.Ledger(ctx, w); err != nil {
				return out, err
			}
			if s.LedgerFactsSHA256, err = factsSHA256(out.Ledger, w.From.Unix()); err != nil {
				return out, err
			}
		}
		if s.TaskFactsSHA256, err = factsSHA256(out.Frozen, w.From.Unix()); err != nil {
			return out, err
		}
		if out.Body, err = json.Marshal(s); err != nil {
			return out, err
		}
		var b bytes.Buffer
		if err := report.WriteJSON(&b, s.ByProject); err != nil {
			return out, err
		}
		out.ByProject = bytes.Clone(b.Bytes())
		b.Reset()
		if err := report.WriteJSON(&b, s.ByProjectOwner); err != nil {
			return out, err
		}
		out.ByProjectOwner = b.Bytes()
		return out, nil
	}
	return st.CloseMonth(ctx, req, build, Hash)
}

// closedBefore are the closed months whose late data goes into month w's
// statement: the months just before it, back to the first open one.
func closedBefore(ctx context.Context, st Store, w facts.Window) ([]store.Closed, error) {
	var out []store.Closed
	m := w.From
	for range 1200 {
		m = m.AddDate(0, -1, 0)
		c, err := st.Statement(ctx, m.Format("2006-01"))
		if err != nil {
			return nil, err
		}
		if c == nil {
			break
		}
		out = append(out, *c)
	}
	return out, nil
}

// Reopen reopens a closed month (its statement is kept).
func Reopen(ctx context.Context, st Store, month, by string) (*store.Closed, error) {
	if _, err := facts.ParseMonth("month", month); err != nil {
		return nil, err
	}
	return st.ReopenMonth(ctx, month, by)
}

// Report answers a report query with the books: a whole closed month by
// project (or by project and owner) without metrics is its statement's
// report, by any other grouping without metrics the sum of its frozen
// task facts (frozenReport); an open month gets its adjustments (late data of the closed
// months just before it); a window that reaches days retention deleted
// is refused with ErrTrimmed unless it is such a statement. live skips
// the statements (the tasks as stored now, for audit).
func Report(ctx context.Context, st Store, q report.Query, live bool) (*report.Report, error) {
	if err := q.Window.Check(); err != nil {
		return nil, err
	}
	by := q.By
	if len(by) == 0 {
		by = []string{"project"}
	}
	statementKeys := len(q.Metrics) == 0 && (slices.Equal(by, []string{"project"}) || slices.Equal(by, []string{"project", "owner"}))
	var c *store.Closed
	if q.Window.IsMonth() {
		var err error
		if c, err = st.Statement(ctx, q.From.Format("2006-01")); err != nil {
			return nil, err
		}
	}
	if c != nil && statementKeys && !live {
		b, err := st.StatementReport(ctx, c.Month, c.Version, len(by) == 2)
		if err != nil {
			return nil, err
		}
		r := new(report.Report)
		if err := json.Unmarshal(b, r); err != nil {
			return nil, fmt.Errorf("books: statement %s version %d: %w", c.Month, c.Version, err)
		}
		if q.Scope != nil {
			r = scoped(r, q.Scope)
		}
		return r, nil
	}
	if c != nil && len(q.Metrics) == 0 && !live {
		// Any other grouping of a closed month: its frozen facts.
		r, err := frozenReport(ctx, st, c, q)
		if err != nil || r != nil {
			return r, err
		}
	}
	if err := checkTrimmed(ctx, st, q); err != nil {
		return nil, err
	}
	r, err := report.Compute(ctx, st, q)
	if err != nil {
		return nil, err
	}
	if c == nil && q.Window.IsMonth() && !live {
		adj, err := Adjustments(ctx, st, q)
		if err != nil {
			return nil, err
		}
		if adj = forReader(adj, q); len(adj) > 0 {
			r.Adjustments = adj
		}
	}
	return r, nil
}

// Adjustments are the late data counted in open month q.Window: of the
// closed months just before it, priced and charged with q's inputs.
func Adjustments(ctx context.Context, st Store, q report.Query) ([]report.Adjustment, error) {
	earlier, err := closedBefore(ctx, st, q.Window)
	if err != nil {
		return nil, err
	}
	late := func(e store.Closed) ([]store.LateTask, error) { return st.LateTasks(ctx, e) }
	return lateData(ctx, st, st, earlier, late, q)
}
