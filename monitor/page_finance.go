package monitor

import (
	"context"
	"net/url"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/report"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
)

// pageFinance is what the page shows for finance: who closed the month and
// why, a printable statement per project, the FOCUS file.
type pageFinance struct {
	ClosedBy, CloseReason string
	// Statements are the projects' statement pages (closed months only).
	Statements map[string]string
	FOCUS      string // the FOCUS export's link; "" without prices
}

// finance is the page's finance part of the month win (nil without the
// books).
func (h *reports) finance(ctx context.Context, win facts.Window, rep *report.Report) *pageFinance {
	if h.cfg.Books == nil {
		return nil
	}
	f := &pageFinance{}
	month := win.From.Format("2006-01")
	if h.cfg.Prices != nil {
		f.FOCUS = "/v1/export/focus?" + url.Values{"month": {month}}.Encode()
	}
	c, err := h.cfg.Books.Statement(ctx, month)
	if err != nil || c == nil {
		return f
	}
	f.ClosedBy = c.ClosedBy
	if ns, ok := h.cfg.Books.(NotesStore); ok {
		if notes, err := ns.StatementNotes(ctx); err == nil {
			f.CloseReason = notes[store.NotesKey(c.Month, c.Version)].CloseReason
		}
	}
	f.Statements = map[string]string{}
	for _, row := range rep.Rows {
		p := row.Key["project"]
		f.Statements[p] = "/statements/" + url.PathEscape(month) + "/" + url.PathEscape(p)
	}
	return f
}
