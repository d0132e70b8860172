package main

// PaddleGPUUndeclared end to end, with real servers on 127.0.0.1: a
// process of a Kubernetes container that no task declares, placed in a
// real kubepods cgroup and listed by the fake NVML on a GPU, is seen by
// the built paddle-node (its pod, namespace and container from a test CRI
// server), reported to the built paddle-monitor, scraped by a real
// Prometheus evaluating deploy/prometheus/paddle-alerts.yml, routed by a
// real Alertmanager with deploy/alertmanager/alertmanager.yml, and reaches
// a webhook with its node, namespace, pod and container. A registered
// pod's process on another GPU of the node (attributed) raises nothing.
//
// Shortened so that the test takes seconds, not a quarter of an hour: the
// rule's `for: 15m` becomes `for: 5s` (PADDLE_TEST_ALERTS_SHIPPED_FOR=1
// keeps it: the test then takes over fifteen minutes; promtool's unit
// tests in deploy/prometheus prove the fifteen minutes), the route's
// group_wait 30s becomes 1s, and the platform's receiver, an e-mail
// address, becomes the test's webhook (the route that picks it is the
// shipped one).

import (
	"encoding/json"
	"fmt"
	"io"
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

	"google.golang.org/grpc"
	cri "k8s.io/cri-api/pkg/apis/runtime/v1"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/monitorproc"
	"github.com/paddle-entrypoint/paddle-entrypoint/test/harness"
)

// startServer starts a server program in a process group of its own,
// ended at the end of the test; its output is logged when the test
// fails.
func startServer(t *testing.T, name, bin string, args ...string) {
	t.Helper()
	out := &lockedBuffer{}
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + t.TempDir()}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		if t.Failed() {
			t.Logf("%s's output:\n%s", name, out.String())
		}
	})
}

