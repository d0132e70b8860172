package kubereview

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/kubeclient"
)

// InCluster is --kube-tokenreview's value for the monitor's own pod's
// ServiceAccount (its RBAC: tokenreviews create).
const InCluster = "in-cluster"

// API is where the reviews are sent and how the monitor authenticates.
type API struct {
	Server string
	Client *http.Client
	// token: a static bearer token; tokenFile: a file re-read at each
	// review (a projected token the kubelet rotates).
	token, tokenFile string
}

func (a *API) bearer() (string, error) {
	return (&kubeclient.Config{Token: a.token, TokenFile: a.tokenFile}).Bearer()
}

// Open returns the API of --kube-tokenreview: "in-cluster" (the pod's
// ServiceAccount, KUBERNETES_SERVICE_HOST and _PORT) or the path of a
// kubeconfig file in JSON (`kubectl config view --raw --minify --flatten
// -o json`; its current context's cluster and user: a token, a token
// file or a client certificate).
func Open(where string) (*API, error) {
	var c *kubeclient.Config
	var err error
	if where == InCluster {
		if c, err = kubeclient.InCluster(os.Getenv); errors.Is(err, kubeclient.ErrNotInCluster) {
			return nil, fmt.Errorf("--kube-tokenreview in-cluster: %w: give a kubeconfig path", err)
		}
	} else {
		c, err = kubeclient.Kubeconfig(where)
	}
	if err != nil {
		return nil, fmt.Errorf("--kube-tokenreview %s: %w", where, err)
	}
	return &API{Server: c.Server, Client: httpClient(c.TLS), token: c.Token, tokenFile: c.TokenFile}, nil
}

func httpClient(tc *tls.Config) *http.Client {
	return &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{TLSClientConfig: tc, ForceAttemptHTTP2: true,
		MaxIdleConnsPerHost: 4, IdleConnTimeout: 90 * time.Second}}
}
