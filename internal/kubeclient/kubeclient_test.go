package kubeclient

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// TestKubeconfig: each kubeconfig of testdata gives the server, the token
// (inline or its file, read against the kubeconfig's folder), the CA and
// the client certificate it names; a broken one fails saying why.
func TestKubeconfig(t *testing.T) {
	for _, tc := range []struct {
		file                     string
		server, token, tokenFile string
		bearer                   string
		ca, insecure, clientCert bool
		wantErr                  string
	}{
		{file: "token.json", server: "https://10.0.0.1:6443", token: "inline-token", bearer: "inline-token", ca: true},
		{file: "tokenfile.json", server: "https://10.0.0.2:6443", tokenFile: "testdata/token", bearer: "file-token", insecure: true},
		{file: "clientcert.json", server: "https://api.example:443", ca: true, clientCert: true},
		{file: "kubeconfig.yaml", wantErr: "not a kubeconfig in JSON"},
		{file: "nocontext.json", wantErr: `no context "missing"`},
		{file: "noserver.json", wantErr: `no cluster "k" with a server`},
		{file: "badca.json", wantErr: "holds no PEM certificate"},
		{file: "absent.json", wantErr: "kubeconfig testdata/absent.json: no such file"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			c, err := Kubeconfig(filepath.Join("testdata", tc.file))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Server != tc.server || c.Token != tc.token || c.TokenFile != tc.tokenFile {
				t.Errorf("server %q token %q file %q, want %q %q %q", c.Server, c.Token, c.TokenFile, tc.server, tc.token, tc.tokenFile)
			}
			if got, err := c.Bearer(); err != nil || got != tc.bearer {
				t.Errorf("Bearer() = %q, %v; want %q", got, err, tc.bearer)
			}
			if (c.TLS.RootCAs != nil) != tc.ca || c.TLS.InsecureSkipVerify != tc.insecure || (len(c.TLS.Certificates) == 1) != tc.clientCert {
				t.Errorf("TLS: CA %v insecure %v client certificates %d; want CA %v insecure %v certificate %v",
					c.TLS.RootCAs != nil, c.TLS.InsecureSkipVerify, len(c.TLS.Certificates), tc.ca, tc.insecure, tc.clientCert)
			}
		})
	}
}

// TestInCluster: the Service's address from the environment, the mounted
// CA and the token file, read again at each Bearer call; outside a pod,
// ErrNotInCluster.
func TestInCluster(t *testing.T) {
	env := map[string]string{"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}
	for _, tc := range []struct {
		name    string
		env     map[string]string
		dir     string
		want    string
		wantErr string
	}{
		{name: "in a pod", env: env, dir: "testdata/serviceaccount", want: "https://[fd00::1]:443"},
		{name: "no port", env: map[string]string{"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, dir: "testdata/serviceaccount", wantErr: ErrNotInCluster.Error()},
		{name: "no CA mounted", env: env, dir: "testdata/absent", wantErr: "the cluster's CA testdata/absent/ca.crt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := inCluster(func(k string) string { return tc.env[k] }, tc.dir)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tok, err := c.Bearer(); c.Server != tc.want || c.TLS.RootCAs == nil || err != nil || tok != "sa-token" {
				t.Errorf("server %q CA %v token %q %v", c.Server, c.TLS.RootCAs != nil, tok, err)
			}
		})
	}
	if _, err := InCluster(func(string) string { return "" }); !errors.Is(err, ErrNotInCluster) {
		t.Errorf("InCluster outside a pod: %v, want ErrNotInCluster", err)
	}
}
