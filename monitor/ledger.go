package monitor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/access"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/accounts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/ledger"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/report"
)

// LedgerConfig is what MountLedger needs.
type LedgerConfig struct {
	Source     ledger.Source
	Prices     *report.Prices
	Namespaces *ledger.NamespaceProjects
	// Split is --split (equal when empty); Retire --node-retire.
	Split  string
	Retire time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Accounts are the figures the ledger and discrepancies show (serve
	// hands every view the same; nil: made of the fields above).
	Accounts *accounts.Accounts
}

// accounts are cfg's accounts: its own, or those of its fields.
func (cfg LedgerConfig) accounts() *accounts.Accounts {
	if cfg.Accounts != nil {
		return cfg.Accounts
	}
	return accounts.New(accounts.Sources{Ledger: cfg.Source},
		accounts.Inputs{Prices: cfg.Prices, Namespaces: cfg.Namespaces, Split: cfg.Split, Retire: cfg.Retire, Now: cfg.Now})
}

// MountLedger adds GET /v1/ledger and GET /v1/discrepancies to a
// (docs/cost.md, "The ledger"): an admin sees the whole fleet, a team
// token its own projects' attributed and undeclared use (and its
// discrepancies), a node token nothing (403).
func MountLedger(a *API, cfg LedgerConfig) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	acc := cfg.accounts()
	a.Handle("GET /v1/ledger", ledgerRead(a, acc, cfg.Now, "ledger", acc.Ledger, ledger.Write))
	a.Handle("GET /v1/discrepancies", ledgerRead(a, acc, cfg.Now, "discrepancies", acc.Discrepancies,
		func(w io.Writer, d *ledger.Discrepancies, format string) error {
			if format == "json" {
				// Compact, as every other JSON answer of the API (the
				// CLI's is indented).
				return json.NewEncoder(w).Encode(d)
			}
			return ledger.WriteDiscrepancies(w, d, format)
		}))
}

// ledgerRead answers a GET of a view of the ledger: the query
// (ledgerQuery), the view (a bad query 400, the store's failure 500) and
// its bytes as write puts them in the query's format.
func ledgerRead[T any](a *API, acc *accounts.Accounts, now func() time.Time, what string,
	view func(context.Context, accounts.LedgerRequest) (T, error), write func(io.Writer, T, string) error) http.HandlerFunc {
	return a.Read(func(w http.ResponseWriter, r *http.Request, scope *access.Scope) {
		q, format, ok := a.ledgerQuery(w, r, acc, now(), scope)
		if !ok {
			return
		}
		v, err := view(r.Context(), q)
		if a.readFailed(w, r, what, err) {
			return
		}
		var b bytes.Buffer
		if err := write(&b, v, format); err != nil {
			a.storeFailed(w, r, what, err)
			return
		}
		writeFormatted(w, format, b.Bytes())
	})
}

// ledgerQuery reads the window (from/to, month), by and format
// parameters (a split parameter is refused): 400 naming the parameter.
func (a *API) ledgerQuery(w http.ResponseWriter, r *http.Request, acc *accounts.Accounts, now time.Time, scope *access.Scope) (accounts.LedgerRequest, string, bool) {
	p := r.URL.Query()
	q := accounts.LedgerRequest{By: ledger.ByNode, Scope: scope, Now: now}
	var err error
	q.Window, err = facts.WindowParams{From: p.Get("from"), To: p.Get("to"), Month: p.Get("month"),
		FromName: "from", ToName: "to", MonthName: "month"}.Select(now)
	if err != nil {
		a.fail(w, http.StatusBadRequest, err.Error())
		return q, "", false
	}
	if v := p.Get("by"); v != "" {
		q.By = v
	}
	if p.Has("split") {
		// The split rule is the deployment's (MONITOR.md 20.12): a
		// request asking for another would get figures no other view
		// shows, so it is refused rather than silently ignored.
		a.fail(w, http.StatusBadRequest, "split: the split rule is the server's --split ("+acc.Inputs().Split+
			"), the same for every view; it is not a request parameter")
		return q, "", false
	}
	format := p.Get("format")
	switch format {
	case "":
		format = "json"
	case "json", "csv":
	default:
		a.fail(w, http.StatusBadRequest, "format "+format+": must be json or csv")
		return q, "", false
	}
	if err := acc.Inputs().CheckLedger(q); err != nil {
		a.fail(w, http.StatusBadRequest, err.Error())
		return q, "", false
	}
	return q, format, true
}

func writeFormatted(w http.ResponseWriter, format string, b []byte) {
	if format == "csv" {
		w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	} else {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(http.StatusOK)
	w.Write(b)
}

// readFailed answers err of a read of the accounts, if any: a bad query
// is a 400 naming it, a grouping the store cannot list a 501, anything
// else the store's failure. It reports whether it answered.
func (a *API) readFailed(w http.ResponseWriter, r *http.Request, what string, err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, ledger.ErrBadQuery) || errors.Is(err, facts.ErrBadQuery):
		a.fail(w, http.StatusBadRequest, err.Error())
	case errors.Is(err, accounts.ErrNoTaskList):
		a.fail(w, http.StatusNotImplemented, err.Error())
	default:
		a.storeFailed(w, r, what, err)
	}
	return true
}
