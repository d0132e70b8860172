package entrypoint

// scripts/gpu-check.sh, run against the fake NVML library (no GPU here):
// it must run every step and print what each saw, so that on the day a GPU
// machine is at hand it is known to work.

import (
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// checkEnv is a minimal environment: the machine's GPU settings and the
// developer's PADDLE_* variables never reach the script.
func checkEnv(t *testing.T) []string {
	return []string{"PATH=/usr/local/bin:/usr/bin:/bin", "TMPDIR=" + t.TempDir()}
}

func TestGPUCheckScript(t *testing.T) {
	cmd := exec.Command("scripts/gpu-check.sh", bin.dir)
	cmd.Env = append(checkEnv(t),
		"GPU_CHECK_LIBRARY_PATH="+fakeNVMLDir(t), "GPU_CHECK_SAMPLE_SECONDS=2", "GPU_CHECK_TASK_SECONDS=2",
		"FAKE_NVML_GPUS=2", "FAKE_NVML_NAME=NVIDIA H200", "FAKE_NVML_MIG_0="+h200MIG, "FAKE_NVML_UTIL=30",
		"CUDA_VISIBLE_DEVICES="+migUUID(0, 2, 0)+",1")
	began := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(began)
	if err != nil {
		t.Fatalf("gpu-check.sh: %v\n%s", err, out)
	}
	// Compared without blanks: the JSON is indented where python3 is
	// installed, compact where it is not.
	squeeze := strings.NewReplacer(" ", "", "\n", "", "\t", "")
	text := squeeze.Replace(string(out))
	for _, want := range []string{
		"== probe",
		`"mig_enabled": [`,
		`"profile": "3g.71gb"`,
		"gpu_count=2\ngpu_uuids=" + migUUID(0, 2, 0) + "," + fakeUUID(1),
		"v2 " + migUUID(0, 2, 0) + "=-/-/1000000000 " + fakeUUID(1) + "=30/",
		"exit status: 0",
		"-- registration, as it would be sent:",
		`"mig_uuid": "` + migUUID(0, 2, 0) + `"`,
		`"energy_estimated": true`,
		`"share": 0.42857142857142855`,
	} {
		if !strings.Contains(text, squeeze.Replace(want)) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// How many lines 2 s of sampling every second gives depends on when
	// the probe's first reading falls (2 or 3 here, 1 on a loaded
	// machine); each line is a reading, and the fake's energy counter rises
	// 100 J a reading.
	m := regexp.MustCompile(`(?m)^lines: (\d+)$`).FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("no line count in:\n%s", out)
	}
	n, _ := strconv.Atoi(m[1])
	joules := fmt.Sprintf("%.3f J", float64(n-1)*100)
	for _, want := range []string{
		migUUID(0, 2, 0) + ": 0 utilisation readings, energy " + joules + " (the parent GPU's)",
		fmt.Sprintf("%s: %d utilisation readings, energy %s", fakeUUID(1), n, joules),
	} {
		if n < 1 || !strings.Contains(string(out), want) {
			t.Errorf("%d sample lines; output lacks %q:\n%s", n, want, out)
		}
	}
	if took > time.Minute {
		t.Errorf("took %v with 2 s steps", took)
	}
}

func TestGPUCheckScriptUsage(t *testing.T) {
	for _, tt := range []struct {
		args []string
		env  string
		says string
	}{
		{[]string{t.TempDir()}, "", "run 'make build' first"},
		{[]string{bin.dir}, "GPU_CHECK_SAMPLE_SECONDS=soon", "whole seconds"},
		{[]string{bin.dir}, "GPU_CHECK_TASK_SECONDS=0", "whole seconds"},
	} {
		cmd := exec.Command("scripts/gpu-check.sh", tt.args...)
		cmd.Env = append(checkEnv(t), tt.env)
		out, err := cmd.CombinedOutput()
		if exitCode(err) != 2 || !strings.Contains(string(out), tt.says) {
			t.Errorf("%v %s: exit %d, output %q; want 2 and %q", tt.args, tt.env, exitCode(err), out, tt.says)
		}
	}
}
