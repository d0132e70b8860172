package monitor

import (
	"bytes"
	"errors"
	"net/http"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/access"
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
}

// MountLedger adds GET /v1/ledger and GET /v1/discrepancies to a
// (docs/cost.md, "The ledger"): an admin sees the whole fleet, a team
// token its own projects' attributed and undeclared use (and its
// discrepancies), a node token nothing (403).
func MountLedger(a *API, cfg LedgerConfig) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Split == "" {
		cfg.Split = ledger.SplitEqual
	}
	a.Handle("GET /v1/ledger", a.Read(func(w http.ResponseWriter, r *http.Request, scope *access.Scope) {
		q, format, ok := a.ledgerQuery(w, r, cfg, scope, ledger.ByNode)
		if !ok {
			return
		}
		l, err := ledger.Compute(r.Context(), cfg.Source, q)
		if a.ledgerFailed(w, r, "ledger", err) {
			return
		}
		var b bytes.Buffer
		if err := ledger.Write(&b, l, format); err != nil {
			a.storeFailed(w, r, "ledger", err)
			return
		}
		writeFormatted(w, format, b.Bytes())
	}))
	a.Handle("GET /v1/discrepancies", a.Read(func(w http.ResponseWriter, r *http.Request, scope *access.Scope) {
		q, format, ok := a.ledgerQuery(w, r, cfg, scope, ledger.ByNode)
		if !ok {
			return
		}
		d, err := ledger.FindDiscrepancies(r.Context(), cfg.Source, q)
		if a.ledgerFailed(w, r, "discrepancies", err) {
			return
		}
		if format == "json" {
			writeJSON(w, http.StatusOK, d)
			return
		}
		var b bytes.Buffer
		if err := ledger.WriteDiscrepancies(&b, d, format); err != nil {
			a.storeFailed(w, r, "discrepancies", err)
			return
		}
		writeFormatted(w, format, b.Bytes())
	}))
}

// ledgerQuery reads the window (from/to, month), by, split and format
// parameters: 400 naming the parameter.
func (a *API) ledgerQuery(w http.ResponseWriter, r *http.Request, cfg LedgerConfig, scope *access.Scope, by string) (ledger.Query, string, bool) {
	p := r.URL.Query()
	now := cfg.Now()
	q := ledger.Query{By: by, Split: cfg.Split, Prices: cfg.Prices, Namespaces: cfg.Namespaces, Scope: scope, Retire: cfg.Retire, Now: now}
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
	if v := p.Get("split"); v != "" {
		q.Split = v
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
	if err := q.Check(); err != nil {
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

// ledgerFailed answers err of a ledger read, if any: a bad query is a 400
// naming it, anything else the store's failure. It reports whether it
// answered.
func (a *API) ledgerFailed(w http.ResponseWriter, r *http.Request, what string, err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, ledger.ErrBadQuery) || errors.Is(err, facts.ErrBadQuery):
		a.fail(w, http.StatusBadRequest, err.Error())
	default:
		a.storeFailed(w, r, what, err)
	}
	return true
}
