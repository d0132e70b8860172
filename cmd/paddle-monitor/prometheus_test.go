package main

// deploy/prometheus/prometheus.yml, loaded by promtool and by a real
// Prometheus (Debian's prometheus package) that scrapes a real
// `paddle-monitor serve --metrics-auth` with the configured credentials,
// a stand-in dcgm-exporter and a stand-in node textfile, and joins them.

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
	"github.com/paddle-entrypoint/paddle-entrypoint/test/harness"
)

const deployPrometheus = "../../deploy/prometheus"

// prometheusDir copies the shipped configuration and the rules it loads
// into a new directory, as they would lie in /etc/prometheus, with the
// monitor's token file beside them; edit rewrites the configuration's text.
func prometheusDir(t *testing.T, token string, edit func(string) string) (dir string) {
	t.Helper()
	dir = t.TempDir()
	for _, name := range []string{"prometheus.yml", "paddle-rules.yml", "paddle-alerts.yml"} {
		b, err := os.ReadFile(filepath.Join(deployPrometheus, name))
		if err != nil {
			t.Fatal(err)
		}
		if name == "prometheus.yml" && edit != nil {
			b = []byte(edit(string(b)))
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "paddle-monitor.token"), []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestPrometheusConfig(t *testing.T) {
	promtool := harness.Tool(t, "promtool")
	prometheus := harness.Tool(t, "prometheus")

	// As shipped: promtool accepts it and the rules it names.
	dir := prometheusDir(t, "a-secret", nil)
	out, err := exec.Command(promtool, "check", "config", filepath.Join(dir, "prometheus.yml")).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "SUCCESS: 2 rule files found") {
		t.Fatalf("promtool check config: %v\n%s", err, out)
	}
	for _, want := range []string{"job_name: paddle-monitor", "job_name: dcgm-exporter", "job_name: node",
		"credentials_file: paddle-monitor.token", "--storage.tsdb.retention.time=400d"} {
		if b, _ := os.ReadFile(filepath.Join(deployPrometheus, "prometheus.yml")); !strings.Contains(string(b), want) {
			t.Errorf("prometheus.yml lacks %q", want)
		}
	}

	// The real thing: the monitor needs an admin token on /metrics.
	s := startServer(t, storetest.SQLiteDSN(t), "--tokens", tokensFile(t, t.TempDir()), "--metrics-auth")
	body := regBody("prom-1", "search_a", "ann@example.com", time.Now().Unix()-60)
	expect(t, s.do(t, registerReq(body, "s-secret")), 201, "")
	dcgm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "# TYPE DCGM_FI_DEV_GPU_UTIL gauge")
		fmt.Fprintln(w, `DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-prom-1",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="node-1"} 73`)
	}))
	defer dcgm.Close()
	node := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "# TYPE node_textfile_scrape_error gauge")
		fmt.Fprintln(w, "node_textfile_scrape_error 0")
	}))
	defer node.Close()
	host := func(u string) string { return strings.TrimPrefix(u, "http://") }

	// Only the targets and the scrape intervals change (a test cannot wait
	// 30 s for a first scrape); authorization, rules and paths stay.
	dir = prometheusDir(t, "a-secret", func(c string) string {
		for old, new := range map[string]string{
			`"paddle-monitor.paddle.svc:8080"`:     `"` + host(s.URL) + `"`,
			`"gpu-node-1:9400", "gpu-node-2:9400"`: `"` + host(dcgm.URL) + `"`,
			`"gpu-node-1:9100", "gpu-node-2:9100"`: `"` + host(node.URL) + `"`,
			"scrape_interval: 30s":                 "scrape_interval: 1s",
			"scrape_interval: 15s":                 "scrape_interval: 1s",
			"scrape_timeout: 10s":                  "scrape_timeout: 1s",
		} {
			if !strings.Contains(c, old) {
				t.Fatalf("prometheus.yml no longer holds %s", old)
			}
			c = strings.ReplaceAll(c, old, new)
		}
		return c
	})
	addr := freeAddr(t)
	cmd := exec.Command(prometheus, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--storage.tsdb.retention.time=400d",
		"--web.listen-address="+addr)
	var log strings.Builder
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	api := "http://" + addr

	// Every target up: the monitor's with the configured token.
	var health map[string]string
	waitFor(t, 60*time.Second, func() bool {
		var r struct {
			Data struct {
				ActiveTargets []struct {
					Labels    map[string]string `json:"labels"`
					Health    string            `json:"health"`
					LastError string            `json:"lastError"`
				} `json:"activeTargets"`
			} `json:"data"`
		}
		if getJSON(api+"/api/v1/targets", &r) != nil {
			return false
		}
		health = map[string]string{}
		for _, tg := range r.Data.ActiveTargets {
			health[tg.Labels["job"]] = tg.Health + " " + tg.LastError
		}
		return health["paddle-monitor"] == "up " && health["dcgm-exporter"] == "up " && health["node"] == "up "
	}, func() string { return fmt.Sprintf("targets %v\n%s", health, log.String()) })

	// The monitor's series, joined with the GPU's on UUID.
	var got string
	waitFor(t, 30*time.Second, func() bool {
		var r struct {
			Data struct {
				Result []struct {
					Metric map[string]string `json:"metric"`
					Value  []any             `json:"value"`
				} `json:"result"`
			} `json:"data"`
		}
		q := `DCGM_FI_DEV_GPU_UTIL * on (UUID) group_left (task_id, project, owner) paddle_task_gpu_info{job="paddle-monitor"}`
		if getJSON(api+"/api/v1/query?query="+url.QueryEscape(q), &r) != nil || len(r.Data.Result) != 1 {
			got = fmt.Sprint(r.Data.Result)
			return false
		}
		m := r.Data.Result[0].Metric
		got = fmt.Sprint(m, r.Data.Result[0].Value)
		return m["task_id"] == "prom-1" && m["project"] == "search_a" && m["owner"] == "ann@example.com" && r.Data.Result[0].Value[1] == "73"
	}, func() string { return "the join gave " + got })

	// The rules and the alerts were loaded from the files the configuration names.
	var rules struct {
		Data struct {
			Groups []struct {
				Name  string `json:"name"`
				File  string `json:"file"`
				Rules []any  `json:"rules"`
			} `json:"groups"`
		} `json:"data"`
	}
	err = getJSON(api+"/api/v1/rules", &rules)
	files := map[string]string{}
	for _, g := range rules.Data.Groups {
		files[g.Name] = g.File
	}
	if err != nil || files["paddle-gpu"] != filepath.Join(dir, "paddle-rules.yml") || files["paddle-alerts"] != filepath.Join(dir, "paddle-alerts.yml") {
		t.Errorf("rules: %v %+v", err, rules.Data.Groups)
	}
}

// freeAddr is a free 127.0.0.1 address for a server that cannot be told
// to pick its own port.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func getJSON(u string, v any) error {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// waitFor polls ok until it holds, failing with what() after timeout.
func waitFor(t *testing.T, timeout time.Duration, ok func() bool, what func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", timeout, what())
		}
		time.Sleep(200 * time.Millisecond)
	}
}
