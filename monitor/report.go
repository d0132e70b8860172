package monitor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/access"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/accounts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/books"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/report"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
)

// ReportSource is what the report endpoint and the page need from the
// store: the report's sums, the running tasks of a budget's forecast, the
// open tasks and the idle ones.
type ReportSource interface {
	facts.Source
	report.Running
	OpenTasks
	Tasks(ctx context.Context, f store.Filter, scope *access.Scope) ([]store.Task, string, error)
}

// ReportConfig is what MountReport needs.
type ReportConfig struct {
	Source ReportSource
	// Prices turn GPU-hours into cost (nil: no cost).
	Prices *report.Prices
	// Budgets are the projects' monthly budgets (nil: none): a report by
	// project over one calendar month, and the page, show them.
	Budgets *report.Budgets
	// OpenTTL: open tasks not seen for this long are not "running" on the
	// page (nor on /metrics).
	OpenTTL time.Duration
	// ExecTTL: open tasks that reported nothing since their start are not
	// on the page's running tasks this long after it (0: DefaultExecTTL).
	ExecTTL time.Duration
	Log     *slog.Logger
	// Now is the clock (time.Now when nil): the page's "this month".
	Now func() time.Time
	// Books, when set, answer closed months from their statements, add
	// open months' adjustments and refuse windows retention trimmed
	// (package books); nil: every report is computed from the tasks.
	Books books.Store
	// Fleet is the ledger the page's "Fleet" section shows (nil: no
	// section).
	Fleet *LedgerConfig
	// Namespaces charges undeclared use to projects in the report and the
	// page (--namespace-projects; nil: none is).
	Namespaces func(namespace string) (project string, ok bool)
	// Accounts are the figures the report and the page show (serve hands
	// every view the same; nil: made of Source, Books, Fleet, Prices,
	// Budgets and Namespaces).
	Accounts *accounts.Accounts
}

type reports struct {
	api *API
	cfg ReportConfig
	acc *accounts.Accounts
}

// accounts are cfg's accounts: its own, or those of its fields.
func (cfg ReportConfig) accounts() *accounts.Accounts {
	if cfg.Accounts != nil {
		return cfg.Accounts
	}
	src := accounts.Sources{Facts: cfg.Source, Books: cfg.Books}
	in := accounts.Inputs{Prices: cfg.Prices, Budgets: cfg.Budgets, Charge: cfg.Namespaces, Now: cfg.Now}
	if f := cfg.Fleet; f != nil {
		src.Ledger = f.Source
		in.Namespaces, in.Split, in.Retire = f.Namespaces, f.Split, f.Retire
	}
	return accounts.New(src, in)
}

// MountReport adds GET /v1/report and the page GET / to a, behind the same
// token check as every read: a token sees only its projects and owners.
func MountReport(a *API, cfg ReportConfig) {
	withDefaults(&cfg.Now, &cfg.Log)
	h := &reports{api: a, cfg: cfg, acc: cfg.accounts()}
	a.Handle("GET /v1/report", challenge(a.Read(h.report)))
	a.Handle("GET /{$}", challenge(a.Read(h.page)))
}

// withDefaults fills a view's clock (time.Now) and logger (discarding)
// when they are unset.
func withDefaults(now *func() time.Time, log **slog.Logger) {
	if *now == nil {
		*now = time.Now
	}
	if *log == nil {
		*log = slog.New(slog.DiscardHandler)
	}
}

// challenge asks a browser for the token (HTTP Basic authentication, the
// token as the password) when the answer is 401, so that a person can open
// the page and its CSV links.
func challenge(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		h(&challengeWriter{ResponseWriter: w}, r)
	}
}

type challengeWriter struct{ http.ResponseWriter }

