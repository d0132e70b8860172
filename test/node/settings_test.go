package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestVersion(t *testing.T) {
	code, out, _ := runNode(t, nodeEnv("/nonexistent"), "version")
	if code != 0 || out != "paddle-node version test-1\n" {
		t.Fatalf("version: %d %q", code, out)
	}
}

func TestHelp(t *testing.T) {
	code, out, _ := runNode(t, nodeEnv("/nonexistent"), "--help")
	if code != 0 {
		t.Fatalf("--help: exit %d", code)
	}
	for _, want := range []string{
		"--monitor-url", "PADDLE_MONITOR_URL", "--token-file", "PADDLE_NODE_TOKEN_FILE", "PADDLE_MONITOR_CA_FILE",
		"--node-name", "PADDLE_NODE_NAME", "--interval", "PADDLE_NODE_INTERVAL", "60s", "--sample", "PADDLE_NODE_SAMPLE", "5s",
		"--proc", "PADDLE_NODE_PROC", "--pod-resources-socket", "/var/lib/kubelet/pod-resources/kubelet.sock", "--cri-socket",
		"--docker-socket", "--labels-path", "/var/run/paddle-task.labels", "--report-spool", "/var/lib/paddle-node/reports.db",
		"--max-report-age", "168h", "--probe", "--listen", "PADDLE_NODE_FINAL", "paddle-node once",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("--help lacks %q", want)
		}
	}
}

// TestUsageErrors: 64 with a message naming the flag or variable.
func TestUsageErrors(t *testing.T) {
	spool := filepath.Join(t.TempDir(), "r.db")
	base := nodeEnv("/nonexistent", "PADDLE_NODE_REPORT_SPOOL="+spool)
	cases := []struct {
		name  string
		env   []string
		args  []string
		names string
	}{
		{"no monitor", nil, nil, "--monitor-url"},
		{"unknown flag", []string{"PADDLE_MONITOR_URL=http://127.0.0.1:1"}, []string{"--bogus", "1"}, "--bogus"},
		{"interval under 5s", []string{"PADDLE_MONITOR_URL=http://127.0.0.1:1"}, []string{"--interval", "2s"}, "--interval"},
		{"interval by variable", []string{"PADDLE_MONITOR_URL=http://127.0.0.1:1", "PADDLE_NODE_INTERVAL=soon"}, nil, "PADDLE_NODE_INTERVAL"},
		{"sample over interval", []string{"PADDLE_MONITOR_URL=http://127.0.0.1:1"}, []string{"--interval", "10s", "--sample", "11s"}, "--sample"},
		{"bad URL", nil, []string{"--monitor-url", "ftp://x"}, "--monitor-url"},
		{"bad listen", []string{"PADDLE_MONITOR_URL=http://127.0.0.1:1"}, []string{"--listen", "nowhere"}, "--listen"},
		{"flag wins over variable", []string{"PADDLE_MONITOR_URL=http://127.0.0.1:1", "PADDLE_NODE_INTERVAL=60s"}, []string{"--interval=1s"}, "--interval"},
	}
	for _, c := range cases {
		code, _, errs := runNode(t, append(append([]string{}, base...), c.env...), c.args...)
		if code != 64 || !strings.Contains(errs, c.names) {
			t.Errorf("%s: exit %d, want 64 naming %s:\n%s", c.name, code, c.names, errs)
		}
	}
}

// TestStartErrors: 1 naming the file.
func TestStartErrors(t *testing.T) {
	dir := t.TempDir()
	notDir := filepath.Join(dir, "file")
	os.WriteFile(notDir, []byte("x"), 0o644)
	cases := []struct {
		name, file string
		env        []string
	}{
		{"unreadable token file", filepath.Join(dir, "missing-token"), []string{"PADDLE_NODE_TOKEN_FILE=" + filepath.Join(dir, "missing-token")}},
		{"unusable report spool", notDir + "/reports.db", []string{"PADDLE_NODE_REPORT_SPOOL=" + notDir + "/reports.db"}},
		{"missing kubeconfig", filepath.Join(dir, "kubeconfig.json"), []string{"PADDLE_NODE_POD_RESOURCES_SOCKET=" + notDir,
			"PADDLE_NODE_KUBECONFIG=" + filepath.Join(dir, "kubeconfig.json")}},
		{"a YAML kubeconfig", notDir, []string{"PADDLE_NODE_POD_RESOURCES_SOCKET=" + notDir, "PADDLE_NODE_KUBECONFIG=" + notDir}},
	}
	for _, c := range cases {
		env := nodeEnv("/nonexistent", append([]string{"PADDLE_MONITOR_URL=http://127.0.0.1:1", "PADDLE_NODE_REPORT_SPOOL=" + filepath.Join(dir, "ok.db")}, c.env...)...)
		code, _, errs := runNode(t, env)
		if code != 1 || !strings.Contains(errs, c.file) {
			t.Errorf("%s: exit %d, want 1 naming %s:\n%s", c.name, code, c.file, errs)
		}
	}
}
