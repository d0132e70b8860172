package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
	"github.com/paddle-entrypoint/paddle-entrypoint/test/harness"
)

// TestProbeRestartAndHealth: a probe whose NVML hangs after two samples is
// killed after two missed samples and started again (with backoff); the
// lost samples count as failed and /healthz turns 503 with the reason.
// /metrics passes promtool and maps GPUs to users.
func TestProbeRestartAndHealth(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	pid := startIn(t, "")
	writeState(t, state, fmt.Sprintf("proc 0 compute %d 1000 30", pid))
	listen := freeAddr(t)
	rcv := newReceiver(t, nil)
	env := nodeEnv(state, "PADDLE_MONITOR_URL="+rcv.URL, "PADDLE_NODE_REPORT_SPOOL="+filepath.Join(dir, "r.db"),
		"PADDLE_NODE_INTERVAL=5s", "PADDLE_NODE_SAMPLE=1s", "PADDLE_NODE_LISTEN="+listen,
		"FAKE_NVML_SAMPLE_MODE=hang", "FAKE_NVML_SAMPLE_OK=2")
	startNode(t, env)
	waitFor(t, 20*time.Second, "a healthy sample", func() bool {
		resp, err := http.Get("http://" + listen + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	text := metricsText(t, listen)
	want := fmt.Sprintf(`paddle_node_gpu_user_info{GPU_I_ID="",UUID="GPU-a1b2c300-8f2d-4c1b-9a3e-1c2d3e4f5a00",container="",container_id="",declared="false",namespace="",node="gpu-node-17",pod="",project="",runtime="",slurm_job="",task_id=""} 1`)
	if !strings.Contains(text, want) {
		t.Errorf("/metrics lacks the user map line %s:\n%s", want, text)
	}
	check := exec.Command(harness.Tool(t, "promtool"), "check", "metrics")
	check.Stdin = strings.NewReader(text)
	if out, err := check.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
	waitFor(t, 30*time.Second, "a probe restart", func() bool {
		m := metricsTextSafe(listen)
		return metricValue(m, "paddle_node_probe_restarts_total") >= 1 && metricValue(m, "paddle_node_samples_failed_total") >= 2
	})
	waitFor(t, 30*time.Second, "/healthz 503 with the reason", func() bool {
		body, code := healthz(listen)
		return code == 503 && strings.Contains(body, "probe")
	})
}

func healthz(addr string) (string, int) {
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		return "", 0
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	n, _ := resp.Body.Read(buf)
	b.Write(buf[:n])
	return b.String(), resp.StatusCode
}

// TestOnceDriverWithoutProcessLists: a driver without the process lists,
// per-process utilisation and GPM still gives the GPUs, their utilisation
// and energy; the probe says what it lacks and calls none of them.
func TestOnceDriverWithoutProcessLists(t *testing.T) {
	lib := t.TempDir()
	if err := harness.Run(harness.CC(filepath.Join(lib, "libnvidia-ml.so.1"), "testdata/fakenvml/fakenvml.c",
		"-shared", "-fPIC", "-DFAKE_NVML_NO_PROCESSES", "-DFAKE_NVML_NO_GPM")); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(t.TempDir(), "state")
	pid := startIn(t, "")
	writeState(t, state, fmt.Sprintf("proc 0 compute %d 100 50", pid), "util 0 42", "gpm 1/7 10")
	env := append(nodeEnv(state, "FAKE_NVML_GPUS=2", "FAKE_NVML_MIG_1=7:0:1:17920"), "LD_LIBRARY_PATH="+lib)
	code, out, errs := runNode(t, env, "once", "--interval", "0")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	var r wire.NodeReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Instances) != 2 || *r.Instances[0].UtilMean != 42 || len(r.Instances[0].Users) != 0 || r.GPUs[0].EnergyJoules != nil || r.Instances[1].UtilMean != nil {
		t.Errorf("report %+v", r)
	}
	if !strings.Contains(errs, "nvmlDeviceGetComputeRunningProcesses_v3 not in the NVIDIA library") {
		t.Errorf("the probe did not say what the driver lacks:\n%s", errs)
	}
}
