package kubereview

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fakeCluster answers TokenReviews: token "node-a" is the agent's pod on
// Gpu-Node-A, "other-sa" another ServiceAccount's, "no-aud" a token of
// another audience, "unbound" bound to no pod; anything else is not
// authenticated. It counts the reviews and checks the request.
func fakeCluster(t *testing.T, calls *atomic.Int64) *httptest.Server {
	t.Helper()
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		var in tokenReview
		if r.URL.Path != "/apis/authentication.k8s.io/v1/tokenreviews" || r.Header.Get("Authorization") != "Bearer monitor-token" ||
			json.NewDecoder(r.Body).Decode(&in) != nil || fmt.Sprint(in.Spec.Audiences) != "[paddle-monitor]" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		out := in
		st := &out.Status
		tok := strings.SplitN(in.Spec.Token, ".", 2)[0]
		st.Authenticated = tok != "bad"
		st.Audiences = []string{"paddle-monitor"}
		st.User.Username = "system:serviceaccount:paddle-node:paddle-node"
		st.User.Extra = map[string][]string{extraNodeName: {"Gpu-Node-A"}, extraNodeUID: {"u-1"}}
		switch tok {
		case "other-sa":
			st.User.Username = "system:serviceaccount:team-a:default"
		case "no-aud":
			st.Audiences = []string{"vault"}
		case "unbound":
			st.User.Extra = nil
		case "bad":
			st.Error = "invalid bearer token"
		}
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(out)
	}))
}

func jwtWithExp(name string, exp int64) string {
	payload := base64.RawURLEncoding.EncodeToString([]byte(fmt.Sprintf(`{"exp":%d}`, exp)))
	return name + "." + payload + ".sig"
}

func TestReview(t *testing.T) {
	var calls atomic.Int64
	srv := fakeCluster(t, &calls)
	defer srv.Close()
	r, err := New(&API{Server: srv.URL, Client: srv.Client(), token: "monitor-token"}, []string{"paddle-node/paddle-node"})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	r.now = func() time.Time { return now }
	ctx := context.Background()
	for _, tc := range []struct{ token, node, uid, err string }{
		{"node-a", "gpu-node-a", "u-1", ""},
		{"other-sa", "", "", "system:serviceaccount:team-a:default is not a node agent's ServiceAccount"},
		{"no-aud", "", "", "not a token for the audience paddle-monitor"},
		{"unbound", "", "", "not bound to a pod on a node"},
		{"bad", "", "", "invalid bearer token"},
	} {
		node, uid, err := r.Review(ctx, tc.token)
		switch {
		case tc.err == "" && (err != nil || node != tc.node || uid != tc.uid):
			t.Errorf("%s: %q %q, %v; want %s %s", tc.token, node, uid, err, tc.node, tc.uid)
		case tc.err != "" && (err == nil || !errors.Is(err, ErrRejected) || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: %v, want a rejection saying %q", tc.token, err, tc.err)
		}
	}
	// One review per token per period: node-a again within 5 min, none.
	before := calls.Load()
	now = now.Add(4 * time.Minute)
	if _, uid, err := r.Review(ctx, "node-a"); err != nil || uid != "u-1" || calls.Load() != before {
		t.Errorf("within 5 min: %q, %v, %d reviews more", uid, err, calls.Load()-before)
	}
	now = now.Add(2 * time.Minute)
	if _, _, err := r.Review(ctx, "node-a"); err != nil || calls.Load() != before+1 {
		t.Errorf("after 5 min: %v, %d reviews more, want 1", err, calls.Load()-before)
	}
	// A token that expires in a minute is reviewed again after it.
	short := jwtWithExp("node-a", now.Add(time.Minute).Unix())
	r.Review(ctx, short)
	n := calls.Load()
	now = now.Add(30 * time.Second)
	r.Review(ctx, short)
	now = now.Add(time.Minute)
	r.Review(ctx, short)
	if calls.Load() != n+1 {
		t.Errorf("a token of exp in 1 min: %d reviews after the first, want 1", calls.Load()-n)
	}
	if _, err := New(nil, []string{"paddle-node"}); err == nil {
		t.Error("New took an account without a namespace")
	}
	if _, err := New(nil, nil); err == nil {
		t.Error("New took no account")
	}
}

// TestKubeconfig: a JSON kubeconfig's current context, its server, CA and
// token; a YAML one is refused, saying JSON.
func TestKubeconfig(t *testing.T) {
	dir := t.TempDir()
	kc := `{"current-context":"c","contexts":[{"name":"c","context":{"cluster":"k","user":"u"}}],
		"clusters":[{"name":"k","cluster":{"server":"https://10.0.0.1:6443/","insecure-skip-tls-verify":true}}],
		"users":[{"name":"u","user":{"tokenFile":"tok"}}]}`
	os.WriteFile(filepath.Join(dir, "kc.json"), []byte(kc), 0o600)
	os.WriteFile(filepath.Join(dir, "tok"), []byte("secret\n"), 0o600)
	a, err := Open(filepath.Join(dir, "kc.json"))
	if err != nil {
		t.Fatal(err)
	}
	if tok, err := a.bearer(); a.Server != "https://10.0.0.1:6443" || err != nil || tok != "secret" {
		t.Errorf("server %q, token %q, %v", a.Server, tok, err)
	}
	os.WriteFile(filepath.Join(dir, "kc.yaml"), []byte("apiVersion: v1\nkind: Config\n"), 0o600)
	if _, err := Open(filepath.Join(dir, "kc.yaml")); err == nil || !strings.Contains(err.Error(), "JSON") {
		t.Errorf("a YAML kubeconfig: %v", err)
	}
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	if _, err := Open(InCluster); err == nil || !strings.Contains(err.Error(), "KUBERNETES_SERVICE_HOST") {
		t.Errorf("in-cluster outside a pod: %v", err)
	}
}
