package main

// Black-box tests of what supervise mode reports at the command's end: GPU
// sampling summaries, the quality gate and the textfile, and a supervisor
// killed right after the command ended.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/gpu"
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

func TestSuperviseGPUSampling(t *testing.T) {
	// GPU 0 at a constant 40 % with used memory cycling 1000, 5000, 3000
	// bytes; GPU 1 idle (the fake's default 0 %).
	m := newSupMonitor(t)
	k := gpuTask(t, 2, "/bin/sh", "-c", "sleep 1.2; exit 6")
	k.Setenv("PADDLE_ENTRYPOINT_MODE", "supervise")
	k.Setenv("PADDLE_MONITOR_URL", m.URL)
	k.Setenv("PADDLE_GPU_SAMPLE", "100ms")
	k.Setenv("FAKE_NVML_UTIL_0", "40")
	k.Setenv("FAKE_NVML_USED_0", "1000,5000,3000")
	if r := k.Run(); r.Code != 6 {
		t.Fatalf("exit %d, want the command's 6\n%s", r.Code, r.Stderr)
	}
	var body struct {
		GPUs []gpu.GPUSummary `json:"gpus"`
	}
	b, _ := json.Marshal(completionOf(t, m))
	json.Unmarshal(b, &body)
	if len(body.GPUs) != 2 || body.GPUs[0].UUID != fakeUUID(0) || body.GPUs[1].UUID != fakeUUID(1) {
		t.Fatalf("gpus %s", b)
	}
	g0, g1 := body.GPUs[0], body.GPUs[1]
	// 1.2 s at 100 ms: about 12 samples; at least 3 on a loaded machine.
	if g0.Samples < 3 || g1.Samples < 3 {
		t.Fatalf("samples %d and %d in 1.2s every 100ms\n%s", g0.Samples, g1.Samples, b)
	}
	if *g0.UtilMean != 40 || *g0.UtilP95 != 40 || *g0.IdleShare != 0 || *g0.MemoryUsedPeakBytes != 5000 {
		t.Errorf("GPU 0: %s; want mean 40, p95 40, idle 0, peak 5000", b)
	}
	if *g1.UtilMean != 0 || *g1.UtilP95 != 0 || *g1.IdleShare != 1 {
		t.Errorf("GPU 1: %s; want idle throughout", b)
	}
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

func TestSuperviseGate(t *testing.T) {
	for _, tc := range []struct {
		name, metrics string
		code          int
		passed        bool
	}{
		{"passes", `{"eval":{"accuracy":0.97},"loss":0.1}`, 0, true},
		{"fails", `{"eval":{"accuracy":0.90},"loss":0.1}`, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newSupMonitor(t)
			k := gpuTask(t, 1, "/bin/true")
			tf := filepath.Join(k.Dir, "textfile")
			os.Mkdir(tf, 0o755)
			metrics := filepath.Join(k.Dir, "metrics.json")
			os.WriteFile(metrics, []byte(tc.metrics), 0o644)
			k.Setenv("PADDLE_ENTRYPOINT_MODE", "supervise")
			k.Setenv("PADDLE_MONITOR_URL", m.URL)
			k.Setenv("PADDLE_GATE", "eval.accuracy>=0.95")
			k.Setenv("PADDLE_GATE_FILE", metrics)
			k.Setenv("PADDLE_TEXTFILE_DIR", tf)
			k.Setenv("PADDLE_GPU_SAMPLE", "0")
			if r := k.Run(); r.Code != tc.code {
				t.Fatalf("exit %d, want %d\n%s", r.Code, tc.code, r.Stderr)
			}
			body := completionOf(t, m)
			gate, _ := body["gate"].(map[string]any)
			if body["exit_code"] != 0.0 || gate["expr"] != "eval.accuracy>=0.95" || gate["passed"] != tc.passed || gate["reason"] == "" {
				t.Errorf("completion %v: want the command's exit_code 0 and the gate's verdict", body)
			}
			want := map[string]any{"eval.accuracy": map[bool]float64{true: 0.97, false: 0.90}[tc.passed], "loss": 0.1}
			if fmt.Sprint(body["metrics"]) != fmt.Sprint(want) {
				t.Errorf("metrics %v, want %v", body["metrics"], want)
			}
			if ents, _ := os.ReadDir(tf); len(ents) != 0 {
				t.Errorf("textfile directory holds %v after the command ended", ents)
			}
		})
	}
	t.Run("command failed: not gated", func(t *testing.T) {
		k := supTask(t, "/bin/sh", "-c", "exit 7")
		k.Setenv("PADDLE_GATE", "accuracy>=0.95")
		k.Setenv("PADDLE_GATE_FILE", filepath.Join(k.Dir, "missing.json"))
		if r := k.Run(); r.Code != 7 {
			t.Errorf("exit %d, want the command's 7", r.Code)
		}
	})
	t.Run("missing file fails the gate", func(t *testing.T) {
		k := supTask(t, "/bin/true")
		k.Setenv("PADDLE_GATE", "accuracy>=0.95")
		k.Setenv("PADDLE_GATE_FILE", filepath.Join(k.Dir, "missing.json"))
		k.Setenv("PADDLE_GATE_EXIT", "42")
		if r := k.Run(); r.Code != 42 {
			t.Errorf("exit %d, want PADDLE_GATE_EXIT 42", r.Code)
		}
	})
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
