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
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

// In-cluster paths of the pod's ServiceAccount token and the cluster's CA.
const (
	inClusterToken = "/var/run/secrets/kubernetes.io/serviceaccount/token"
	inClusterCA    = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
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
	host, port := getenv("KUBERNETES_SERVICE_HOST"), getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return nil, ErrNoCluster
	}
	ca, err := os.ReadFile(inClusterCA)
	if err != nil {
		return nil, fmt.Errorf("the cluster's CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("%s holds no PEM certificate", inClusterCA)
	}
	return &Client{Server: "https://" + net.JoinHostPort(host, port), TokenFile: inClusterToken, HTTP: httpClient(&tls.Config{RootCAs: pool})}, nil
}

func httpClient(tc *tls.Config) *http.Client {
	// No overall timeout: a watch stays open; each request has its
	// context's deadline.
	return &http.Client{Transport: &http.Transport{TLSClientConfig: tc, ResponseHeaderTimeout: 30 * time.Second, IdleConnTimeout: 90 * time.Second}}
}

// kubeconfig is the part of a kubeconfig the agent reads.
type kubeconfig struct {
	CurrentContext string `json:"current-context"`
	Clusters       []struct {
		Name    string `json:"name"`
		Cluster struct {
			Server                   string `json:"server"`
			CertificateAuthority     string `json:"certificate-authority"`
			CertificateAuthorityData string `json:"certificate-authority-data"`
			InsecureSkipTLSVerify    bool   `json:"insecure-skip-tls-verify"`
		} `json:"cluster"`
	} `json:"clusters"`
	Users []struct {
		Name string `json:"name"`
		User struct {
			Token     string `json:"token"`
			TokenFile string `json:"tokenFile"`
		} `json:"user"`
	} `json:"users"`
	Contexts []struct {
		Name    string `json:"name"`
		Context struct {
			Cluster string `json:"cluster"`
			User    string `json:"user"`
		} `json:"context"`
	} `json:"contexts"`
}

// FromKubeconfig reads a kubeconfig in its JSON form (kubectl config view
// --raw -o json writes one) with a token or a token file: outside a pod
// (tests, a systemd node that is a cluster member).
func FromKubeconfig(path string) (*Client, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	var kc kubeconfig
	if err := json.Unmarshal(b, &kc); err != nil {
		return nil, fmt.Errorf("kubeconfig %s (JSON expected: kubectl config view --raw -o json): %w", path, err)
	}
	ctxName := kc.CurrentContext
	var clusterName, userName string
	for _, c := range kc.Contexts {
		if c.Name == ctxName || (ctxName == "" && len(kc.Contexts) == 1) {
			clusterName, userName = c.Context.Cluster, c.Context.User
		}
	}
	c := &Client{}
	tc := &tls.Config{}
	found := false
	for _, cl := range kc.Clusters {
		if cl.Name != clusterName {
			continue
		}
		found = true
		c.Server = strings.TrimSuffix(cl.Cluster.Server, "/")
		tc.InsecureSkipVerify = cl.Cluster.InsecureSkipTLSVerify
		var ca []byte
		switch {
		case cl.Cluster.CertificateAuthorityData != "":
			if ca, err = base64.StdEncoding.DecodeString(cl.Cluster.CertificateAuthorityData); err != nil {
				return nil, fmt.Errorf("kubeconfig %s: certificate-authority-data: %w", path, err)
			}
		case cl.Cluster.CertificateAuthority != "":
			if ca, err = os.ReadFile(cl.Cluster.CertificateAuthority); err != nil {
				return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
			}
		}
		if ca != nil {
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(ca) {
				return nil, fmt.Errorf("kubeconfig %s: the cluster's CA holds no PEM certificate", path)
			}
			tc.RootCAs = pool
		}
	}
	if !found || c.Server == "" {
		return nil, fmt.Errorf("kubeconfig %s: no cluster for context %q", path, ctxName)
	}
	for _, u := range kc.Users {
		if u.Name == userName {
			c.Token, c.TokenFile = u.User.Token, u.User.TokenFile
		}
	}
	c.HTTP = httpClient(tc)
	return c, nil
}

// request sends a GET of path and returns the answer when it is 200.
func (c *Client) request(ctx context.Context, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Server+path, nil)
	if err != nil {
		return nil, err
	}
	tok := c.Token
	if c.TokenFile != "" {
		b, err := os.ReadFile(c.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("the API server's token: %w", err)
		}
		tok = strings.TrimSpace(string(b))
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
