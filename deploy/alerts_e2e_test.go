package deploy

// The alerts end to end, with real servers on 127.0.0.1: the built
// paddle-monitor, a real Prometheus evaluating deploy/prometheus's alerts
// file, a real Alertmanager routing with deploy/alertmanager's file, and a
// webhook receiver in the test standing in for the chat relay. A task
// supervised by the built paddle-entrypoint on the fake NVML at 0 % sends
// its heartbeats with GPU samples, and PaddleTaskGPUIdle arrives at the
// webhook with the task's owner and project.
//
// The alert's threshold (1800 s idle) and the Alertmanager route are the
// shipped ones. Two things are shortened so that the test takes seconds,
// not half an hour:
//   - idle_since is backdated by one heartbeat the test posts itself, as a
//     spooled sender would: busy, then idle with interval_seconds 3600 (a
//     heartbeat's time and interval are the sender's). The entrypoint's
//     own idle heartbeats continue that run of idle heartbeats, so the
//     idle time the alert reads grows with them;
//   - the rules' `for: 5m` becomes `for: 5s`, and the route's group_wait
//     30s becomes 1s (PADDLE_TEST_ALERTS_SHIPPED_FOR=1 keeps `for: 5m`:
//     the test then takes over five minutes). promtool's unit tests
//     (paddle-alerts.test.yml) prove the five minutes.

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/monitorproc"
	"github.com/paddle-entrypoint/paddle-entrypoint/test/harness"
)

// build builds what `make build` builds, and the fake NVML, into dir.
func build(t *testing.T, dir string) (monitor, entrypoint, nvmlDir string) {
	t.Helper()
	monitor, entrypoint = filepath.Join(dir, "paddle-monitor"), filepath.Join(dir, "paddle-entrypoint")
	nvmlDir = filepath.Join(dir, "nvidia")
	for _, b := range []struct{ out, pkg, cgo string }{
		{monitor, "../cmd/paddle-monitor", "0"}, {entrypoint, "..", "0"},
		{filepath.Join(dir, "paddle-gpu-probe"), "../cmd/paddle-gpu-probe", "1"},
	} {
		c := exec.Command("go", "build", "-trimpath", "-o", b.out, b.pkg)
		c.Env = append(os.Environ(), "CGO_ENABLED="+b.cgo, "CGO_CFLAGS=-O2 -Wno-deprecated-declarations")
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", b.pkg, err, out)
		}
	}
	if err := os.MkdirAll(nvmlDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("gcc", "-O2", "-shared", "-fPIC", "-o", filepath.Join(nvmlDir, "libnvidia-ml.so.1"),
		"../testdata/fakenvml/fakenvml.c").CombinedOutput(); err != nil {
		t.Fatalf("building the fake NVML: %v\n%s", err, out)
	}
	return monitor, entrypoint, nvmlDir
}

