// Package resourceslices reads what Dynamic Resource Allocation says about
// the node's devices from the API server (resource.k8s.io/v1): the
// ResourceSlices whose spec.nodeName is the node, and the ResourceClaims'
// allocations (for the capacity a share consumed). It keeps both by a
// list and a watch over plain HTTPS (no client library), and resolves the
// devices the kubelet's pod-resources API names into GPU UUIDs, DRA-created
// MIG partitions (parent GPU, profile, placement) and shares.
//
// Guarantees:
//   - A failed list or watch keeps the last answer (counted through
//     OnFailure) and is retried with backoff; nothing here blocks a sample.
//   - Only the drivers asked for are kept (--dra-drivers).
//   - The ServiceAccount needs get, list and watch on resourceslices and
//     resourceclaims, nothing else.
package resourceslices

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/kubeclient"
)

// ErrNoCluster: neither a kubeconfig nor the in-cluster environment.
var ErrNoCluster = errors.New("no API server: KUBERNETES_SERVICE_HOST unset and no kubeconfig")

// Client talks to one API server with a bearer token (re-read from its
// file on every request: projected tokens rotate).
type Client struct {
	Server    string // https://host:port
	TokenFile string
	Token     string // when there is no file
	HTTP      *http.Client
}

// InCluster is the client of a pod: the kubernetes Service's address from
// the environment, the mounted token and CA.
func InCluster(getenv func(string) string) (*Client, error) {
	c, err := kubeclient.InCluster(getenv)
	if errors.Is(err, kubeclient.ErrNotInCluster) {
		return nil, ErrNoCluster
	}
	if err != nil {
		return nil, err
	}
	return client(c), nil
}

// FromKubeconfig reads a kubeconfig in its JSON form (kubectl config view
// --raw -o json writes one): outside a pod (tests, a systemd node that is
// a cluster member).
func FromKubeconfig(path string) (*Client, error) {
	c, err := kubeclient.Kubeconfig(path)
	if err != nil {
		return nil, err
	}
	return client(c), nil
}

func client(c *kubeclient.Config) *Client {
	// No overall timeout: a watch stays open; each request has its
	// context's deadline.
	return &Client{Server: c.Server, TokenFile: c.TokenFile, Token: c.Token,
		HTTP: &http.Client{Transport: &http.Transport{TLSClientConfig: c.TLS, ResponseHeaderTimeout: 30 * time.Second, IdleConnTimeout: 90 * time.Second}}}
}

// request sends a GET of path and returns the answer when it is 200.
func (c *Client) request(ctx context.Context, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Server+path, nil)
	if err != nil {
		return nil, err
	}
	tok, err := (&kubeclient.Config{Token: c.Token, TokenFile: c.TokenFile}).Bearer()
	if err != nil {
		return nil, err
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		return nil, &StatusError{Path: path, Code: resp.StatusCode, Body: strings.TrimSpace(string(b))}
	}
	return resp, nil
}

// StatusError is an API server's answer other than 200.
type StatusError struct {
	Path string
	Code int
	Body string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("GET %s: %d %s", e.Path, e.Code, e.Body)
}
