package monitor

import (
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
)

// NodeStore is what the node-report endpoint needs from the database.
type NodeStore interface {
	StoreNodeReport(ctx context.Context, r *wire.NodeReport, retire time.Duration) (store.NodeWrite, error)
}

// NodesConfig is what MountNodes needs.
type NodesConfig struct {
	Store NodeStore
	// Retire is --node-retire (store.DefaultNodeRetire when 0).
	Retire time.Duration
}

// nodeWritten is the answer to a stored node report.
type nodeWritten struct {
	Node string `json:"node"`
	Time int64  `json:"time"`
	// Status is "created", "exists" or "clipped".
	Status string `json:"status"`
}

// MountNodes mounts POST /v1/nodes/report (docs/node.md, "The report"):
// a node token for a node its globs match, or an admin token (any token
// without a tokens file); 413 from the Content-Length and 401/403 for a
// team token before the body is read; the body gzip-encoded or not, at
// most wire.MaxNodeReportBytes decoded; 400 naming the field; 403 for a
// node outside the token's globs; 201 stored, 200 already stored (the
// first body kept) or clipped; 409 for a GPU another node holds.
func MountNodes(a *API, cfg NodesConfig) {
	if cfg.Retire <= 0 {
		cfg.Retire = store.DefaultNodeRetire
	}
	a.storeErrs.WithLabelValues("node_report")
	a.route("POST /v1/nodes/report", func(w http.ResponseWriter, r *http.Request) { a.nodeReport(w, r, cfg) })
}

func (a *API) nodeReport(w http.ResponseWriter, r *http.Request, cfg NodesConfig) {
	if r.ContentLength > wire.MaxNodeReportBytes {
		a.failAndClose(w, http.StatusRequestEntityTooLarge, "the body is over 256 KiB")
		return
	}
	tok, status, msg := a.authenticateAny(r)
	if status == 0 && tok != nil && tok.IsViewer() {
		status, msg = http.StatusForbidden, viewerWrites(tok)
	}
	if status == 0 && tok != nil && !tok.Admin && !tok.IsNode() {
		status, msg = http.StatusForbidden, "token "+tok.Name+" is a team token: node reports need a node token (paddle-monitor token NAME --node GLOB) or an admin token"
	}
	if status != 0 {
		a.failAndClose(w, status, msg)
		return
	}
	if !a.slot(w, r) {
		return
	}
	defer func() { <-a.slots }()

	body, status, msg := readNodeBody(w, r)
	if status != 0 {
		a.fail(w, status, msg)
		return
	}
	rep, err := wire.DecodeNodeReport(body)
	if err != nil {
		a.fail(w, http.StatusBadRequest, err.Error())
		return
	}
	now := a.cfg.Now()
	if err := rep.Validate(now); err != nil {
		a.fail(w, http.StatusBadRequest, err.Error())
		return
	}
	if tok != nil && !tok.MayReport(rep.Node) {
		a.fail(w, http.StatusForbidden, "token "+tok.Name+" may not send reports of node "+rep.Node)
		return
	}
	res, err := cfg.Store.StoreNodeReport(r.Context(), rep, cfg.Retire)
	var held *store.GPUHeldError
	switch {
	case errors.As(err, &held):
		a.cfg.Log.Warn("node report refused: a GPU of it is held by another node (a moved GPU needs 'paddle-monitor node retire' of the old node)",
			"node", rep.Node, "time", rep.Time, "uuid", held.UUID, "held_by", held.Node)
		a.fail(w, http.StatusConflict, "node "+rep.Node+": "+held.Error())
		return
	case err != nil:
		a.storeFailed(w, r, "node_report", err)
		return
	}
	answer := nodeWritten{Node: rep.Node, Time: rep.Time, Status: res.Status}
	switch {
	case res.Status == store.NodeCreated:
		writeJSON(w, http.StatusCreated, answer)
		return
	case res.Different:
		a.cfg.Log.Warn("a node report of a stored node and time with a different body: the first is kept", "node", rep.Node, "time", rep.Time)
	case res.Status == store.NodeClipped:
		a.cfg.Log.Info("node report clipped to the part no stored report covers", "node", rep.Node, "time", rep.Time,
			"interval_seconds", rep.IntervalSeconds, "kept_start", res.KeptStart, "kept_end", res.KeptEnd)
	}
	writeJSON(w, http.StatusOK, answer)
}

// readNodeBody reads a node report's body, gunzipped when its
// Content-Encoding says gzip: at most wire.MaxNodeReportBytes, both as
// sent and decoded (413 beyond).
func readNodeBody(w http.ResponseWriter, r *http.Request) (body []byte, status int, msg string) {
	in := io.Reader(http.MaxBytesReader(w, r.Body, wire.MaxNodeReportBytes))
	switch enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
	case "gzip":
		zr, err := gzip.NewReader(in)
		if err != nil {
			return nil, http.StatusBadRequest, "Content-Encoding gzip: the body is not gzip: " + err.Error()
		}
		defer zr.Close()
		in = zr
	default:
		return nil, http.StatusUnsupportedMediaType, "Content-Encoding " + strconv.Quote(enc) + " is not supported (gzip or none)"
	}
	b, err := io.ReadAll(io.LimitReader(in, wire.MaxNodeReportBytes+1))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return nil, http.StatusRequestEntityTooLarge, "the body is over 256 KiB"
	case err != nil:
		return nil, http.StatusBadRequest, "reading the body: " + err.Error()
	case len(b) > wire.MaxNodeReportBytes:
		return nil, http.StatusRequestEntityTooLarge, "the body is over 256 KiB decoded"
	}
	return b, 0, ""
}
