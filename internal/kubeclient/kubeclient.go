// Package kubeclient reads where a Kubernetes API server is and how to
// authenticate to it, for the programs that talk to one over plain HTTPS
// (no client library): the monitor's TokenReview (monitor/kubereview) and
// the node agent's ResourceSlices (node/resourceslices).
//
// Guarantees:
//   - Two sources, one result: a pod's ServiceAccount (InCluster:
//     KUBERNETES_SERVICE_HOST and _PORT, the mounted token and CA) or a
//     kubeconfig in its JSON form (Kubeconfig: its current context's
//     cluster and user, a token, a token file or a client certificate).
//   - Relative file names in a kubeconfig are read against the
//     kubeconfig's folder, as kubectl reads them.
//   - A token file is read again by every Bearer call: projected tokens
//     rotate under a running program.
//   - Each caller builds its own http.Client from Config.TLS: a watch
//     wants no overall timeout, a review does.
package kubeclient

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/mountfile"
)

// ServiceAccountDir is where a pod's ServiceAccount token and the
// cluster's CA are mounted.
const ServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// maxFile bounds a kubeconfig, a CA, a certificate, a key and a token.
const maxFile = 1 << 20

// ErrNotInCluster: KUBERNETES_SERVICE_HOST or _PORT is unset (not in a pod).
var ErrNotInCluster = errors.New("KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set (not in a pod?)")

// Config is one API server and the credentials for it.
type Config struct {
	Server string // https://host:port, no trailing slash
	TLS    *tls.Config
	// Token is a static bearer token; TokenFile, when set, wins and is
	// read again at every Bearer call.
	Token, TokenFile string
}

// Bearer returns the bearer token to send ("" for none).
func (c *Config) Bearer() (string, error) {
	if c.TokenFile == "" {
		return c.Token, nil
	}
	b, err := mountfile.ReadAs("the API server's token", c.TokenFile, maxFile)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// InCluster is the Config of a pod: the kubernetes Service's address from
// getenv, the mounted token (re-read) and CA.
func InCluster(getenv func(string) string) (*Config, error) {
	return inCluster(getenv, ServiceAccountDir)
}

func inCluster(getenv func(string) string, saDir string) (*Config, error) {
	host, port := getenv("KUBERNETES_SERVICE_HOST"), getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return nil, ErrNotInCluster
	}
	ca, err := mountfile.ReadAs("the cluster's CA", filepath.Join(saDir, "ca.crt"), maxFile)
	if err != nil {
		return nil, err
	}
	tc, err := tlsConfig(ca, nil, false)
	if err != nil {
		return nil, err
	}
	return &Config{Server: "https://" + net.JoinHostPort(host, port), TLS: tc, TokenFile: filepath.Join(saDir, "token")}, nil
}

// Kubeconfig reads the kubeconfig file at path (JSON: `kubectl config view
// --raw --minify --flatten -o json`).
func Kubeconfig(path string) (*Config, error) {
	b, err := mountfile.ReadAs("kubeconfig", path, maxFile)
	if err != nil {
		return nil, err
	}
	return Parse(b, filepath.Dir(path))
}

// kubeconfig is the part of a kubeconfig that is read.
type kubeconfig struct {
	CurrentContext string `json:"current-context"`
	Contexts       []struct {
		Name    string `json:"name"`
		Context struct {
			Cluster string `json:"cluster"`
			User    string `json:"user"`
		} `json:"context"`
	} `json:"contexts"`
	Clusters []struct {
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
			Token                 string `json:"token"`
			TokenFile             string `json:"tokenFile"`
			ClientCertificate     string `json:"client-certificate"`
			ClientCertificateData string `json:"client-certificate-data"`
			ClientKey             string `json:"client-key"`
			ClientKeyData         string `json:"client-key-data"`
		} `json:"user"`
	} `json:"users"`
}

// Parse reads a kubeconfig's JSON b; dir is the folder its relative file
// names are read against. Its current context is used, or its only one.
func Parse(b []byte, dir string) (*Config, error) {
	var k kubeconfig
	if err := json.Unmarshal(b, &k); err != nil {
		return nil, fmt.Errorf("not a kubeconfig in JSON (kubectl config view --raw --minify --flatten -o json): %w", err)
	}
	ctxName := k.CurrentContext
	if ctxName == "" && len(k.Contexts) == 1 {
		ctxName = k.Contexts[0].Name
	}
	var clusterName, userName string
	found := false
	for _, c := range k.Contexts {
		if c.Name == ctxName {
			clusterName, userName, found = c.Context.Cluster, c.Context.User, true
		}
	}
	if !found {
		return nil, fmt.Errorf("no context %q", ctxName)
	}
	cfg := &Config{}
	var ca []byte
	insecure := false
	found = false
	for _, c := range k.Clusters {
		if c.Name != clusterName {
			continue
		}
		found = true
		cfg.Server = strings.TrimRight(c.Cluster.Server, "/")
		insecure = c.Cluster.InsecureSkipTLSVerify
		var err error
		if ca, err = data(c.Cluster.CertificateAuthorityData, c.Cluster.CertificateAuthority, dir); err != nil {
			return nil, fmt.Errorf("cluster %s: certificate-authority: %w", clusterName, err)
		}
	}
	if !found || cfg.Server == "" {
		return nil, fmt.Errorf("no cluster %q with a server", clusterName)
	}
	var cert *tls.Certificate
	for _, u := range k.Users {
		if u.Name != userName {
			continue
		}
		cfg.Token, cfg.TokenFile = u.User.Token, u.User.TokenFile
		if cfg.TokenFile != "" && !filepath.IsAbs(cfg.TokenFile) {
			cfg.TokenFile = filepath.Join(dir, cfg.TokenFile)
		}
		crt, err := data(u.User.ClientCertificateData, u.User.ClientCertificate, dir)
		if err != nil {
			return nil, fmt.Errorf("user %s: client-certificate: %w", userName, err)
		}
		key, err := data(u.User.ClientKeyData, u.User.ClientKey, dir)
		if err != nil {
			return nil, fmt.Errorf("user %s: client-key: %w", userName, err)
		}
		if crt != nil {
			c, err := tls.X509KeyPair(crt, key)
			if err != nil {
				return nil, fmt.Errorf("user %s: %w", userName, err)
			}
			cert = &c
		}
	}
	var err error
	if cfg.TLS, err = tlsConfig(ca, cert, insecure); err != nil {
		return nil, err
	}
	return cfg, nil
}

// data is a kubeconfig's inline base64 value, or the file's content.
func data(inline, file, dir string) ([]byte, error) {
	switch {
	case inline != "":
		return base64.StdEncoding.DecodeString(inline)
	case file != "":
		if !filepath.IsAbs(file) {
			file = filepath.Join(dir, file)
		}
		return mountfile.ReadAs("kubeconfig file", file, maxFile)
	}
	return nil, nil
}

func tlsConfig(ca []byte, cert *tls.Certificate, insecure bool) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: insecure} //nolint:gosec // only when the kubeconfig says so
	if ca != nil {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(ca) {
			return nil, errors.New("the certificate authority holds no PEM certificate")
		}
		cfg.RootCAs = pool
	}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	return cfg, nil
}
