package monitor

// A statement per team (docs/cost.md, "A statement to send each team"):
// GET /statements/{month}/{project}, a printable page (A4, no navigation)
// of one project's part of a closed month, whose "Save as PDF" is what
// finance sends.

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"html/template"
	"net/http"
	"strconv"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/access"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/report"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
)

//go:embed statementpage.html
var statementPageHTML string

var statementPage = template.Must(template.New("statement").Funcs(template.FuncMap{
	"hours": func(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) },
	"money": func(x *float64) string {
		if x == nil {
			return "–"
		}
		return strconv.FormatFloat(*x, 'f', 2, 64)
	},
	"amount": func(x float64) string { return strconv.FormatFloat(x, 'f', 2, 64) },
	"mul100": func(x float64) float64 { return x * 100 },
	"at": func(unix int64) string {
		return time.Unix(unix, 0).UTC().Format("2006-01-02 15:04")
	},
	"until": func(l report.StatementLine) string {
		if l.End == nil {
			return "running"
		}
		return time.Unix(*l.End, 0).UTC().Format("2006-01-02 15:04")
	},
}).Parse(statementPageHTML))

// statementData is the page's content.
type statementData struct {
	Month, MonthName, Project string
	Version                   int
	ClosedAt                  string
	ClosedBy, CloseReason     string
	Currency                  string
	Priced                    bool
	Row                       report.Row
	Budget                    *report.BudgetFigures
	Adjustments               []report.Adjustment
	Lines                     []report.StatementLine
	GPUs                      func(report.StatementLine) string
	SHA256, LinesSHA256       string
}

func mountStatementPage(a *API, h *statements) {
	a.Handle("GET /statements/{month}/{project}", challenge(a.Read(h.statementPage)))
}

// statementPage answers GET /statements/{month}/{project}: 400 for a bad
// month, 403 for a project outside the token's scope, 404 "not closed" for
// an open month (and for a project without figures in it).
func (h *statements) statementPage(w http.ResponseWriter, r *http.Request, scope *access.Scope) {
	month, project := r.PathValue("month"), r.PathValue("project")
	win, err := facts.ParseMonth("month", month)
	if err != nil {
		h.api.fail(w, http.StatusBadRequest, "month: "+err.Error())
		return
	}
	if scope != nil && !(&access.Scope{Projects: scope.Projects}).Allows(project, "") {
		h.api.fail(w, http.StatusForbidden, "this token may not read project "+project)
		return
	}
	c, err := h.cfg.Store.Statement(r.Context(), month)
	if err != nil {
		h.api.storeFailed(w, r, "statement page", err)
		return
	}
	if c == nil {
		h.api.fail(w, http.StatusNotFound, month+" is not closed: a statement is the page of a closed month")
		return
	}
	rep, err := h.acc.ProjectReport(r.Context(), win, project, scope, h.cfg.Now())
	if err != nil {
		h.api.storeFailed(w, r, "statement page", err)
		return
	}
	d := statementData{Month: month, MonthName: win.From.Format("January 2006"), Project: project, Version: c.Version,
		ClosedAt: c.ClosedAt.Format("2006-01-02 15:04 UTC"), ClosedBy: c.ClosedBy, SHA256: c.SHA256, Priced: rep.Currency != nil,
		GPUs: report.LineGPUs}
	if d.Priced {
		d.Currency = *rep.Currency
	}
	found := false
	for _, row := range rep.Rows {
		if row.Key["project"] == project {
			d.Row, d.Budget, found = row, row.Budget, true
		}
	}
	for _, adj := range rep.Adjustments {
		if adj.Project == project {
			d.Adjustments = append(d.Adjustments, adj)
		}
	}
	if !found && len(d.Adjustments) == 0 {
		h.api.fail(w, http.StatusNotFound, "project "+project+" has no figures in the statement of "+month)
		return
	}
	if ns, ok := h.cfg.Store.(NotesStore); ok {
		if notes, err := ns.StatementNotes(r.Context()); err == nil {
			d.CloseReason = notes[store.NotesKey(c.Month, c.Version)].CloseReason
		}
	}
	lines, err := h.acc.ProjectLines(r.Context(), win, project, scope)
	if err != nil {
		h.api.storeFailed(w, r, "statement page", err)
		return
	}
	if lines != nil {
		lines.SHA256 = c.SHA256
		var csvb bytes.Buffer
		if err := report.WriteChargebackCSV(&csvb, lines); err != nil {
			h.api.fail(w, http.StatusInternalServerError, "writing the lines: "+err.Error())
			return
		}
		sum := sha256.Sum256(csvb.Bytes())
		d.Lines, d.LinesSHA256 = lines.Lines, hex.EncodeToString(sum[:])
	}
	h.api.writePage(w, statementPage, d, "default-src 'none'; style-src 'unsafe-inline'")
}
