package monitor

// Finance's own files (docs/cost.md, "For finance"): the FOCUS export,
// GET /v1/export/focus, read as every report is (a team token sees its
// own projects; an admin or a viewer of every project the platform's
// rows too).

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/access"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/focus"
)

// mountFinance mounts finance's own pages and files beside the statements.
func mountFinance(a *API, h *statements) {
	if h.cfg.Focus != nil {
		a.Handle("GET /v1/export/focus", challenge(a.Read(h.focusExport)))
	}
	mountStatementPage(a, h)
}

// focusConfig is the export's configuration with the books of h.
func (h *statements) focusConfig() focus.Config {
	c := *h.cfg.Focus
	c.Books = h.cfg.Store
	return c
}

func (h *statements) focusExport(w http.ResponseWriter, r *http.Request, scope *access.Scope) {
	v := r.URL.Query()
	month, format := v.Get("month"), v.Get("format")
	switch format {
	case "":
		format = focus.FormatCSV
	case focus.FormatCSV, focus.FormatCSVGz:
	case "parquet":
		h.api.fail(w, http.StatusBadRequest, "parameter format: parquet is not built (no Parquet library among this monitor's dependencies): use csv or csv.gz, which FOCUS tools import")
		return
	default:
		h.api.fail(w, http.StatusBadRequest, fmt.Sprintf("parameter format: %q is not csv or csv.gz", format))
		return
	}
	if month == "" {
		h.api.fail(w, http.StatusBadRequest, "parameter month: required (YYYY-MM)")
		return
	}
	if _, err := facts.ParseMonth("month", month); err != nil {
		h.api.fail(w, http.StatusBadRequest, "parameter "+err.Error())
		return
	}
	es, _ := h.cfg.Store.(focus.ExportStore)
	b, err := focus.Bytes(r.Context(), h.focusConfig(), es, month, format, scope)
	switch {
	case errors.Is(err, focus.ErrCurrency):
		h.api.fail(w, http.StatusBadRequest, "the monitor's --prices: "+err.Error())
		return
	case errors.Is(err, facts.ErrBadQuery):
		h.api.fail(w, http.StatusBadRequest, err.Error())
		return
	case err != nil:
		h.api.storeFailed(w, r, "focus export", err)
		return
	}
	name := "focus_" + month + ".csv"
	if format == focus.FormatCSVGz {
		name += ".gz"
		w.Header().Set("Content-Type", "application/gzip")
	} else {
		w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	}
	w.Header().Set("Content-Disposition", `attachment; filename="`+name+`"`)
	w.Write(b)
}
