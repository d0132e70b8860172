package monitor

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
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
	// StoreNodeReportFrom stores a report sent with a token the cluster
	// reviewed for the Node object nodeUID ("" for a static node token):
	// a new UID under the node's name retires the old machine's GPUs
	// (NODE.md 12.10).
	StoreNodeReportFrom(ctx context.Context, r *wire.NodeReport, nodeUID string, retire time.Duration) (store.NodeWrite, error)
	GPUConflicts(ctx context.Context) ([]store.GPUConflict, error)
	// TrimmedBefore is retention's mark (zero: nothing trimmed).
	TrimmedBefore(ctx context.Context) (time.Time, error)
}

// NodesConfig is what MountNodes needs.
type NodesConfig struct {
	Store NodeStore
	// Retire is --node-retire (store.DefaultNodeRetire when 0).
	Retire time.Duration
	// Reviewer verifies Kubernetes ServiceAccount tokens (--kube-tokenreview;
	// nil: only the tokens file's node tokens).
	Reviewer TokenReviewer
}

// nodeWritten is the answer to a stored node report.
type nodeWritten struct {
	Node string `json:"node"`
	Time int64  `json:"time"`
	// Status is "created", "exists", "clipped" or "too_old"; "stored"
	// with Conflicts (409).
	Status    string         `json:"status"`
	Conflicts []nodeConflict `json:"conflicts,omitempty"`
}

// nodeConflict is a GPU of the report that another node holds.
type nodeConflict struct {
	UUID   string `json:"uuid"`
	HeldBy string `json:"held_by"`
}

// MaxNodeAheadSeconds is how far a report's time may be past the
// monitor's clock (NODE.md 12.2): beyond, 425 and not stored.
const MaxNodeAheadSeconds = 300

// MountNodes mounts POST /v1/nodes/report (docs/node.md, "The report"):
// a node token for a node its globs match, or an admin token (any token
// without a tokens file); 413 from the Content-Length and 401/403 for a
// team token before the body is read; the body gzip-encoded or not, at
// most wire.MaxNodeReportBytes decoded; 400 naming the field; 403 for a
// node the token may not report; 425 for a report more than 5 minutes
// ahead (not stored); 201 stored, 200 already stored (the first body
// kept), clipped, or too_old (its span reaches days --retain trimmed:
// not stored, and the agent deletes it as delivered); 409 stored, naming
// the GPUs another node holds.
func MountNodes(a *API, cfg NodesConfig) {
	if cfg.Retire <= 0 {
		cfg.Retire = store.DefaultNodeRetire
	}
	a.storeErrs.WithLabelValues("node_report")
	n := newNodeState(a, cfg)
	a.route("POST /v1/nodes/report", func(w http.ResponseWriter, r *http.Request) { a.nodeReport(w, r, n) })
}

func (a *API) nodeReport(w http.ResponseWriter, r *http.Request, n *nodeState) {
	cfg := n.cfg
	if r.ContentLength > wire.MaxNodeReportBytes {
		a.failAndClose(w, http.StatusRequestEntityTooLarge, "the body is over 256 KiB")
		return
	}
	who, status, msg := a.nodeIdentity(r, n)
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
	// One node, one GPU, whatever the case it is written in (NODE.md 12.4).
	rep.Canonicalize()
	now := a.cfg.Now()
	if ahead := rep.Time - now.Unix(); ahead > MaxNodeAheadSeconds && ahead <= wire.MaxNodeFutureSecond {
		// Not stored: a span from the future would bill time that has not
		// happened and clip the node's real reports of it (NODE.md 12.2).
		// The agent keeps it and retries when the monitor's clock is there
		// (beyond 24 h Validate's 400 makes it a dead letter).
		w.Header().Set("Retry-After", strconv.FormatInt(ahead-MaxNodeAheadSeconds, 10))
		a.fail(w, http.StatusTooEarly, fmt.Sprintf("time %d is %d s past the monitor's clock (%d): at most %d s; check the node's clock (NTP)",
			rep.Time, ahead, now.Unix(), MaxNodeAheadSeconds))
		return
	}
	if err := rep.Validate(now); err != nil {
		a.fail(w, http.StatusBadRequest, err.Error())
		return
	}
	if msg := who.mayReport(rep.Node); msg != "" {
		a.fail(w, http.StatusForbidden, msg)
		return
	}
	if rep.SentAt != "" {
		if at, err := time.Parse(time.RFC3339Nano, rep.SentAt); err == nil {
			n.metrics.setSkew(rep.Node, at.Sub(now).Seconds())
		}
		// Not part of the stored body: a resend differs only by it.
		rep.SentAt = ""
	}
	trimmed, err := cfg.Store.TrimmedBefore(r.Context())
	if err != nil {
		a.storeFailed(w, r, "node_report", err)
		return
	}
	if !trimmed.IsZero() && rep.Time-rep.IntervalSeconds < trimmed.Unix() {
		// Its month's tasks and intervals are gone and its statement is
		// all there is: a late report there can change nothing (MONITOR.md
		// 20.14). 200, so the agent's spool lets it go.
		a.cfg.Log.Info("node report of days --retain trimmed: not stored", "node", rep.Node, "time", rep.Time,
			"trimmed_before", trimmed.Unix())
		writeJSON(w, http.StatusOK, nodeWritten{Node: rep.Node, Time: rep.Time, Status: store.NodeTooOld})
		return
	}
	res, err := cfg.Store.StoreNodeReportFrom(r.Context(), rep, who.nodeUID, cfg.Retire)
	if err != nil {
		a.storeFailed(w, r, "node_report", err)
		return
	}
	answer := nodeWritten{Node: rep.Node, Time: rep.Time, Status: res.Status}
	if len(res.Conflicts) > 0 {
		answer.Status = "stored"
		for _, c := range res.Conflicts {
			answer.Conflicts = append(answer.Conflicts, nodeConflict{UUID: c.UUID, HeldBy: c.HeldBy})
			a.cfg.Log.Warn("node report stored with a GPU another node holds: its entries count nowhere until 'paddle-monitor node retire' of one of them (docs/node.md, \"A moved GPU\")",
				"node", rep.Node, "time", rep.Time, "uuid", c.UUID, "held_by", c.HeldBy)
		}
		writeJSON(w, http.StatusConflict, answer)
		return
	}
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
