package nodeagent

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/paddle-entrypoint/paddle-entrypoint/node/nodereport"
)

// metrics are the agent's own series (docs/node.md, "Its own metrics").
type metrics struct {
	reg                                  *prometheus.Registry
	samples, failed, sent, spooled, dead prometheus.Counter
	dropped                              prometheus.Counter
	pending, deadNow, oldest             prometheus.Gauge
	sourceFailures                       *prometheus.CounterVec
	criUnverified, conflicts             prometheus.Counter
	node                                 string

	mu    sync.Mutex
	users []userInfo
}

type userInfo struct{ labels []string }

var userInfoLabels = []string{"node", "UUID", "GPU_I_ID", "runtime", "container_id", "namespace", "pod", "container", "slurm_job", "task_id", "project", "declared"}

var userInfoDesc = prometheus.NewDesc("paddle_node_gpu_user_info",
	"A user of a GPU instance in the agent's last sample: 1. declared says whether its container declared a task.",
	userInfoLabels, nil)

func newMetrics(node string) *metrics {
	m := &metrics{reg: prometheus.NewRegistry(), node: node}
	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
		m.reg.MustRegister(c)
		return c
	}
	m.samples = counter("paddle_node_samples_total", "Samples taken.")
	m.failed = counter("paddle_node_samples_failed_total", "Samples lost: the GPU probe failed, missed them or was restarting.")
	m.sent = counter("paddle_node_reports_sent_total", "Reports the monitor took (2xx or 409).")
	m.spooled = counter("paddle_node_reports_spooled_total", "Reports written to the report spool.")
	m.dead = counter("paddle_node_reports_dead_total", "Reports the monitor refused for good (400, 413), moved to the dead bucket.")
	m.dropped = prometheus.NewCounter(prometheus.CounterOpts{Name: "paddle_node_reports_dropped_total", Help: "Spooled reports dropped as older than --max-report-age."})
	m.pending = prometheus.NewGauge(prometheus.GaugeOpts{Name: "paddle_node_reports_pending", Help: "Reports in the spool waiting to be sent."})
	m.deadNow = prometheus.NewGauge(prometheus.GaugeOpts{Name: "paddle_node_reports_dead", Help: "Reports in the spool's dead bucket."})
	m.oldest = prometheus.NewGauge(prometheus.GaugeOpts{Name: "paddle_node_oldest_pending_report_age_seconds", Help: "Age of the oldest report waiting in the spool (0: none)."})
	m.sourceFailures = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "paddle_node_allocation_source_failures_total", Help: "Failed calls to an allocation source: pod-resources (the kubelet), cri (the runtime), docker (a Docker-compatible API), resourceslices and resourceclaims (the API server's list or watch for DRA claims; the last answer stands)."}, []string{"source"})
	m.conflicts = counter("paddle_node_report_conflicts_total", "Reports the monitor stored with GPU UUID conflicts (answered 409: another node holds a UUID); deleted as delivered.")
	m.criUnverified = counter("paddle_node_cri_unverified_samples_total", "Samples whose kubepods paths were trusted without CRI's answer (CRI failing; at most 3 in a row, then no kubepods path stands).")
	m.reg.MustRegister(m.dropped, m.pending, m.deadNow, m.oldest, m.sourceFailures, m)
	return m
}

// probeRestarts counts the probe child's restarts.
func (m *metrics) probeRestarts(f func() float64) {
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "paddle_node_probe_restarts_total", Help: "Times the GPU probe child was started again."}, f))
}

// Describe and Collect make the user map a collector of its own.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) { ch <- userInfoDesc }

func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, u := range m.users {
		ch <- prometheus.MustNewConstMetric(userInfoDesc, prometheus.GaugeValue, 1, u.labels...)
	}
}

// setUsers keeps the users of the last sample for paddle_node_gpu_user_info.
func (m *metrics) setUsers(o nodereport.Observation) {
	var users []userInfo
	seen := map[string]bool{}
	for _, in := range o.Instances {
		gi := ""
		if in.Key.GI >= 0 {
			gi = strconv.Itoa(in.Key.GI)
		}
		for _, u := range in.Users {
			taskID, project, declared := "", "", "false"
			if u.Declared != nil {
				taskID, project, declared = u.Declared.TaskID, u.Declared.Project, "true"
			}
			l := []string{m.node, in.Key.GPU, gi, u.User.Runtime, u.User.ContainerID, u.User.Namespace, u.User.Pod, u.User.Container, u.User.SlurmJob, taskID, project, declared}
			k := fmt.Sprint(l)
			if seen[k] {
				continue
			}
			seen[k] = true
			users = append(users, userInfo{labels: l})
		}
	}
	m.mu.Lock()
	m.users = users
	m.mu.Unlock()
}

// serve starts /metrics and /healthz on --listen.
func (a *agent) serve() (*http.Server, error) {
	ln, err := net.Listen("tcp", a.cfg.Listen)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(a.metrics.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		ok := !a.lastSuccess.IsZero() && time.Since(a.lastSuccess) <= 3*a.cfg.Sample
		why := a.lastErr
		conflicts := append([]string(nil), a.conflicts...)
		a.mu.Unlock()
		if ok {
			// A UUID conflict is no liveness failure (a restart would end
			// the node's capacity by its preStop): 200, named in the body.
			fmt.Fprintln(w, "ok")
			for _, c := range conflicts {
				fmt.Fprintf(w, "gpu uuid conflict: %s (the monitor stores this node's reports; paddle-monitor node retire resolves it)\n", c)
			}
			return
		}
		if why == "" {
			why = "no sample yet"
		}
		http.Error(w, why, http.StatusServiceUnavailable)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.log.Error("--listen", "error", err)
		}
	}()
	return srv, nil
}