func (c *challengeWriter) WriteHeader(code int) {
	if code == http.StatusUnauthorized {
		c.Header().Set("WWW-Authenticate", `Basic realm="paddle-monitor", charset="UTF-8"`)
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *challengeWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// query reads a report's parameters: from and to (together; RFC 3339,
// YYYY-MM-DD or YYYY-MM), else month (YYYY-MM), else this month; by
// (comma-separated keys, default project); metric (repeated: completion
// metrics to show the mean of).
func (h *reports) query(r *http.Request, scope *access.Scope) (accounts.Request, error) {
	v := r.URL.Query()
	q := accounts.Request{Now: h.cfg.Now(), Scope: scope, Live: v.Get("live") == "1"}
	var err error
	q.Window, err = facts.WindowParams{From: v.Get("from"), To: v.Get("to"), Month: v.Get("month"),
		FromName: "from", ToName: "to", MonthName: "month"}.Select(h.cfg.Now())
	if err != nil {
		return q, err
	}
	if strings.TrimSpace(v.Get("by")) == report.TaskKey {
		q.By = []string{report.TaskKey}
		return q, nil
	}
	by, err := facts.ParseKeys(v.Get("by"))
	if err != nil {
		return q, err
	}
	q.By = by
	q.Metrics, err = facts.ParseMetrics(v["metric"])
	return q, err
}

// report answers GET /v1/report: JSON, or format=csv (a file named after
// the window and keys) or format=table (text).
func (h *reports) report(w http.ResponseWriter, r *http.Request, scope *access.Scope) {
	format := r.URL.Query().Get("format")
	switch format {
	case "", "json", "csv", "table":
	default:
		h.api.fail(w, http.StatusBadRequest, fmt.Sprintf("parameter format: %q is not json, csv or table", format))
		return
	}
	q, err := h.query(r, scope)
	if err != nil {
		h.api.fail(w, http.StatusBadRequest, badParameter(err))
		return
	}
	if len(q.By) == 1 && q.By[0] == report.TaskKey {
		h.chargeback(w, r, q, format)
		return
	}
	rep, err := h.acc.Report(r.Context(), q)
	if h.api.readFailed(w, r, "report", err) {
		return
	}
	closedHeader(w, rep)
	var b bytes.Buffer
	switch format {
	case "csv":
		err = report.WriteCSV(&b, rep)
		w.Header().Set("Content-Type", "text/csv; charset=utf-8")
		w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="gpu-report_%s_%s_%s.csv"`,
			fileTime(rep.From), fileTime(rep.To), strings.Join(rep.By, "-")))
	case "table":
		err = report.WriteTable(&b, rep)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	default:
		err = report.WriteJSON(&b, rep)
		w.Header().Set("Content-Type", "application/json")
	}
	if err != nil {
		h.api.fail(w, http.StatusInternalServerError, "writing the report: "+err.Error())
		return
	}
	w.Write(b.Bytes())
}

// fileTime writes a window end for a file name: the date alone at
// midnight.
func fileTime(t time.Time) string {
	if t.Equal(t.Truncate(24 * time.Hour)) {
		return t.Format(time.DateOnly)
	}
	return t.Format("2006-01-02T150405Z")
}

// badParameter is the answer's text for a query parameter the report
// package refused: "parameter " and its rule, which names it.
func badParameter(err error) string {
	if qe, ok := errors.AsType[*facts.QueryError](err); ok {
		return "parameter " + qe.Rule
	}
	return "parameter " + err.Error()
}

// chargeback answers GET /v1/report?by=task&format=csv|json: the
// chargeback statement, one line per task (report.WriteChargebackCSV,
// WriteChargebackJSON).
func (h *reports) chargeback(w http.ResponseWriter, r *http.Request, q accounts.Request, format string) {
	if format != "csv" && format != "json" && format != "" {
		h.api.fail(w, http.StatusBadRequest, "parameter by: task is the chargeback statement, one line per task: it takes format=csv or json")
		return
	}
	// A closed month's lines are those its statement kept (invariant 3).
	st, err := h.acc.Chargeback(r.Context(), q)
	if h.api.readFailed(w, r, "report", err) {
		return
	}
	var b bytes.Buffer
	if format != "csv" {
		if err := report.WriteChargebackJSON(&b, st); err != nil {
			h.api.fail(w, http.StatusInternalServerError, "writing the statement: "+err.Error())
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(b.Bytes())
		return
	}
	if err := report.WriteChargebackCSV(&b, st); err != nil {
		h.api.fail(w, http.StatusInternalServerError, "writing the statement: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="gpu-chargeback_%s_%s.csv"`, fileTime(st.From), fileTime(st.To)))
	w.Write(b.Bytes())
}
