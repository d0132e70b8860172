package deploy

// Where the rules and alerts take their series from: the scrape jobs of the
// shipped prometheus.yml. A node's textfile directory is writable by every
// task on the node, so what a container writes there must not move an
// alert or a GPU-hour while the monitor is up; the families only the
// monitor or the node agent serve are dropped at that job's scrape.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/paddle-entrypoint/paddle-entrypoint/test/harness"
)

const prometheusFile = "prometheus/prometheus.yml"

// promConfig is the part of prometheus.yml these tests read.
type promConfig struct {
	RuleFiles     []string `json:"rule_files"`
	ScrapeConfigs []struct {
		JobName              string           `json:"job_name"`
		HonorLabels          bool             `json:"honor_labels"`
		MetricRelabelConfigs []map[string]any `json:"metric_relabel_configs"`
		StaticConfigs        []struct {
			Targets []string `json:"targets"`
		} `json:"static_configs"`
	} `json:"scrape_configs"`
}

func loadPromConfig(t *testing.T) promConfig {
	t.Helper()
	b, err := os.ReadFile(prometheusFile)
	if err != nil {
		t.Fatal(err)
	}
	var c promConfig
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatalf("%s: %v", prometheusFile, err)
	}
	return c
}

// promtool check config on the shipped file, with the files it names
// beside it as /etc/prometheus/ would have them: valid, and no lint
// failure (a duplicate rule, for one).
func TestPromtoolCheckConfig(t *testing.T) {
	tool := promtool(t)
	dir := t.TempDir()
	for _, f := range []string{prometheusFile, rulesFile, alertsFile} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, filepath.Base(f)), string(b))
	}
	writeFile(t, filepath.Join(dir, "paddle-monitor.token"), "token\n")
	cmd := exec.Command(tool, "check", "config", "prometheus.yml")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil || strings.Contains(string(out), "FAILED") || strings.Contains(strings.ToLower(string(out)), "lint") {
		t.Fatalf("promtool check config: %v\n%s", err, out)
	}
	for _, want := range []string{"SUCCESS: 17 rules found", "SUCCESS: 9 rules found"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("promtool check config does not say %q:\n%s", want, out)
		}
	}
}

// The jobs the rules and alerts name exist in prometheus.yml, and every
// paddle_* series they read is selected by job: the monitor's everywhere,
// the node textfile's only in the two rules that take it while no monitor
// is up. The textfile job drops the monitor's and the agent's families
// and does not honour a scraped job label.
func TestPrometheusJobs(t *testing.T) {
	c := loadPromConfig(t)
	jobs := map[string]int{}
	for i, sc := range c.ScrapeConfigs {
		jobs[sc.JobName] = i
	}
	for _, want := range []string{"paddle-monitor", "paddle-node", "node", "dcgm-exporter"} {
		if _, ok := jobs[want]; !ok {
			t.Errorf("prometheus.yml has no scrape job %q", want)
		}
	}
	node := c.ScrapeConfigs[jobs["node"]]
	if node.HonorLabels {
		t.Error("the node textfile job honours scraped labels: a file could claim job=\"paddle-monitor\"")
	}
	var drop []string
	for _, r := range node.MetricRelabelConfigs {
		if r["action"] == "drop" {
			drop = append(drop, fmt.Sprint(r["regex"]))
		}
	}
	if len(drop) != 1 {
		t.Fatalf("the node job's metric_relabel_configs: %v, want one drop rule", node.MetricRelabelConfigs)
	}
	re := regexp.MustCompile("^(?:" + drop[0] + ")$")
	for name, dropped := range map[string]bool{
		"paddle_project_month_cost": true, "paddle_project_budget_cost": true, "paddle_project_month_gpu_seconds": true,
		"paddle_task_idle_seconds": true, "paddle_fleet_gpu_seconds": true, "paddle_gpu_user_info": true,
		"paddle_node_report_age_seconds": true, "paddle_node_gpu_user_info": true,
		"paddle_task_info": false, "paddle_task_gpu_info": false, "paddle_task_gpu_share": false,
		"paddle_task_start_time_seconds": false, "node_cpu_seconds_total": false, "node_textfile_scrape_error": false,
	} {
		if re.MatchString(name) != dropped {
			t.Errorf("the node job drops %s: %v, want %v", name, !dropped, dropped)
		}
	}

	selector := regexp.MustCompile(`(?:^|[^:\w])(paddle_[a-z_]+)(\{[^}]*\})?`)
	for _, f := range []string{rulesFile, alertsFile} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`(?s)expr: \|\n(.*?)\n\s*(?:for:|labels:|- record:|- alert:|\z|\n)`).FindAllStringSubmatch(string(b), -1) {
			for _, s := range selector.FindAllStringSubmatch(m[1], -1) {
				job := regexp.MustCompile(`job="([^"]*)"`).FindStringSubmatch(s[2])
				switch {
				case job == nil:
					t.Errorf("%s: %s is read from any job:\n%s", f, s[1], m[1])
				case job[1] == "node" && !(f == rulesFile && strings.Contains(m[1], `unless on () up{job="paddle-monitor"} == 1`)):
					t.Errorf("%s: %s is read from the node textfile while the monitor is up:\n%s", f, s[1], m[1])
				case job[1] != "paddle-monitor" && job[1] != "paddle-node" && job[1] != "node":
					t.Errorf("%s: %s is read from job %q", f, s[1], job[1])
				}
				if _, ok := jobs[job[1]]; job != nil && !ok {
					t.Errorf("%s: job %q is no scrape job of prometheus.yml", f, job[1])
				}
			}
		}
	}
}

