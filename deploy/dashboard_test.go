package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The dashboard's GPU-hours panels show data from the first rule
// evaluations on, not only after an hour: its GPU-hours queries, with the
// dashboard range at 9m59s, evaluated by promtool over the shipped rules ten
// minutes after the first samples, give the GPU-hours of those ten minutes.
// Two GPUs of search/ann from minute 0: the rules record a count of 2 at
// every minute, and the ten samples of (0m, 10m] are 2 × 10 / 60 GPU-hours.
func TestDashboardGPUHoursFromTheFirstScrape(t *testing.T) {
	b, err := os.ReadFile("grafana/paddle-gpu.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	var exprs []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			if strings.Contains(p.Title, "GPU-hours") || strings.Contains(tg.Expr, "gpu_hours") ||
				p.Title == "By project and owner (dashboard time range)" && strings.Contains(tg.Expr, "paddle_gpus") {
				exprs = append(exprs, tg.Expr)
			}
		}
	}
	if len(exprs) != 2 {
		t.Fatalf("found %d GPU-hours queries in the dashboard, want 2 (by project; by project and owner): %q", len(exprs), exprs)
	}
	rules, err := filepath.Abs(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	vars := strings.NewReplacer("$__range", "9m59s", `"$project"`, `".*"`)
	var tests strings.Builder
	fmt.Fprintf(&tests, `rule_files: [%q]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'DCGM_FI_DEV_GPU_UTIL{UUID="GPU-a",Hostname="node1",modelName="Tesla T4"}'
        values: '80x30'
      - series: 'DCGM_FI_DEV_GPU_UTIL{UUID="GPU-b",Hostname="node1",modelName="Tesla T4"}'
        values: '40x30'
      - series: 'paddle_task_gpu_info{task_id="t1",project="search",owner="ann",hostname="node1",UUID="GPU-a",gpu_model="Tesla T4",instance="monitor-0",job="paddle-monitor"}'
        values: '1x30'
      - series: 'paddle_task_gpu_info{task_id="t1",project="search",owner="ann",hostname="node1",UUID="GPU-b",gpu_model="Tesla T4",instance="monitor-0",job="paddle-monitor"}'
        values: '1x30'
    promql_expr_test:
`, rules)
	wants := []string{`{project="search"}`, `{project="search",owner="ann"}`}
	for i, e := range exprs {
		q, _ := json.Marshal(vars.Replace(e))
		fmt.Fprintf(&tests, "      - expr: %s\n        eval_time: 10m\n        exp_samples:\n          - labels: '%s'\n            value: %v\n",
			q, wants[i], 2.0*10/60)
	}
	file := filepath.Join(t.TempDir(), "dashboard.test.yml")
	if err := os.WriteFile(file, []byte(tests.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(promtool(t), "test", "rules", file).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "SUCCESS") {
		t.Fatalf("the dashboard's GPU-hours ten minutes in: %v\n%s\n%s", err, out, tests.String())
	}
}