// alertNotification is the part of Alertmanager's webhook body the test
// reads.
type alertNotification struct {
	Receiver string `json:"receiver"`
	Alerts   []struct {
		Status      string            `json:"status"`
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"alerts"`
}

func TestUndeclaredAlertEndToEnd(t *testing.T) {
	needCgroups(t)
	promBin := harness.Tool(t, "prometheus")
	amBin := harness.Tool(t, "prometheus-alertmanager")
	monitor, err := monitorBin()
	if err != nil {
		t.Fatal(err)
	}
	const (
		node    = "gpu-node-7"
		uidReg  = "0a0a0a0a-1b1b-4c2c-8d3d-4e4e4e4e4e4e"
		idReg   = "e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1"
		uidNb   = "5f5f5f5f-6a6a-4b7b-9c8c-9d9d9d9d9d9d"
		idNb    = "f2f2f2f2f2f2f2f2f2f2f2f2f2f2f2f2f2f2f2f2f2f2f2f2f2f2f2f2f2f2f2f2"
		gpuZero = "GPU-a1b2c300-8f2d-4c1b-9a3e-1c2d3e4f5a00"
	)
	dir, err := os.MkdirTemp("", "pn-alert-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })

	// The webhook: the platform team's receiver.
	var mu sync.Mutex
	var got []alertNotification
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var n alertNotification
		if err := json.Unmarshal(b, &n); err != nil {
			t.Errorf("the webhook got %s: %v", b, err)
		}
		mu.Lock()
		got = append(got, n)
		mu.Unlock()
	}))
	defer hook.Close()

	// The monitor, with a node token for the agent and a team token for
	// the registered task; team-b's undeclared use is charged to
	// notebooks.
	tokens := filepath.Join(dir, "tokens.json")
	nodeTok := mint(t, monitor, tokens, "gpu-node-7", "--node", "gpu-node-7")
	teamTok := mint(t, monitor, tokens, "team-a", "--project", "search_*")
	nsFile := filepath.Join(dir, "namespaces.json")
	if err := os.WriteFile(nsFile, []byte(`{"team-b": "notebooks"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	mon, err := monitorproc.Start(monitor, []string{"--listen", "127.0.0.1:0", "--db", filepath.Join(dir, "m.db"), "--tokens", tokens,
		"--namespace-projects", nsFile}, monitorproc.Options{Env: []string{"PATH=/usr/bin:/bin"}, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mon.Kill)
	// The registered task of pod uidReg, before the agent's first report.
	reg := fmt.Sprintf(`{"schema_version":1,"task_id":"train-e2e","task_name":"train","project":"search_rank","owner":"ann@example.com",
		"start_time":%d,"hostname":"train-0","k8s_pod_uid":%q,"k8s_node":%q,"labels":{},"gpu_count":1,
		"gpus":[{"index":1,"uuid":"GPU-a1b2c301-8f2d-4c1b-9a3e-1c2d3e4f5a01","name":"NVIDIA H200","memory_total_bytes":1,"share":1}]}`,
		time.Now().Unix()-60, uidReg, node)
	req, _ := http.NewRequest("POST", mon.URL+"/v1/task/register", strings.NewReader(reg))
	req.Header.Set("Authorization", "Bearer "+teamTok)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "train-e2e")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 201 {
		t.Fatalf("registering the task: %v %v", resp, err)
	}

	// Alertmanager with the shipped routes.
	amCfg, err := os.ReadFile("deploy/alertmanager/alertmanager.yml")
	if err != nil {
		t.Fatal(err)
	}
	const platform = `  - name: gpu-platform
    email_configs:
      - to: gpu-platform@example.com
        send_resolved: true`
	am := strings.Replace(string(amCfg), platform, `  - name: gpu-platform
    webhook_configs:
      - url: `+hook.URL+`/platform
        send_resolved: true`, 1)
	am = strings.Replace(am, "group_wait: 30s", "group_wait: 1s", 1)
	if !strings.Contains(am, hook.URL) || !strings.Contains(am, "group_wait: 1s") {
		t.Fatal("the Alertmanager file is not what this test expects")
	}
	if err := os.WriteFile(filepath.Join(dir, "alertmanager.yml"), []byte(am), 0o644); err != nil {
		t.Fatal(err)
	}
	amAddr := freeAddr(t)
	startServer(t, "alertmanager", amBin, "--config.file="+filepath.Join(dir, "alertmanager.yml"),
		"--storage.path="+filepath.Join(dir, "am"), "--web.listen-address="+amAddr, "--cluster.listen-address=")
	waitFor(t, 60*time.Second, "alertmanager ready", func() bool { _, err := httpGet("http://" + amAddr + "/-/ready"); return err == nil })

	// The node: a notebook container's process on GPU 0 that declares
	// nothing, the registered pod's on GPU 1, both in real kubepods
	// cgroups; the runtime's CRI names their pods.
	nb := startIn(t, "")
	inCgroup(t, nb, "kubepods/besteffort/pod"+uidNb+"/"+idNb)
	tr := startIn(t, "")
	inCgroup(t, tr, "kubepods/burstable/pod"+uidReg+"/"+idReg)
	prSock, criSock := filepath.Join(dir, "kubelet.sock"), filepath.Join(dir, "containerd.sock")
	serveGRPC(t, prSock, func(s *grpc.Server) {
		podresourcesapi.RegisterPodResourcesListerServer(s, &kubeletServer{})
	})
	serveGRPC(t, criSock, func(s *grpc.Server) {
		cri.RegisterRuntimeServiceServer(s, &runtimeServer{containers: []*cri.Container{
			criContainer(idNb, uidNb, "team-b", "notebook-0", "jupyter", cri.ContainerState_CONTAINER_RUNNING),
			criContainer(idReg, uidReg, "team-a", "train-0", "paddle", cri.ContainerState_CONTAINER_RUNNING),
		}})
	})
	state := filepath.Join(dir, "state")
	writeState(t, state, fmt.Sprintf("proc 0 compute %d 1000 40", nb), fmt.Sprintf("proc 1 compute %d 1000 90", tr), "util 0 40", "util 1 90")
	tokFile, agentAddr := filepath.Join(dir, "token"), freeAddr(t)
	if err := os.WriteFile(tokFile, []byte(nodeTok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	agent := startNode(t, nodeEnv(state, "FAKE_NVML_GPUS=2", "FAKE_NVML_NAME=NVIDIA H200", "PADDLE_MONITOR_URL="+mon.URL,
		"PADDLE_NODE_TOKEN_FILE="+tokFile, "PADDLE_NODE_NAME="+node, "PADDLE_NODE_REPORT_SPOOL="+filepath.Join(dir, "reports.db"),
		"PADDLE_NODE_INTERVAL=5s", "PADDLE_NODE_SAMPLE=1s", "PADDLE_NODE_POD_RESOURCES_SOCKET="+prSock, "PADDLE_NODE_CRI_SOCKET="+criSock,
		"PADDLE_NODE_LISTEN="+agentAddr))
	// Its first report stored before Prometheus starts, so that the
	// alert's `for` counts from the first scrapes.
	waitFor(t, 60*time.Second, "the agent's first report", func() bool {
		return metricValue(metricsTextSafe(agentAddr), "paddle_node_reports_sent_total") >= 1
	})

	// Prometheus with the shipped alerts, scraping the monitor every
	// second as the job the rules read.
	rules, err := os.ReadFile("deploy/prometheus/paddle-alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	alerts := string(rules)
	if os.Getenv("PADDLE_TEST_ALERTS_SHIPPED_FOR") != "1" {
		alerts = strings.ReplaceAll(alerts, "for: 15m", "for: 5s")
	}
	if err := os.WriteFile(filepath.Join(dir, "paddle-alerts.yml"), []byte(alerts), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [paddle-alerts.yml]
alerting:
  alertmanagers:
    - static_configs: [{targets: [%q]}]
scrape_configs:
  - job_name: paddle-monitor
    static_configs: [{targets: [%q]}]
`, amAddr, strings.TrimPrefix(mon.URL, "http://"))), 0o644); err != nil {
		t.Fatal(err)
	}
	promAddr := freeAddr(t)
	startServer(t, "prometheus", promBin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "tsdb"), "--web.listen-address="+promAddr)
	waitFor(t, 60*time.Second, "prometheus ready", func() bool { _, err := httpGet("http://" + promAddr + "/-/ready"); return err == nil })

	// The alert reaches the webhook by the platform's route, for the
	// notebook's container only.
	wait := 2 * time.Minute
	if os.Getenv("PADDLE_TEST_ALERTS_SHIPPED_FOR") == "1" {
		wait = 18 * time.Minute
	}
	deadline := time.Now().Add(wait)
	for {
		mu.Lock()
		var firing []map[string]string
		var receivers []string
		for _, n := range got {
			for _, a := range n.Alerts {
				if a.Labels["alertname"] == "PaddleGPUUndeclared" && a.Status == "firing" {
					firing = append(firing, a.Labels)
					receivers = append(receivers, n.Receiver)
				}
			}
		}
		mu.Unlock()
		if len(firing) > 0 {
			want := map[string]string{"alertname": "PaddleGPUUndeclared", "severity": "warning", "node": node, "namespace": "team-b",
				"pod": "notebook-0", "container": "jupyter"}
			for i, l := range firing {
				if len(l) != len(want) {
					t.Errorf("alert labels %v, want %v", l, want)
				}
				for k, v := range want {
					if l[k] != v {
						t.Errorf("label %s = %q, want %q (labels %v)", k, l[k], v, l)
					}
				}
				if receivers[i] != "gpu-platform" {
					t.Errorf("delivered by receiver %q, want gpu-platform", receivers[i])
				}
			}
			// What the monitor serves for the two users.
			m, err := httpGet(mon.URL + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{
				`paddle_gpu_user_info{GPU_I_ID="",UUID="` + gpuZero + `",container="jupyter",container_id="` + idNb + `",namespace="team-b",node="gpu-node-7",pod="notebook-0",project="notebooks",runtime="cri",slurm_job="",state="undeclared",task_id=""} 1`,
				`container="paddle",container_id="` + idReg + `",namespace="team-a",node="gpu-node-7",pod="train-0",project="search_rank",`,
				`state="attributed",task_id="train-e2e"} 1`,
			} {
				if !strings.Contains(m, want) && !strings.Contains(m, strings.Replace(want, `runtime="cri"`, `runtime="containerd"`, 1)) {
					t.Errorf("/metrics lacks %s\n%s", want, m)
				}
			}
			return
		}
		if time.Now().After(deadline) {
			m, _ := httpGet(mon.URL + "/metrics")
			t.Fatalf("PaddleGPUUndeclared never reached the webhook within %s (notifications %+v)\nagent:\n%s\nmonitor /metrics:\n%s",
				wait, got, agent.stderr.String(), m)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