// Without the job selectors the forged textfile series of the unit tests
// raise alerts and move GPU-hours: the unit tests prove the selectors.
func TestPromtoolForgedTextfileNeedsTheJobs(t *testing.T) {
	for _, c := range []struct{ file, tests, old, new string }{
		{alertsFile, "prometheus/paddle-alerts.test.yml",
			`max by (project) (paddle_project_month_cost{job="paddle-monitor"})`, `max by (project) (paddle_project_month_cost)`},
		{alertsFile, "prometheus/paddle-alerts.test.yml",
			`paddle_task_idle_seconds{job="paddle-monitor"}`, `paddle_task_idle_seconds`},
		{rulesFile, "prometheus/paddle-rules.test.yml",
			`(paddle_task_gpu_info{job="node"} == 1 unless on () up{job="paddle-monitor"} == 1)`, `paddle_task_gpu_info{job="node"}`},
		{rulesFile, "prometheus/paddle-rules.test.yml",
			`paddle_task_gpu_info{job="paddle-monitor"} == 1`, `paddle_task_gpu_info{job="paddle-monitor"}`},
		// The node textfile's share while the monitor is away: without it
		// a MIG instance counts as a whole GPU.
		{rulesFile, "prometheus/paddle-rules.test.yml",
			`(paddle_task_gpu_share{job="node"} unless on () up{job="paddle-monitor"} == 1)`, `paddle_task_gpu_share{job="none"}`},
	} {
		if out, err := naiveRulesTest(t, c.file, c.tests, c.old, c.new); err == nil {
			t.Errorf("%s with %q instead of %q passed its unit tests:\n%s", c.file, c.new, c.old, out)
		}
	}
}

