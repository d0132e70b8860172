package monitor

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/accounts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/books"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/focus"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/report"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
)

// BooksConfig is what MountStatements needs: the store's books and what a
// statement is computed with.
type BooksConfig struct {
	Store  books.Store
	Inputs books.Inputs
	Now    func() time.Time
	Log    *slog.Logger
	// Focus is the FOCUS export's configuration (nil: no export): GET
	// /v1/export/focus, and the export kept with each new statement.
	Focus *focus.Config
	// Accounts are the figures the statement pages show (serve hands every
	// view the same; nil: made of Store, Inputs and Focus's mapping).
	Accounts *accounts.Accounts
}

// accounts are cfg's accounts: its own, or those of its fields.
func (cfg BooksConfig) accounts() *accounts.Accounts {
	if cfg.Accounts != nil {
		return cfg.Accounts
	}
	in := accounts.Inputs{Prices: cfg.Inputs.Prices, Budgets: cfg.Inputs.Budgets, Charge: cfg.Inputs.Namespaces, Now: cfg.Now}
	if cfg.Focus != nil {
		in.Namespaces = cfg.Focus.Namespaces
	}
	return accounts.New(accounts.Sources{Facts: cfg.Store, Books: cfg.Store}, in)
}

// Statement is a statement's summary as GET /v1/statements and the close
// answer it.
type Statement struct {
	Month      string     `json:"month"`
	Version    int        `json:"version"`
	ClosedAt   time.Time  `json:"closed_at"`
	ClosedBy   string     `json:"closed_by"`
	ReopenedAt *time.Time `json:"reopened_at"`
	ReopenedBy string     `json:"reopened_by"`
	// CloseReason and ReopenReason are why (--reason, or the request's
	// "reason"); "" when none was given.
	CloseReason  string `json:"close_reason"`
	ReopenReason string `json:"reopen_reason"`
	SHA256       string `json:"sha256"`
	// InForce: the month's statement now (not reopened).
	InForce bool `json:"in_force"`
}

type statements struct {
	api *API
	cfg BooksConfig
	acc *accounts.Accounts
}

// MountStatements adds POST /v1/statements/{month}/close (admin: closes a
// month; 201 with the new statement, 200 with the one in force) and GET
// /v1/statements (admin: every version of every statement with its hash),
// and makes the report and the page answer closed months from their
// statements (ReportConfig.Books).
func MountStatements(a *API, cfg BooksConfig) {
	withDefaults(&cfg.Now, &cfg.Log)
	h := &statements{api: a, cfg: cfg, acc: cfg.accounts()}
	a.Handle("POST /v1/statements/{month}/close", h.admin(h.close))
	a.Handle("POST /v1/statements/{month}/reopen", h.admin(h.reopen))
	a.Handle("GET /v1/statements", h.reader(h.list))
	mountFinance(a, h)
}

// admin wraps an endpoint that needs an admin token (when a tokens file is
// in force): 401 without a valid token, 403 for any other, a viewer's
// before its body is read.
func (h *statements) admin(next func(w http.ResponseWriter, r *http.Request, by string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tok, status, msg := h.api.authenticate(r)
		if status == 0 && tok != nil && tok.IsViewer() {
			status, msg = http.StatusForbidden, viewerWrites(tok)
		}
		if status == 0 && tok != nil && !tok.Admin {
			status, msg = http.StatusForbidden, "closing and reopening months need an admin token"
		}
		if status != 0 {
			h.api.failAndClose(w, status, msg)
			return
		}
		by := "admin"
		if tok != nil {
			by = tok.Name
		}
		next(w, r, by)
	}
}

// reader wraps an endpoint that reads every project's books: an admin
// token or a viewer of every project (finance).
func (h *statements) reader(next func(w http.ResponseWriter, r *http.Request, by string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tok, status, msg := h.api.authenticate(r)
		if status == 0 && tok != nil && !tok.ReadsAll() {
			status, msg = http.StatusForbidden, "listing statements needs an admin token or a viewer of every project"
		}
		if status != 0 {
			h.api.fail(w, status, msg)
			return
		}
		next(w, r, "")
	}
}

func (h *statements) close(w http.ResponseWriter, r *http.Request, by string) {
	month := r.PathValue("month")
	reason, ok := h.reason(w, r, false)
	if !ok {
		return
	}
	c, created, err := books.Close(r.Context(), h.cfg.Store, month, by, h.cfg.Inputs, h.cfg.Now())
	switch {
	case errors.Is(err, facts.ErrBadQuery), errors.Is(err, books.ErrNotOver):
		h.api.fail(w, http.StatusBadRequest, "month: "+err.Error())
		return
	case err != nil:
		h.api.storeFailed(w, r, "close month", err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		if err := h.closed(r.Context(), c.Month, c.Version, reason); err != nil {
			h.api.storeFailed(w, r, "close month", err)
			return
		}
		h.cfg.Log.Info("month closed", "month", c.Month, "version", c.Version, "by", by, "reason", reason, "sha256", c.SHA256)
	}
	out := summary(c.Month, c.Version, c.ClosedAt, c.ClosedBy, c.ReopenedAt, c.ReopenedBy, c.SHA256)
	h.annotate(r.Context(), &out)
	writeJSON(w, status, out)
}

func (h *statements) list(w http.ResponseWriter, r *http.Request, _ string) {
	all, err := h.cfg.Store.Statements(r.Context())
	if err != nil {
		h.api.storeFailed(w, r, "statements", err)
		return
	}
	out := []Statement{}
	notes := h.notes(r.Context())
	for _, c := range all {
		s := summary(c.Month, c.Version, c.ClosedAt, c.ClosedBy, c.ReopenedAt, c.ReopenedBy, c.SHA256)
		n := notes[store.NotesKey(c.Month, c.Version)]
		s.CloseReason, s.ReopenReason = n.CloseReason, n.ReopenReason
		out = append(out, s)
	}
	writeJSON(w, http.StatusOK, map[string]any{"statements": out})
}

func summary(month string, version int, closedAt time.Time, by string, reopenedAt *time.Time, reopenedBy, sum string) Statement {
	return Statement{Month: month, Version: version, ClosedAt: closedAt, ClosedBy: by, ReopenedAt: reopenedAt,
		ReopenedBy: reopenedBy, SHA256: sum, InForce: reopenedAt == nil}
}

// closedHeader says on a CSV or table answer that it is a closed month's
// statement.
func closedHeader(w http.ResponseWriter, rep *report.Report) {
	if c := rep.Closed; c != nil {
		w.Header().Set("Paddle-Statement", fmt.Sprintf("%s; version=%d; closed=%s", c.Month, c.Version, c.ClosedAt.Format(time.RFC3339)))
	}
}
