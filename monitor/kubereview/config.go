package kubereview

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/mountfile"
)

// InCluster is --kube-tokenreview's value for the monitor's own pod's
// ServiceAccount (its RBAC: tokenreviews create).
const InCluster = "in-cluster"

// The files of a pod's ServiceAccount (in-cluster).
const (
	saDir     = "/var/run/secrets/kubernetes.io/serviceaccount"
	saToken   = saDir + "/token"
	saCACert  = saDir + "/ca.crt"
	maxConfig = 1 << 20
)

// API is where the reviews are sent and how the monitor authenticates.
type API struct {
	Server string
	Client *http.Client
	// token: a static bearer token; tokenFile: a file re-read at each
	// review (a projected token the kubelet rotates).
	token, tokenFile string
}

func (a *API) bearer() (string, error) {
	if a.tokenFile == "" {
		return a.token, nil
	}
	b, err := mountfile.ReadAs("the monitor's ServiceAccount token", a.tokenFile, maxConfig)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// Open returns the API of --kube-tokenreview: "in-cluster" (the pod's
// ServiceAccount, KUBERNETES_SERVICE_HOST and _PORT) or the path of a
// kubeconfig file in JSON (`kubectl config view --raw --minify --flatten
// -o json`; its current context's cluster and user: a token, a token
// file or a client certificate).
func Open(where string) (*API, error) {
	if where == InCluster {
		return inCluster()
	}
	b, err := mountfile.ReadAs("--kube-tokenreview kubeconfig", where, maxConfig)
	if err != nil {
		return nil, err
	}
	a, err := fromKubeconfig(b, filepath.Dir(where))
	if err != nil {
		return nil, fmt.Errorf("--kube-tokenreview %s: %w", where, err)
	}
	return a, nil
}

func inCluster() (*API, error) {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return nil, errors.New("--kube-tokenreview in-cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set (not in a pod?): give a kubeconfig path")
	}
	ca, err := os.ReadFile(saCACert)
	if err != nil {
		return nil, fmt.Errorf("--kube-tokenreview in-cluster: %w", err)
	}
	client, err := httpClient(ca, nil, false)
	if err != nil {
		return nil, fmt.Errorf("--kube-tokenreview in-cluster: %w", err)
	}
	return &API{Server: "https://" + net.JoinHostPort(host, port), Client: client, tokenFile: saToken}, nil
}

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

func fromKubeconfig(b []byte, dir string) (*API, error) {
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
	a := &API{}
	var ca []byte
	insecure := false
	found = false
	for _, c := range k.Clusters {
		if c.Name != clusterName {
			continue
		}
		found = true
		a.Server = strings.TrimRight(c.Cluster.Server, "/")
		insecure = c.Cluster.InsecureSkipTLSVerify
		var err error
		if ca, err = data(c.Cluster.CertificateAuthorityData, c.Cluster.CertificateAuthority, dir); err != nil {
			return nil, fmt.Errorf("cluster %s: certificate-authority: %w", clusterName, err)
		}
	}
	if !found || a.Server == "" {
		return nil, fmt.Errorf("no cluster %q with a server", clusterName)
	}
	var cert *tls.Certificate
	for _, u := range k.Users {
		if u.Name != userName {
			continue
		}
		a.token, a.tokenFile = u.User.Token, u.User.TokenFile
		if a.tokenFile != "" && !filepath.IsAbs(a.tokenFile) {
			a.tokenFile = filepath.Join(dir, a.tokenFile)
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
	if a.Client, err = httpClient(ca, cert, insecure); err != nil {
		return nil, err
	}
	return a, nil
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
		return mountfile.ReadAs("kubeconfig file", file, maxConfig)
	}
	return nil, nil
}

func httpClient(ca []byte, cert *tls.Certificate, insecure bool) (*http.Client, error) {
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
	return &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true,
		MaxIdleConnsPerHost: 4, IdleConnTimeout: 90 * time.Second}}, nil
}
