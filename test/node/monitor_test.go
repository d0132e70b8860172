package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/monitorproc"
	"github.com/paddle-entrypoint/paddle-entrypoint/test/harness"
)

// monitorBin builds paddle-monitor once, for the tests against the real
// monitor.
var monitorBin = sync.OnceValues(func() (string, error) {
	out := filepath.Join(bin.dir, "paddle-monitor")
	return out, harness.Run(harness.GoBuild(out, "./cmd/paddle-monitor", false))
})

// mint runs `paddle-monitor token NAME ARGS... --add-to FILE` and returns
// the token.
func mint(t *testing.T, monitor, file, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(monitor, append(append([]string{"token", name}, args...), "--add-to", file)...).Output()
	if err != nil {
		t.Fatalf("paddle-monitor token %s %v: %v", name, args, err)
	}
	return strings.SplitN(strings.TrimSpace(string(out)), "\n", 2)[0]
}

// TestRealMonitor: the agent against a real paddle-monitor: a node token
// for gpu-node-* has its reports stored (201, nothing dead); a team
// token's reports, and a node name outside the token's globs, are refused
// (403) and stay in the spool, never dead.
func TestRealMonitor(t *testing.T) {
	monitor, err := monitorBin()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.json")
	nodeTok := mint(t, monitor, tokens, "gpu-node-17", "--node", "gpu-node-17")
	teamTok := mint(t, monitor, tokens, "team-a", "--project", "search_*")
	srv, err := monitorproc.Start(monitor, []string{"--listen", "127.0.0.1:0", "--db", filepath.Join(dir, "m.db"), "--tokens", tokens},
		monitorproc.Options{Env: []string{"PATH=/usr/bin:/bin"}, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Kill)

	state := filepath.Join(dir, "state")
	pid := startIn(t, "")
	writeState(t, state, "proc 0 compute "+strconv.Itoa(pid)+" 1000 30", "util 0 50")
	type run struct {
		name, token, node string
		stored            bool
	}
	runs := []run{
		{"node token", nodeTok, "gpu-node-17", true},
		{"team token", teamTok, "gpu-node-18", false},
		{"foreign node", nodeTok, "cpu-node-1", false},
	}
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := filepath.Join(dir, r.node)
			os.MkdirAll(d, 0o700)
			os.WriteFile(filepath.Join(d, "token"), []byte(r.token+"\n"), 0o600)
			listen := freeAddr(t)
			p := startNode(t, nodeEnv(state, "PADDLE_MONITOR_URL="+srv.URL, "PADDLE_NODE_TOKEN_FILE="+filepath.Join(d, "token"),
				"PADDLE_NODE_NAME="+r.node, "PADDLE_NODE_REPORT_SPOOL="+filepath.Join(d, "r.db"),
				"PADDLE_NODE_INTERVAL=5s", "PADDLE_NODE_SAMPLE=1s", "PADDLE_NODE_LISTEN="+listen))
			deadline := time.Now().Add(30 * time.Second)
			var m string
			for time.Now().Before(deadline) {
				m = metricsTextSafe(listen)
				// Wait for the outcome itself: a report just spooled is
				// pending for the moment before its delivery.
				done := metricValue(m, "paddle_node_reports_pending") >= 2
				if r.stored {
					done = metricValue(m, "paddle_node_reports_sent_total") >= 2
				}
				if metricValue(m, "paddle_node_reports_spooled_total") >= 2 && done {
					break
				}
				time.Sleep(200 * time.Millisecond)
			}
			sent, pending, dead := metricValue(m, "paddle_node_reports_sent_total"), metricValue(m, "paddle_node_reports_pending"), metricValue(m, "paddle_node_reports_dead")
			switch {
			case r.stored && (sent < 2 || dead != 0):
				t.Errorf("%s: sent %v, dead %v, want 2 stored\n%s", r.name, sent, dead, p.stderr.String())
			case !r.stored && (sent != 0 || pending < 2 || dead != 0 || !strings.Contains(p.stderr.String(), "403")):
				t.Errorf("%s: sent %v, pending %v, dead %v, want every report refused (403) and kept\n%s", r.name, sent, pending, dead, p.stderr.String())
			}
		}()
	}
	wg.Wait()
}
