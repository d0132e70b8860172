// Package kubereview verifies the node agents' Kubernetes ServiceAccount
// tokens with the cluster's TokenReview API (NODE.md 11, 12.10;
// docs/security.md): a token is a node's when the API server authenticates
// it for the audience paddle-monitor, it belongs to one of the DaemonSet's
// ServiceAccounts (--node-service-account), and it is bound to a pod whose
// node the token names (the node-name extra of a pod-bound token,
// Kubernetes ≥ 1.30), with that Node object's UID (the node-uid extra),
// which tells a Node recreated under its name from the one before. Plain net/http and encoding/json: the monitor
// carries no Kubernetes client library.
package kubereview

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// Audience is the audience the agent's projected token is minted for and
// every review asks for.
const Audience = "paddle-monitor"

// CacheFor bounds how long a review is reused (and the token's exp).
const CacheFor = 5 * time.Minute

// The extras of a pod-bound ServiceAccount token naming its pod's node.
const (
	extraNodeName = "authentication.kubernetes.io/node-name"
	extraNodeUID  = "authentication.kubernetes.io/node-uid"
)

// ErrRejected is a token the cluster does not vouch for as a node's.
var ErrRejected = errors.New("token rejected")

// maxCached bounds the cache (expired entries are dropped first).
const maxCached = 10000

// Reviewer sends TokenReviews to one cluster.
type Reviewer struct {
	api      *API
	accounts []string // system:serviceaccount:NS:NAME
	now      func() time.Time
	// Counted is called with "authenticated", "rejected" or "error" once
	// per review sent (not for a cached answer).
	Counted func(result string)

	mu    sync.Mutex
	cache map[[32]byte]entry
}

type entry struct {
	node, nodeUID string
	until         time.Time
}

// New returns a Reviewer of the cluster api for the ServiceAccounts
// accounts ("NS/NAME" each, at least one).
func New(api *API, accounts []string) (*Reviewer, error) {
	if len(accounts) == 0 {
		return nil, errors.New("--kube-tokenreview needs --node-service-account NS/NAME (the DaemonSet's ServiceAccount)")
	}
	r := &Reviewer{api: api, now: time.Now, cache: map[[32]byte]entry{}, Counted: func(string) {}}
	for _, a := range accounts {
		ns, name, ok := strings.Cut(a, "/")
		if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			return nil, fmt.Errorf("--node-service-account %q: must be NAMESPACE/NAME", a)
		}
		r.accounts = append(r.accounts, "system:serviceaccount:"+ns+":"+name)
	}
	return r, nil
}

// Review returns the node (lower case) the token's pod is bound to and
// that Node object's UID (the node-uid extra; "" when the cluster names
// none), an error wrapping ErrRejected when the cluster does not vouch for
// it as a node agent's, or another error when the cluster could not be
// asked. The UID tells a Node deleted and recreated under its name (a new
// machine) from the one before (NODE.md 12.10).
func (r *Reviewer) Review(ctx context.Context, token string) (node, nodeUID string, err error) {
	key := sha256.Sum256([]byte(token))
	now := r.now()
	r.mu.Lock()
	e, ok := r.cache[key]
	r.mu.Unlock()
	if ok && now.Before(e.until) {
		return e.node, e.nodeUID, nil
	}
	node, uid, err := r.review(ctx, token)
	switch {
	case errors.Is(err, ErrRejected):
		r.Counted("rejected")
		return "", "", err
	case err != nil:
		r.Counted("error")
		return "", "", err
	}
	r.Counted("authenticated")
	until := now.Add(CacheFor)
	if exp, ok := expiry(token); ok && exp.Before(until) {
		until = exp
	}
	r.mu.Lock()
	if len(r.cache) >= maxCached {
		for k, v := range r.cache {
			if !now.Before(v.until) || len(r.cache) >= maxCached {
				delete(r.cache, k)
			}
		}
	}
	r.cache[key] = entry{node: node, nodeUID: uid, until: until}
	r.mu.Unlock()
	return node, uid, nil
}

// tokenReview is the part of authentication.k8s.io/v1 TokenReview used.
type tokenReview struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Spec       struct {
		Token     string   `json:"token"`
		Audiences []string `json:"audiences"`
	} `json:"spec"`
	Status struct {
		Authenticated bool `json:"authenticated"`
		User          struct {
			Username string              `json:"username"`
			Extra    map[string][]string `json:"extra"`
		} `json:"user"`
		Audiences []string `json:"audiences"`
		Error     string   `json:"error"`
	} `json:"status"`
}

func (r *Reviewer) review(ctx context.Context, token string) (node, uid string, err error) {
	var in tokenReview
	in.APIVersion, in.Kind = "authentication.k8s.io/v1", "TokenReview"
	in.Spec.Token, in.Spec.Audiences = token, []string{Audience}
	body, err := json.Marshal(in)
	if err != nil {
		return "", "", err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := r.api.post(ctx, "/apis/authentication.k8s.io/v1/tokenreviews", body)
	if err != nil {
		return "", "", fmt.Errorf("TokenReview: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", "", fmt.Errorf("TokenReview: reading the answer: %w", err)
	}
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		return "", "", fmt.Errorf("TokenReview: the API server answered %d: %.300s", resp.StatusCode, b)
	}
	var out tokenReview
	if err := json.Unmarshal(b, &out); err != nil {
		return "", "", fmt.Errorf("TokenReview: the answer is not a TokenReview: %w", err)
	}
	st := &out.Status
	switch {
	case !st.Authenticated:
		msg := st.Error
		if msg == "" {
			msg = "not authenticated"
		}
		return "", "", fmt.Errorf("%w: %s", ErrRejected, msg)
	case !slices.Contains(st.Audiences, Audience):
		return "", "", fmt.Errorf("%w: not a token for the audience %s", ErrRejected, Audience)
	case !slices.Contains(r.accounts, st.User.Username):
		return "", "", fmt.Errorf("%w: %s is not a node agent's ServiceAccount (--node-service-account)", ErrRejected, st.User.Username)
	}
	names := st.User.Extra[extraNodeName]
	if len(names) != 1 || names[0] == "" {
		return "", "", fmt.Errorf("%w: the token is not bound to a pod on a node (Kubernetes ≥ 1.30 names the node of a pod-bound token)", ErrRejected)
	}
	if uids := st.User.Extra[extraNodeUID]; len(uids) == 1 {
		uid = uids[0]
	}
	return strings.ToLower(names[0]), uid, nil
}

// expiry is the token's exp claim (a JWT's), unverified: it only shortens
// how long the review is reused.
func expiry(token string) (time.Time, bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return time.Time{}, false
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return time.Time{}, false
	}
	var c struct {
		Exp *json.Number `json:"exp"`
	}
	if json.Unmarshal(b, &c) != nil || c.Exp == nil {
		return time.Time{}, false
	}
	v, err := c.Exp.Int64()
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(v, 0), true
}

// post sends a JSON body to path of the API server.
func (a *API) post(ctx context.Context, path string, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.Server+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if tok, err := a.bearer(); err != nil {
		return nil, err
	} else if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	return a.Client.Do(req)
}