// freePort is a port of 127.0.0.1 nothing listens on (for servers that
// cannot be asked for a random one and tell it).
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// server is a child process killed at the end of the test, its output kept.
type server struct {
	name string
	cmd  *exec.Cmd
	out  *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func start(t *testing.T, name string, env []string, bin string, args ...string) *server {
	t.Helper()
	s := &server{name: name, cmd: exec.Command(bin, args...), out: &syncBuffer{}}
	s.cmd.Env = env
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	// Its own process group, so that the end of the test ends its children
	// too (the supervised command); Wait does not wait for a pipe a child
	// still holds.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	s.cmd.WaitDelay = 2 * time.Second
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	t.Cleanup(func() {
		syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { s.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		if t.Failed() {
			t.Logf("%s's output:\n%s", name, s.out.String())
		}
	})
	return s
}

// waitHTTP polls url until it answers 200.
func waitHTTP(t *testing.T, what, url string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := httpClient.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never answered 200 at %s: %v", what, url, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

var httpClient = &http.Client{Timeout: 10 * time.Second}

// notification is the part of Alertmanager's webhook body the test reads.
type notification struct {
	Receiver    string            `json:"receiver"`
	Status      string            `json:"status"`
	GroupLabels map[string]string `json:"groupLabels"`
	Alerts      []struct {
		Status      string            `json:"status"`
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"alerts"`
}

func TestAlertsEndToEnd(t *testing.T) {
	promBin := harness.Tool(t, "prometheus")
	amBin := harness.Tool(t, "prometheus-alertmanager")
	dir := t.TempDir()
	monitorBin, entrypointBin, nvmlDir := build(t, dir)
	env := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + dir}

	// The webhook receiver: the chat relay of the shipped route.
	var mu sync.Mutex
	var got []notification
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var n notification
		if err := json.Unmarshal(b, &n); err != nil {
			t.Errorf("the webhook got %s: %v", b, err)
		}
		mu.Lock()
		got = append(got, n)
		mu.Unlock()
	}))
	defer hook.Close()

	// paddle-monitor.
	mon, err := monitorproc.Start(monitorBin, []string{"--listen", "127.0.0.1:0", "--db", filepath.Join(dir, "monitor.db"), "--log-format", "json"},
		monitorproc.Options{Env: env, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mon.Kill)

	// Alertmanager with the shipped routes; the chat relay is the webhook.
	amCfg, err := os.ReadFile("alertmanager/alertmanager.yml")
	if err != nil {
		t.Fatal(err)
	}
	am := strings.Replace(string(amCfg), "http://chat-relay.example.internal:8080/paddle-alerts", hook.URL+"/paddle-alerts", 1)
	am = strings.Replace(am, "group_wait: 30s", "group_wait: 1s", 1)
	if am == string(amCfg) || !strings.Contains(am, hook.URL) || !strings.Contains(am, "group_wait: 1s") {
		t.Fatal("the Alertmanager file is not what this test expects")
	}
	writeFile(t, filepath.Join(dir, "alertmanager.yml"), am)
	amAddr := freePort(t)
	start(t, "alertmanager", env, amBin, "--config.file="+filepath.Join(dir, "alertmanager.yml"),
		"--storage.path="+filepath.Join(dir, "am"), "--web.listen-address="+amAddr, "--cluster.listen-address=")
	waitHTTP(t, "alertmanager", "http://"+amAddr+"/-/ready")

	// Prometheus with the shipped alerts, scraping the monitor every second.
	rules, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	alerts := string(rules)
	if os.Getenv("PADDLE_TEST_ALERTS_SHIPPED_FOR") != "1" {
		alerts = strings.ReplaceAll(alerts, "for: 5m", "for: 5s")
	}
	writeFile(t, filepath.Join(dir, "paddle-alerts.yml"), alerts)
	writeFile(t, filepath.Join(dir, "prometheus.yml"), fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [paddle-alerts.yml]
alerting:
  alertmanagers:
    - static_configs: [{targets: [%q]}]
scrape_configs:
  - job_name: paddle-monitor
    static_configs: [{targets: [%q]}]
`, amAddr, strings.TrimPrefix(mon.URL, "http://")))
	promAddr := freePort(t)
	start(t, "prometheus", env, promBin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "tsdb"), "--web.listen-address="+promAddr)
	waitHTTP(t, "prometheus", "http://"+promAddr+"/-/ready")

	// The supervised task: one fake GPU at 0 %, sampled every 100 ms, a
	// heartbeat every second.
	root := filepath.Join(dir, "root")
	if err := os.MkdirAll(filepath.Join(root, "dev"), 0o755); err != nil {
		t.Fatal(err)
	}
	task := start(t, "paddle-entrypoint", append(env,
		"PADDLE_ENTRYPOINT_MODE=supervise", "PADDLE_MONITOR_URL="+mon.URL,
		"PADDLE_TASK_ID=idle-e2e", "PADDLE_TASK_NAME=finetune", "PADDLE_PROJECT=vision", "PADDLE_OWNER=cho",
		"PADDLE_HEARTBEAT=1s", "PADDLE_GPU_SAMPLE=100ms",
		"PADDLE_LABELS_FILE="+filepath.Join(dir, "paddle-task.labels"), "PADDLE_SPOOL_PATH="+filepath.Join(dir, "spool.db"),
		"PADDLE_ENTRYPOINT_TEST_GPU_ROOT="+root, "LD_LIBRARY_PATH="+nvmlDir, "FAKE_NVML_GPUS=1", "FAKE_NVML_UTIL=0",
	), entrypointBin, "sleep", "600")
	const uuid = "GPU-a1b2c300-8f2d-4c1b-9a3e-1c2d3e4f5a00"
	taskState := func() map[string]any {
		resp, err := httpClient.Get(mon.URL + "/v1/tasks/idle-e2e")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		if resp.StatusCode == 200 {
			json.NewDecoder(resp.Body).Decode(&m)
		}
		return m
	}
	deadline := time.Now().Add(60 * time.Second)
	for taskState() == nil {
		if time.Now().After(deadline) {
			t.Fatalf("the task never registered:\n%s", task.out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Backdate idle_since: a busy heartbeat ends whatever run the
	// entrypoint's first heartbeats began, then an idle one that covers
	// the last hour. Both are newer than any the entrypoint sent so far.
	now := time.Now().Unix()
	for i, hb := range []string{
		fmt.Sprintf(`{"task_id":"idle-e2e","time":%d,"interval_seconds":1,"gpus":[{"uuid":%q,"samples":10,"util_mean":90}]}`, now+1, uuid),
		fmt.Sprintf(`{"task_id":"idle-e2e","time":%d,"interval_seconds":3600,"gpus":[{"uuid":%q,"samples":10,"util_mean":0}]}`, now+2, uuid),
	} {
		resp, err := httpClient.Post(mon.URL+"/v1/task/heartbeat", "application/json", strings.NewReader(hb))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("heartbeat %d: %v %v", i, resp, err)
		}
		resp.Body.Close()
	}
	// The entrypoint's own idle heartbeats carry the run on: last_seen
	// moves past the backdated heartbeat, and the GPU's latest interval is
	// the entrypoint's (about ten samples a second, not the test's 10).
	deadline = time.Now().Add(60 * time.Second)
	for {
		m := taskState()
		last, _ := m["last_seen"].(float64)
		since, _ := m["idle_since"].(float64)
		if last > float64(now+2) && since == float64(now+2-3600) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the entrypoint's heartbeats did not continue the idle run: %v\n%s", m, task.out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}

	// The alert arrives at the webhook, routed to the owner.
	wait := 90 * time.Second
	if os.Getenv("PADDLE_TEST_ALERTS_SHIPPED_FOR") == "1" {
		wait = 8 * time.Minute
	}
	deadline = time.Now().Add(wait)
	for {
		mu.Lock()
		for _, n := range got {
			for _, a := range n.Alerts {
				if a.Labels["alertname"] != "PaddleTaskGPUIdle" || a.Status != "firing" {
					continue
				}
				want := map[string]string{"alertname": "PaddleTaskGPUIdle", "severity": "warning", "task_id": "idle-e2e",
					"task_name": "finetune", "project": "vision", "owner": "cho", "hostname": a.Labels["hostname"]}
				for k, v := range want {
					if a.Labels[k] != v {
						t.Errorf("label %s = %q, want %q (labels %v)", k, a.Labels[k], v, a.Labels)
					}
				}
				if n.Receiver != "owner-chat" || n.GroupLabels["owner"] != "cho" {
					t.Errorf("delivered by receiver %q with group labels %v, want owner-chat and owner cho", n.Receiver, n.GroupLabels)
				}
				if !strings.Contains(a.Annotations["summary"], "Task finetune of cho (vision) has not used its GPUs for 1h") {
					t.Errorf("summary %q", a.Annotations["summary"])
				}
				mu.Unlock()
				return
			}
		}
		mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("PaddleTaskGPUIdle never reached the webhook within %s (notifications: %+v)", wait, got)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