// The shipped node job on a real Prometheus, scraping a textfile that a
// hostile container wrote (served here as node_exporter would serve it,
// with a job label of its own): the monitor's and the agent's families
// never reach the database, the task's own series do, and the file's job
// label does not replace the target's.
func TestTextfileJobDropsForgedFamilies(t *testing.T) {
	promBin := harness.Tool(t, "prometheus")
	const forged = `# TYPE paddle_project_month_cost gauge
paddle_project_month_cost{project="vision",job="paddle-monitor"} 5000
# TYPE paddle_project_budget_cost gauge
paddle_project_budget_cost{project="vision"} 1
# TYPE paddle_task_idle_seconds gauge
paddle_task_idle_seconds{task_id="t2",task_name="eval",project="search",owner="ann",hostname="n1"} 86400
# TYPE paddle_fleet_gpu_seconds gauge
paddle_fleet_gpu_seconds{state="attributed",gpu_model="H200"} 1e9
# TYPE paddle_gpu_user_info gauge
paddle_gpu_user_info{node="n1",state="attributed",pod="p"} 1
# TYPE paddle_node_report_age_seconds gauge
paddle_node_report_age_seconds{node="n1"} 0
# TYPE paddle_node_gpu_user_info gauge
paddle_node_gpu_user_info{node="n1",declared="true"} 1
# TYPE paddle_task_info gauge
paddle_task_info{task_id="t9",project="llm",owner="bob"} 1
# TYPE paddle_task_gpu_info gauge
paddle_task_gpu_info{task_id="t9",project="llm",owner="bob",UUID="GPU-y",GPU_I_ID="1",GPU_I_PROFILE="1g.18gb"} 1
# TYPE paddle_task_gpu_share gauge
paddle_task_gpu_share{task_id="t9",project="llm",owner="bob",UUID="GPU-y",GPU_I_ID="1"} 0.14285714285714285
`
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprint(w, forged)
	}))
	defer target.Close()

	// The shipped node job, its targets replaced by the test's server.
	c := loadPromConfig(t)
	var node map[string]any
	b, _ := os.ReadFile(prometheusFile)
	var raw struct {
		ScrapeConfigs []map[string]any `json:"scrape_configs"`
	}
	if err := yaml.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	for _, sc := range raw.ScrapeConfigs {
		if sc["job_name"] == "node" {
			node = sc
		}
	}
	if node == nil || len(c.ScrapeConfigs) == 0 {
		t.Fatal("prometheus.yml has no node job")
	}
	node["static_configs"] = []any{map[string]any{"targets": []any{strings.TrimPrefix(target.URL, "http://")}}}
	node["scrape_interval"] = "1s"
	cfg, err := yaml.Marshal(map[string]any{"global": map[string]any{"scrape_interval": "1s"}, "scrape_configs": []any{node}})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "prometheus.yml"), string(cfg))
	addr := freePort(t)
	start(t, "prometheus", os.Environ(), promBin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr)
	waitHTTP(t, "prometheus", "http://"+addr+"/-/ready")

	query := func(q string) []map[string]string {
		resp, err := httpClient.Get("http://" + addr + "/api/v1/query?query=" + url.QueryEscape(q))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct {
			Data struct {
				Result []struct {
					Metric map[string]string `json:"metric"`
				} `json:"result"`
			} `json:"data"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatal(err)
		}
		var out []map[string]string
		for _, r := range body.Data.Result {
			out = append(out, r.Metric)
		}
		return out
	}
	deadline := time.Now().Add(60 * time.Second)
	for len(query(`up{job="node"} == 1`)) == 0 || len(query(`paddle_task_info`)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("Prometheus has not scraped the textfile within 60 s")
		}
		time.Sleep(200 * time.Millisecond)
	}
	var names []string
	for _, m := range query(`{__name__=~"paddle_.*"}`) {
		names = append(names, m["__name__"])
		if m["job"] != "node" {
			t.Errorf("%s stored with job %q, want the target's node", m["__name__"], m["job"])
		}
		if m["__name__"] == "paddle_project_month_cost" && m["exported_job"] != "paddle-monitor" {
			t.Errorf("the file's job label: %v", m)
		}
	}
	sort.Strings(names)
	names = slices.Compact(names)
	if want := []string{"paddle_task_gpu_info", "paddle_task_gpu_share", "paddle_task_info"}; !slices.Equal(names, want) {
		t.Errorf("stored from the textfile: %q, want %q", names, want)
	}
}
