package main

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
)

// TestGPUCheckScriptNode: scripts/gpu-check.sh, against the fake NVML,
// ends with the agent's once report: the GPU and the process on it.
func TestGPUCheckScriptNode(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	pid := startIn(t, "")
	writeState(t, state, fmt.Sprintf("proc 0 compute %d 4096 25", pid), "util 0 55")
	cmd := exec.Command("scripts/gpu-check.sh", bin.dir)
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "TMPDIR=" + t.TempDir(),
		"GPU_CHECK_LIBRARY_PATH=" + bin.nvml, "GPU_CHECK_SAMPLE_SECONDS=2", "GPU_CHECK_TASK_SECONDS=1",
		"FAKE_NVML_STATE=" + state}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("gpu-check.sh: %v\n%s", err, out)
	}
	_, after, ok := strings.Cut(string(out), "== node agent: paddle-node once, 2s\n")
	if !ok {
		t.Fatalf("no node agent step:\n%s", out)
	}
	var r wire.NodeReport
	if err := json.Unmarshal([]byte(after), &r); err != nil {
		t.Fatalf("the step printed no report: %v\n%s", err, after)
	}
	if r.Samples < 1 || len(r.Instances) != 1 || len(r.Instances[0].Users) != 1 || *r.Instances[0].Users[0].SMUtilMean != 25 || *r.Instances[0].UtilMean != 55 {
		t.Errorf("report %+v", r)
	}
}
