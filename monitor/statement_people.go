package monitor

// People, not only tokens (docs/monitor.md, "Closing a month"): who closed
// or reopened a month (the token's name) and why (the request's "reason",
// required to reopen), kept beside the statement.

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/focus"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
)

// NotesStore is what recording who and why needs of the store (a
// *store.Store); a BooksConfig.Store without it records no reasons.
type NotesStore interface {
	SetCloseReason(ctx context.Context, month string, version int, reason string) error
	ReopenMonthBecause(ctx context.Context, month, by, reason string) (*store.Closed, error)
	StatementNotes(ctx context.Context) (map[string]store.Notes, error)
}

// maxReason bounds a reason's length (bytes): a sentence, not a file.
const maxReason = 1000

// reason reads the request's optional JSON body {"reason": "..."}: 400 for
// a body that is not that, or (required) without a reason.
func (h *statements) reason(w http.ResponseWriter, r *http.Request, required bool) (string, bool) {
	b, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	if err != nil {
		h.api.fail(w, http.StatusBadRequest, "reading the body: "+err.Error())
		return "", false
	}
	var body struct {
		Reason string `json:"reason"`
	}
	if len(strings.TrimSpace(string(b))) > 0 {
		d := json.NewDecoder(strings.NewReader(string(b)))
		d.DisallowUnknownFields()
		if err := d.Decode(&body); err != nil {
			h.api.fail(w, http.StatusBadRequest, `the body must be {"reason": "..."}: `+err.Error())
			return "", false
		}
	}
	body.Reason = strings.TrimSpace(body.Reason)
	switch {
	case required && body.Reason == "":
		h.api.fail(w, http.StatusBadRequest, `reason: required to reopen a month ({"reason": "..."}): it is shown in the statements`)
		return "", false
	case len(body.Reason) > maxReason:
		h.api.fail(w, http.StatusBadRequest, "reason: over 1000 bytes")
		return "", false
	}
	return body.Reason, true
}

// reopen answers POST /v1/statements/{month}/reopen (admin, a reason
// required): 200 with the reopened version, 409 when the month is not
// closed.
func (h *statements) reopen(w http.ResponseWriter, r *http.Request, by string) {
	month := r.PathValue("month")
	reason, ok := h.reason(w, r, true)
	if !ok {
		return
	}
	if _, err := facts.ParseMonth("month", month); err != nil {
		h.api.fail(w, http.StatusBadRequest, "month: "+err.Error())
		return
	}
	ns, ok := h.cfg.Store.(NotesStore)
	if !ok {
		h.api.fail(w, http.StatusNotImplemented, "this store records no reasons")
		return
	}
	c, err := ns.ReopenMonthBecause(r.Context(), month, by, reason)
	switch {
	case errors.Is(err, store.ErrNotClosed):
		h.api.fail(w, http.StatusConflict, month+" is not closed")
		return
	case err != nil:
		h.api.storeFailed(w, r, "reopen month", err)
		return
	}
	h.cfg.Log.Warn("month reopened", "month", c.Month, "version", c.Version, "by", by, "reason", reason, "sha256", c.SHA256)
	out := summary(c.Month, c.Version, c.ClosedAt, c.ClosedBy, c.ReopenedAt, c.ReopenedBy, c.SHA256)
	h.annotate(r.Context(), &out)
	writeJSON(w, http.StatusOK, out)
}

// closed records why a new version was closed, and keeps its FOCUS
// export (a failed export is logged: the month is closed all the same,
// and its first export request keeps one).
func (h *statements) closed(ctx context.Context, month string, version int, reason string) error {
	if ns, ok := h.cfg.Store.(NotesStore); ok && reason != "" {
		if err := ns.SetCloseReason(ctx, month, version, reason); err != nil {
			return err
		}
	}
	if es, ok := h.cfg.Store.(focus.ExportStore); ok && h.cfg.Focus != nil {
		if _, err := focus.StoreClosed(ctx, h.focusConfig(), es, month, version); err != nil {
			h.cfg.Log.Warn("the month's FOCUS export was not kept at its close", "month", month, "version", version, "err", err)
		}
	}
	return nil
}

// notes are the stored reasons (none when the store keeps none).
func (h *statements) notes(ctx context.Context) map[string]store.Notes {
	ns, ok := h.cfg.Store.(NotesStore)
	if !ok {
		return nil
	}
	n, err := ns.StatementNotes(ctx)
	if err != nil {
		h.cfg.Log.Error("statement notes", "err", err)
		return nil
	}
	return n
}

// annotate adds the version's reasons to s.
func (h *statements) annotate(ctx context.Context, s *Statement) {
	n := h.notes(ctx)[store.NotesKey(s.Month, s.Version)]
	s.CloseReason, s.ReopenReason = n.CloseReason, n.ReopenReason
}
