package main

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// TestDrainSpools: with --drain-spools and --token-dir the agent drains a
// task spool the entrypoint left on the node, each entry sent with the
// token it was written for; without them it leaves the spool alone.
func TestDrainSpools(t *testing.T) {
	dir := t.TempDir()
	spools := filepath.Join(dir, "spools")
	tokens := filepath.Join(dir, "tokens")
	os.MkdirAll(spools, 0o755)
	os.MkdirAll(tokens, 0o700)
	os.WriteFile(filepath.Join(tokens, "team-a"), []byte("team-a-token\n"), 0o600)
	// A task of team A started while the monitor was unreachable: its
	// registration waits in its spool.
	start := exec.Command(filepath.Join(bin.dir, "paddle-entrypoint"), "true")
	start.Env = []string{"PATH=/usr/bin:/bin", "PADDLE_MONITOR_URL=http://127.0.0.1:1", "PADDLE_SPOOL_PATH=" + filepath.Join(spools, "spool-0.db"),
		"PADDLE_MONITOR_TOKEN_FILE=" + filepath.Join(tokens, "team-a"), "PADDLE_PROJECT=search_ranking", "PADDLE_TASK_NAME=drained",
		"PADDLE_REGISTER_BUDGET=200ms", "PADDLE_LABELS_FILE=" + filepath.Join(dir, "task.labels")}
	if out, err := start.CombinedOutput(); err != nil {
		t.Fatalf("the entrypoint: %v\n%s", err, out)
	}
	var mu sync.Mutex
	var registered []string // Authorization of each registration
	rcv := newReceiver(t, nil)
	rcv.srv.Handler = func(inner http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/v1/task/register" {
				mu.Lock()
				registered = append(registered, r.Header.Get("Authorization"))
				mu.Unlock()
				w.WriteHeader(201)
				return
			}
			inner.ServeHTTP(w, r)
		})
	}(rcv.srv.Handler)
	state := filepath.Join(dir, "state")
	writeState(t, state)
	env := nodeEnv(state, "PADDLE_MONITOR_URL="+rcv.URL, "PADDLE_NODE_REPORT_SPOOL="+filepath.Join(dir, "r.db"),
		"PADDLE_NODE_INTERVAL=5s", "PADDLE_NODE_SAMPLE=1s")
	// Off by default: a whole interval passes, nothing is drained.
	p := startNode(t, env)
	waitFor(t, 20*time.Second, "a node report", func() bool { return len(rcv.reports()) > 0 })
	p.signal(t, 15)
	p.wait(t, 15*time.Second)
	mu.Lock()
	n := len(registered)
	mu.Unlock()
	if n != 0 {
		t.Fatalf("drained %d registrations without --drain-spools", n)
	}
	startNode(t, append(env, "PADDLE_NODE_DRAIN_SPOOLS="+spools, "PADDLE_NODE_TOKEN_DIR="+tokens))
	waitFor(t, 20*time.Second, "the drained registration", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(registered) > 0
	})
	mu.Lock()
	defer mu.Unlock()
	if len(registered) != 1 || registered[0] != "Bearer team-a-token" {
		t.Errorf("registrations %q, want one with team A's token", registered)
	}
}
