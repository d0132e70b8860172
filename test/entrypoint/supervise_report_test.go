package entrypoint

// Black-box tests of what supervise mode reports at the command's end: a
// crashing GPU sampler, and a supervisor killed right after the command
// ended (GPU summaries and the gate: supervise_blackbox_test.go).

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// completionOf decodes the one completion m received.
func completionOf(t *testing.T, m *supMonitor) map[string]any {
	t.Helper()
	var body map[string]any
	if err := json.Unmarshal(m.waitFor(t, "/v1/task/complete", 1)[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	return body
}

func TestSuperviseGPUSamplerCrashes(t *testing.T) {
	// The sampler's driver crashes after two samples: the command and its
	// exit status are untouched and the completion still goes out.
	m := newSupMonitor(t)
	k := gpuTask(t, 1, "/bin/sh", "-c", "sleep 0.8; exit 0")
	k.Setenv("PADDLE_ENTRYPOINT_MODE", "supervise")
	k.Setenv("PADDLE_MONITOR_URL", m.URL)
	k.Setenv("PADDLE_GPU_SAMPLE", "100ms")
	k.Setenv("FAKE_NVML_SAMPLE_MODE", "crash")
	k.Setenv("FAKE_NVML_SAMPLE_OK", "2")
	if r := k.Run(); r.Code != 0 {
		t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
	}
	body := completionOf(t, m)
	if body["exit_code"] != 0.0 || len(body["gpus"].([]any)) != 1 {
		t.Errorf("completion %v", body)
	}
}

func TestSuperviseKilledRightAfterTheEnd(t *testing.T) {
	// The registration hangs, so the supervisor waits for it after the
	// command ended; killed with SIGKILL then (the labels file says the
	// command ended), it has lost nothing: a later spool flush delivers
	// the registration, then the completion.
	m := newSupMonitor(t).answer("/v1/task/register", "hang")
	k := supTask(t, "/bin/sh", "-c", "exit 4")
	k.Setenv("PADDLE_MONITOR_URL", m.URL)
	k.Setenv("PADDLE_TASK_ID", "kill-1")
	k.Setenv("PADDLE_COMPLETE_BUDGET", "30s")
	l := startLive(t, k.Command(context.Background()))
	deadline := time.Now().Add(15 * time.Second)
	for labelMapQuiet(k.LabelsFile())["exit_code"] != "4" {
		if time.Now().After(deadline) {
			t.Fatalf("the labels file never got exit_code=4\n%s", l.stderr.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	l.cmd.Process.Signal(syscall.SIGKILL)
	l.wait()
	if st := spoolStats(t, k); st["pending"] != 1 || st["completions_pending"] != 1 {
		t.Fatalf("spool %v, want the registration and the completion", st)
	}
	m2 := newSupMonitor(t)
	k.Setenv("PADDLE_MONITOR_URL", m2.URL)
	if r := spoolRun(k, "flush"); r.Code != 0 {
		t.Fatalf("flush: exit %d\n%s", r.Code, r.Stderr)
	}
	if got := m2.pathsNow(); !slices.Equal(got, []string{"/v1/task/register", "/v1/task/complete"}) {
		t.Errorf("flush sent %q, want the registration then the completion", got)
	}
	if body := completionOf(t, m2); body["task_id"] != "kill-1" || body["exit_code"] != 4.0 {
		t.Errorf("completion %v", body)
	}
}

// labelMapQuiet reads a labels file as key=value lines; a missing or
// half-read file is an empty map.
func labelMapQuiet(path string) map[string]string {
	out := map[string]string{}
	b, err := os.ReadFile(path)
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(b), "\n") {
		if key, value, ok := strings.Cut(line, "="); ok {
			out[key] = value
		}
	}
	return out
}

// pathsNow returns the paths requested so far, in order.
func (m *supMonitor) pathsNow() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.paths)
}
