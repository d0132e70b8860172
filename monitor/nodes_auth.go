package monitor

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/access"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/kubereview"
)

// TokenReviewer verifies a Kubernetes ServiceAccount token (NODE.md 11,
// 12.10; monitor/kubereview): the node its pod is bound to and that Node
// object's UID ("" when the cluster names none), or an error that
// errors.Is ErrTokenRejected when the cluster does not vouch for it (any
// other error: the cluster could not be asked).
type TokenReviewer interface {
	Review(ctx context.Context, token string) (node, nodeUID string, err error)
}

// ErrTokenRejected is a token the cluster's TokenReview refused.
var ErrTokenRejected = errors.New("the cluster does not vouch for this token")

// nodeState is the node-report endpoint's own state: its settings and
// its series.
type nodeState struct {
	cfg     NodesConfig
	metrics *NodeCollector
}

func newNodeState(a *API, cfg NodesConfig) *nodeState {
	n := &nodeState{cfg: cfg, metrics: NewNodeCollector(cfg.Store, a.cfg.Log)}
	if c, ok := cfg.Reviewer.(interface{ countWith(func(string)) }); ok {
		n.metrics.reviewing = true
		c.countWith(n.metrics.countReview)
	}
	if a.cfg.Registry != nil {
		a.cfg.Registry.MustRegister(n.metrics)
	}
	return n
}

// nodeCaller is who sends a node report.
type nodeCaller struct {
	open     bool          // no tokens file and no TokenReview: anyone
	tok      *access.Token // a tokens-file token
	reviewed string        // the node a reviewed ServiceAccount token is bound to
	nodeUID  string        // and that Node object's UID ("" for the others)
}

// mayReport is "" when the caller may send node's reports, else why not.
func (c *nodeCaller) mayReport(node string) string {
	switch {
	case c.open:
		return ""
	case c.tok != nil:
		if c.tok.MayReport(node) {
			return ""
		}
		return "token " + c.tok.Name + " may not send reports of node " + node
	case c.reviewed == node:
		return ""
	}
	return "the ServiceAccount token is bound to a pod of node " + c.reviewed + ": it may not send reports of node " + node
}

// nodeIdentity authenticates a node report's sender before its body is
// read: a token of the tokens file (a node token, or an admin's; a team
// token is 403), else, with --kube-tokenreview, a ServiceAccount token the
// cluster reviews (401 when it refuses it, 503 when it cannot be asked).
func (a *API) nodeIdentity(r *http.Request, n *nodeState) (*nodeCaller, int, string) {
	if n.cfg.Reviewer == nil {
		tok, status, msg := a.authenticateAny(r)
		if status == 0 && tok != nil && tok.IsViewer() {
			return nil, http.StatusForbidden, viewerWrites(tok)
		}
		if status == 0 && tok != nil && !tok.Admin && !tok.IsNode() {
			status, msg = http.StatusForbidden, "token "+tok.Name+" is a team token: node reports need a node token (paddle-monitor token NAME --node NODE), the node's ServiceAccount token (--kube-tokenreview) or an admin token"
		}
		return &nodeCaller{open: tok == nil && status == 0, tok: tok}, status, msg
	}
	if set := a.cfg.Tokens(); set != nil {
		if tok, status, msg := a.authenticateAny(r); status == 0 {
			if tok.IsViewer() {
				return nil, http.StatusForbidden, viewerWrites(tok)
			}
			if !tok.Admin && !tok.IsNode() {
				return nil, http.StatusForbidden, "token " + tok.Name + " is a team token: node reports need a node token, the node's ServiceAccount token or an admin token"
			}
			return &nodeCaller{tok: tok}, 0, ""
		} else if status != http.StatusUnauthorized || bearer(r) == "" {
			return nil, status, msg
		}
	}
	secret := bearer(r)
	if secret == "" {
		return nil, http.StatusUnauthorized, "a token is required: Authorization: Bearer <the node's ServiceAccount token or a node token>"
	}
	node, uid, err := n.cfg.Reviewer.Review(r.Context(), secret)
	switch {
	case errors.Is(err, ErrTokenRejected):
		return nil, http.StatusUnauthorized, "the token is not valid: " + err.Error()
	case err != nil:
		a.cfg.Log.Error("TokenReview failed", "err", err)
		return nil, http.StatusServiceUnavailable, "the token could not be reviewed (the cluster's API server did not answer); retry later"
	}
	return &nodeCaller{reviewed: node, nodeUID: uid}, 0, ""
}

// bearer is the request's Bearer token ("" without).
func bearer(r *http.Request) string {
	if h := r.Header.Get("Authorization"); len(h) > 7 && strings.EqualFold(h[:7], "Bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}

// KubeReviewer is a *kubereview.Reviewer as a TokenReviewer: its
// rejections are ErrTokenRejected, and its reviews are counted in
// paddle_monitor_tokenreviews_total.
type KubeReviewer struct {
	Reviewer *kubereview.Reviewer
}

// Review implements TokenReviewer.
func (k KubeReviewer) Review(ctx context.Context, token string) (string, string, error) {
	node, uid, err := k.Reviewer.Review(ctx, token)
	if errors.Is(err, kubereview.ErrRejected) {
		return "", "", fmt.Errorf("%w: %v", ErrTokenRejected, err)
	}
	return node, uid, err
}

func (k KubeReviewer) countWith(f func(result string)) { k.Reviewer.Counted = f }
