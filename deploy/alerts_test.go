package deploy

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor"
	"github.com/paddle-entrypoint/paddle-entrypoint/test/harness"
)

const alertsFile = "prometheus/paddle-alerts.yml"

func amtool(t *testing.T) string { return harness.Tool(t, "amtool") }

// The alerts load, with promtool's lint on (no two rules of one name and
// labels: the ways of seeing an idle GPU are one rule joined with `or`).
func TestPromtoolCheckAlerts(t *testing.T) {
	out, err := exec.Command(promtool(t), "check", "rules", alertsFile).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "SUCCESS: 9 rules found") || strings.Contains(string(out), "FAILED") {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
}

// The unit tests of every alert: each fires when it should and not
// before, with the labels and annotations an owner reads, once across two
// monitor replicas.
func TestPromtoolTestAlerts(t *testing.T) {
	cmd := exec.Command(promtool(t), "test", "rules", "paddle-alerts.test.yml")
	cmd.Dir = "prometheus"
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "SUCCESS") {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}

// Without the reduction over replicas the idle alert comes out twice: the
// unit tests above catch it.
func TestPromtoolAlertsNeedTheReduction(t *testing.T) {
	out, err := naiveRulesTest(t, alertsFile, "prometheus/paddle-alerts.test.yml",
		`max by (task_id, task_name, project, owner, hostname) (paddle_task_idle_seconds{job="paddle-monitor"}) >= 1800`,
		`paddle_task_idle_seconds{job="paddle-monitor"} >= 1800`)
	if err == nil {
		t.Fatalf("the alert without the reduction passed the unit tests:\n%s", out)
	}
}

// alertRule is one rule of the alerts file, as far as these tests read it.
type alertRule struct {
	name, expr string
	labels     map[string]string
}

func alertRules(t *testing.T) []alertRule {
	t.Helper()
	b, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	var rules []alertRule
	for _, chunk := range strings.Split(string(b), "      - alert: ")[1:] {
		r := alertRule{name: strings.TrimSpace(strings.SplitN(chunk, "\n", 2)[0]), labels: map[string]string{}}
		if m := regexp.MustCompile(`(?s)expr: \|\n(.*?)\n\s*(?:for|labels):`).FindStringSubmatch(chunk); m != nil {
			r.expr = m[1]
		}
		if m := regexp.MustCompile(`(?s)labels:\n((?:\s+\w+: \S+\n)+)`).FindStringSubmatch(chunk); m != nil {
			for _, l := range regexp.MustCompile(`(\w+): (\S+)`).FindAllStringSubmatch(m[1], -1) {
				r.labels[l[1]] = l[2]
			}
		}
		rules = append(rules, r)
	}
	return rules
}

// The four alerts of the contract, by their fixed names, with their
// severities; and every series they read exists: the monitor's own
// (collected from a real monitor's registry) or dcgm-exporter's.
func TestAlertsNamesAndSeries(t *testing.T) {
	rules := alertRules(t)
	var got []string
	for _, r := range rules {
		got = append(got, r.name+"/"+r.labels["severity"])
	}
	want := []string{"PaddleTaskGPUIdle/warning", "PaddleTaskOverEstimate/warning",
		"PaddleProjectBudget/warning", "PaddleProjectBudget/critical", "PaddleMonitorStoreErrors/critical",
		"PaddleMonitorDown/critical", "PaddleGPUUndeclared/warning", "PaddleNodeUnobserved/critical", "PaddleGPUUUIDConflict/critical"}
	if !slices.Equal(got, want) {
		t.Fatalf("alerts %q, want %q", got, want)
	}
	known := append(monitorSeries(t), append(slices.Clone(dcgm), "up")...)
	for _, r := range rules {
		if r.expr == "" {
			t.Fatalf("%s: no expression found", r.name)
		}
		for _, name := range metricNames(r.expr) {
			if !slices.Contains(known, name) {
				t.Errorf("%s reads %q, which nothing exports", r.name, name)
			}
		}
	}
}

// monitorSeries are the names a monitor's /metrics serves: the API's own
// series (gathered from a real monitor's registry) and what the task,
// project and fleet collectors describe.
func monitorSeries(t *testing.T) []string {
	t.Helper()
	reg := prometheus.NewRegistry()
	monitor.New(monitor.Config{Registry: reg})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, mf := range mfs {
		names = append(names, mf.GetName())
	}
	ch := make(chan *prometheus.Desc, 64)
	monitor.NewTaskCollector(nil, time.Hour, nil).Describe(ch)
	monitor.NewProjectCollector(nil, nil, nil, nil, nil).Describe(ch)
	monitor.NewFleetCollector(monitor.FleetConfig{}).Describe(ch)
	monitor.NewNodeCollector(nil, nil).Describe(ch)
	close(ch)
	for d := range ch {
		names = append(names, regexp.MustCompile(`fqName: "([^"]+)"`).FindStringSubmatch(d.String())[1])
	}
	return names
}

// The Alertmanager example loads, and routes each alert where its comment
// says: an owner that is an address by e-mail, any other owner to the chat
// webhook, project and monitor alerts to the platform team; task alerts
// are grouped by owner (one notification per owner).
func TestAlertmanagerConfig(t *testing.T) {
	tool := amtool(t)
	const cfg = "alertmanager/alertmanager.yml"
	if out, err := exec.Command(tool, "check-config", cfg).CombinedOutput(); err != nil || !strings.Contains(string(out), "SUCCESS") {
		t.Fatalf("amtool check-config: %v\n%s", err, out)
	}
	for labels, receiver := range map[string]string{
		"alertname=PaddleTaskGPUIdle owner=ann@example.com project=search task_id=t1":                                "owner-email",
		"alertname=PaddleTaskOverEstimate owner=ann@example.com project=search task_id=t1":                           "owner-email",
		"alertname=PaddleTaskGPUIdle owner=cho project=vision task_id=t3":                                            "owner-chat",
		"alertname=PaddleProjectBudget project=nlp severity=critical":                                                "gpu-platform",
		"alertname=PaddleMonitorStoreErrors instance=monitor-0 severity=critical":                                    "gpu-platform",
		"alertname=PaddleMonitorDown instance=monitor-0 job=paddle-monitor severity=critical":                        "gpu-platform",
		"alertname=PaddleGPUUndeclared node=gpu-node-1 namespace=team-b pod=nb-0 container=jupyter severity=warning": "gpu-platform",
		"alertname=PaddleNodeUnobserved node=gpu-node-2 severity=critical":                                           "gpu-platform",
	} {
		args := append([]string{"config", "routes", "test", "--config.file=" + cfg}, strings.Fields(labels)...)
		out, err := exec.Command(tool, args...).Output()
		if err != nil || strings.TrimSpace(string(out)) != receiver {
			t.Errorf("%s: routed to %q (%v), want %s", labels, out, err, receiver)
		}
	}
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "group_by: [owner, alertname]"); n != 2 {
		t.Errorf("%d owner routes group by owner, want both", n)
	}
}
