package entrypoint

// Settings a task cannot change (docs/contract.md): the system policy
// file's "settings" and "locked" against a task that tries every setting
// of the review that changed its own bill.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/paddle-entrypoint/paddle-entrypoint/entrypoint/policy"
)

// recordingMonitor answers every write of the monitor's API as a monitor
// does (register 201, complete and heartbeat 200) and keeps the bodies by
// path.
type recordingMonitor struct {
	*httptest.Server
	mu     sync.Mutex
	bodies map[string][]string
}

func newRecordingMonitor(t *testing.T) *recordingMonitor {
	t.Helper()
	m := &recordingMonitor{bodies: map[string][]string{}}
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		m.mu.Lock()
		m.bodies[r.URL.Path] = append(m.bodies[r.URL.Path], string(b))
		m.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/v1/task/register" {
			w.WriteHeader(http.StatusCreated)
		}
		io.WriteString(w, `{"task_id":"x","status":"created"}`)
	}))
	t.Cleanup(m.Close)
	return m
}

func (m *recordingMonitor) Bodies(path string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.bodies[path]...)
}

// TestLockedSettings: the system policy gives the monitor URL, supervise
// mode, the labels file and the spool and locks the accounting set. A task
// that sets PADDLE_GPU_SHARE=0.001, --gpu-share=0.001, --mode=exec,
// --monitor-url=, PADDLE_ENTRYPOINT_GPU_PROBE=/bin/true and
// PADDLE_GPU_TIMEOUT=0 changes none of them: it starts (exit 0), each try
// is one warning naming it and the policy file, the registration goes to
// the policy's monitor with the GPUs the real probe counted at share 1,
// and the completion follows (supervise mode). The GPUs are counted from
// the CUDA_VISIBLE_DEVICES given to the entrypoint, which the command
// inherits as it was.
func TestLockedSettings(t *testing.T) {
	m := newRecordingMonitor(t)
	k := gpuTask(t, 4, "--mode=exec", "--gpu-share=0.001", "--monitor-url=", bin.report)
	labelsFile := filepath.Join(k.Dir, "policy-labels")
	spool := filepath.Join(k.Dir, "policy-spool.db")
	pol, err := json.Marshal(map[string]any{
		"settings": map[string]string{
			"PADDLE_MONITOR_URL": m.URL, "PADDLE_ENTRYPOINT_MODE": "supervise",
			"PADDLE_LABELS_FILE": labelsFile, "PADDLE_SPOOL_PATH": spool,
		},
		"locked": "accounting",
	})
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(src, pol, 0o644); err != nil {
		t.Fatal(err)
	}
	polSystemPolicy(t, k, src)
	k.Setenv("PADDLE_PROJECT", "search_ranking")
	k.Setenv("PADDLE_GPU_SHARE", "0.001")
	k.Setenv("PADDLE_ENTRYPOINT_GPU_PROBE", "/bin/true")
	k.Setenv("PADDLE_GPU_TIMEOUT", "0")
	k.Setenv("CUDA_VISIBLE_DEVICES", "1,3")
	r := k.Run()
	if r.Code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", r.Code, r.Stderr)
	}
	child := parseReport(t, r.Stdout)
	if v, ok := child.Getenv("CUDA_VISIBLE_DEVICES"); !ok || v != "1,3" {
		t.Errorf("the command's CUDA_VISIBLE_DEVICES = %q (set %v); want 1,3 as given", v, ok)
	}

	for _, tried := range []string{"PADDLE_GPU_SHARE", "--gpu-share", "--mode", "--monitor-url", "PADDLE_ENTRYPOINT_GPU_PROBE", "PADDLE_GPU_TIMEOUT"} {
		want := tried + ": locked by the policy file " + policy.SystemPath
		if n := strings.Count(r.Stderr, want); n != 1 {
			t.Errorf("%d warnings saying %q; want 1:\n%s", n, want, r.Stderr)
		}
	}
	if line := logLine(r.Stderr, "WARN", "setting ignored", "PADDLE_GPU_SHARE: locked by the policy file "+policy.SystemPath+`; the task's value is ignored and \"1\" applies`); line == "" {
		t.Errorf("no warning for PADDLE_GPU_SHARE with the value that applies:\n%s", r.Stderr)
	}

	regs := m.Bodies("/v1/task/register")
	if len(regs) != 1 {
		t.Fatalf("%d registrations at the policy's monitor; want 1\nstderr:\n%s", len(regs), r.Stderr)
	}
	var reg struct {
		GPUCount int `json:"gpu_count"`
		GPUs     []struct {
			UUID  string  `json:"uuid"`
			Share float64 `json:"share"`
		} `json:"gpus"`
	}
	if err := json.Unmarshal([]byte(regs[0]), &reg); err != nil {
		t.Fatal(err)
	}
	if reg.GPUCount != 2 || len(reg.GPUs) != 2 || reg.GPUs[0].UUID != fakeUUID(1) || reg.GPUs[1].UUID != fakeUUID(3) ||
		reg.GPUs[0].Share != 1 || reg.GPUs[1].Share != 1 {
		t.Errorf("registration: %s; want GPUs 1 and 3 of the probe at share 1", regs[0])
	}
	if c := m.Bodies("/v1/task/complete"); len(c) != 1 {
		t.Errorf("%d completions; want 1 (supervise mode, as the policy says)", len(c))
	}
	if got := labelMap(t, labelsFile)["gpu_count"]; got != "2" {
		t.Errorf("labels file %s: gpu_count=%q, want 2", labelsFile, got)
	}
	if _, err := os.Stat(k.LabelsFile()); err == nil {
		t.Errorf("the task's own PADDLE_LABELS_FILE %s was written; the policy's path is locked", k.LabelsFile())
	}
}

// TestLockedSettingsUnlockedDefaults: a policy's settings without
// "locked" are defaults: the task's environment and flags still win, and
// nothing is warned about.
func TestLockedSettingsUnlockedDefaults(t *testing.T) {
	m := newRecordingMonitor(t)
	k := newTask(t, bin.report)
	pol := fmt.Sprintf(`{"settings": {"PADDLE_MONITOR_URL": %q, "PADDLE_OTEL": false}}`, m.URL)
	src := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(src, []byte(pol), 0o644); err != nil {
		t.Fatal(err)
	}
	polSystemPolicy(t, k, src)
	k.Setenv("PADDLE_PROJECT", "search_ranking")
	k.Setenv("PADDLE_OTEL", "on")
	r := k.Run()
	if r.Code != 0 || strings.Contains(r.Stderr, "locked by") {
		t.Fatalf("exit %d; stderr:\n%s", r.Code, r.Stderr)
	}
	if n := len(m.Bodies("/v1/task/register")); n != 1 {
		t.Errorf("%d registrations at the policy's monitor URL (a default); want 1", n)
	}
	if v, _ := parseReport(t, r.Stdout).Getenv("OTEL_RESOURCE_ATTRIBUTES"); !strings.Contains(v, "paddle.project=search_ranking") {
		t.Errorf("OTEL_RESOURCE_ATTRIBUTES = %q: PADDLE_OTEL=on of the task should win over the policy's default", v)
	}
}
