package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddle-entrypoint/paddle-entrypoint/test/harness"
)

// TestSystemdUnit: systemd-analyze accepts the unit, which keeps
// CAP_SYS_PTRACE and does not hide other processes' /proc entries.
func TestSystemdUnit(t *testing.T) {
	b, err := os.ReadFile("deploy/systemd/paddle-node.service")
	if err != nil {
		t.Fatal(err)
	}
	unit := string(b)
	for _, line := range strings.Split(unit, "\n") {
		if strings.HasPrefix(line, "ProtectProc=") || strings.HasPrefix(line, "PrivateDevices=yes") || strings.HasPrefix(line, "DynamicUser=yes") {
			t.Errorf("the unit has %q: the agent would lose declarations or the GPUs", line)
		}
		if v, ok := strings.CutPrefix(line, "CapabilityBoundingSet="); ok && !strings.Contains(v, "CAP_SYS_PTRACE") {
			t.Errorf("CapabilityBoundingSet lacks CAP_SYS_PTRACE: %s", v)
		}
	}
	analyze := harness.Tool(t, "systemd-analyze")
	dir := t.TempDir()
	path := filepath.Join(dir, "paddle-node.service")
	os.WriteFile(path, []byte(strings.ReplaceAll(unit, "/usr/local/bin/paddle-node", bin.node)), 0o644)
	out, err := exec.Command(analyze, "verify", path).CombinedOutput()
	if err != nil || strings.Contains(string(out), "paddle-node.service:") {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}
