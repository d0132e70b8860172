//go:build e2e

package e2e

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// reportScript is the command the tests run through the entrypoint: a bash
// script that prints what the exec'd command sees, one fact a line, then
// exits with its first argument. Labels file lines come as label:key=value.
const reportScript = `echo "pid=$$"
echo "ppid=$PPID"
echo "uid=$(id -u)"
echo "pid1=$(tr '\0' ' ' </proc/1/cmdline)"
echo "task_id_env=$PADDLE_TASK_ID"
echo "run_mode=$(stat -L -c %a /var/run)"
if [ -e /var/run/paddle-task.labels ]; then
	echo "labels_mode=$(stat -L -c %a /var/run/paddle-task.labels)"
	sed 's/^/label:/' /var/run/paddle-task.labels
else
	echo "labels=absent"
fi
exit "$1"`

// report is what reportScript printed.
type report struct {
	facts  map[string]string
	labels map[string]string
	keys   []string // label keys in file order
}

func parseReport(out string) report {
	r := report{facts: map[string]string{}, labels: map[string]string{}}
	for _, line := range strings.Split(out, "\n") {
		if l, ok := strings.CutPrefix(line, "label:"); ok {
			k, v, _ := strings.Cut(l, "=")
			r.labels[k] = v
			r.keys = append(r.keys, k)
			continue
		}
		if k, v, ok := strings.Cut(line, "="); ok {
			r.facts[k] = v
		}
	}
	return r
}

// logLine is one of the entrypoint's JSON log lines.
type logLine map[string]any

// entrypointLogs returns the JSON log lines of the entrypoint in stderr
// (PADDLE_ENTRYPOINT_LOG_FORMAT=json), leaving the command's own output.
func entrypointLogs(stderr string) []logLine {
	var out []logLine
	sc := bufio.NewScanner(strings.NewReader(stderr))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l logLine
		if json.Unmarshal(sc.Bytes(), &l) == nil && l["logger"] == "paddle-entrypoint" {
			out = append(out, l)
		}
	}
	return out
}

// atLeastWarn returns the lines logged at WARN or ERROR.
func atLeastWarn(lines []logLine) []logLine {
	var out []logLine
	for _, l := range lines {
		if l["level"] == "WARN" || l["level"] == "ERROR" {
			out = append(out, l)
		}
	}
	return out
}

// request is one request the monitor received.
type request struct {
	Method, Path string
	Header       http.Header
	Body         []byte
	At           time.Time
}

// monitor is a stand-in monitor API on 127.0.0.1, which containers reach
// through --network host.
type monitor struct {
	srv     *httptest.Server
	mu      sync.Mutex
	reqs    []request
	arrived chan struct{}
}

// newMonitor starts a monitor that answers status; status 0 holds every
// request until its client goes away.
func newMonitor(t *testing.T, status int) *monitor {
	t.Helper()
	m := &monitor{arrived: make(chan struct{}, 64)}
	m.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		m.mu.Lock()
		m.reqs = append(m.reqs, request{r.Method, r.URL.Path, r.Header.Clone(), body, time.Now()})
		m.mu.Unlock()
		select {
		case m.arrived <- struct{}{}:
		default:
		}
		if status == 0 {
			select {
			case <-r.Context().Done():
			case <-time.After(time.Minute):
			}
			return
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(func() {
		m.srv.CloseClientConnections()
		m.srv.Close()
	})
	return m
}

// URL is the monitor's base URL.
func (m *monitor) URL() string { return m.srv.URL }

// requests returns what was received so far.
func (m *monitor) requests() []request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]request(nil), m.reqs...)
}

// waitRequest waits for the first request.
func (m *monitor) waitRequest(t *testing.T, timeout time.Duration) {
	t.Helper()
	select {
	case <-m.arrived:
	case <-time.After(timeout):
		t.Fatalf("the monitor received nothing within %v", timeout)
	}
}

// deadURL returns a monitor URL on 127.0.0.1 where nothing listens.
// taskNames returns the task_name of every registration received.
func (m *monitor) taskNames() map[string]bool {
	got := map[string]bool{}
	for _, req := range m.requests() {
		var body struct {
			TaskName string `json:"task_name"`
		}
		json.Unmarshal(req.Body, &body)
		got[body.TaskName] = true
	}
	return got
}

func deadURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

// Fake GPUs (testdata/fakenvml): device i has this UUID.
var fakeUUIDs = []string{
	"GPU-a1b2c300-8f2d-4c1b-9a3e-1c2d3e4f5a00",
	"GPU-a1b2c301-8f2d-4c1b-9a3e-1c2d3e4f5a01",
}

// checkRegistration asserts that the monitor received exactly one
// registration, for the task the labels file names, with gpus GPUs.
func checkRegistration(t *testing.T, m *monitor, labels map[string]string, gpus int) {
	t.Helper()
	reqs := m.requests()
	if len(reqs) != 1 {
		t.Fatalf("monitor received %d requests, want 1 registration", len(reqs))
	}
	r := reqs[0]
	if r.Method != http.MethodPost || r.Path != "/v1/task/register" {
		t.Errorf("monitor received %s %s, want POST /v1/task/register", r.Method, r.Path)
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	if k := r.Header.Get("Idempotency-Key"); k == "" || k != labels["task_id"] {
		t.Errorf("Idempotency-Key = %q, want the labels file's task_id %q", k, labels["task_id"])
	}
	if ua := r.Header.Get("User-Agent"); ua != "paddle-entrypoint/"+setup.version {
		t.Errorf("User-Agent = %q, want paddle-entrypoint/%s", ua, setup.version)
	}
	var body struct {
		SchemaVersion int    `json:"schema_version"`
		TaskName      string `json:"task_name"`
		Project       string `json:"project"`
		Owner         string `json:"owner"`
		GPUCount      *int   `json:"gpu_count"`
		TaskID        string `json:"task_id"`
		Hostname      string `json:"hostname"`
		StartTime     int64  `json:"start_time"`
		DriverVersion string `json:"driver_version"`
		GPUs          []struct {
			Index            int    `json:"index"`
			UUID             string `json:"uuid"`
			Name             string `json:"name"`
			MemoryTotalBytes uint64 `json:"memory_total_bytes"`
		} `json:"gpus"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatalf("registration body is not JSON: %v\n%s", err, r.Body)
	}
	if body.SchemaVersion != 1 || body.TaskName != labels["task_name"] || body.Project != labels["project"] ||
		body.Owner != labels["owner"] || body.TaskID != labels["task_id"] || body.Hostname == "" || body.StartTime == 0 {
		t.Errorf("registration body does not match the labels file %v:\n%s", labels, r.Body)
	}
	if body.GPUCount == nil || *body.GPUCount != gpus || len(body.GPUs) != gpus {
		t.Errorf("registration body has gpu_count %v and %d gpus, want %d:\n%s", body.GPUCount, len(body.GPUs), gpus, r.Body)
	}
	for i, g := range body.GPUs {
		if i < len(fakeUUIDs) && (g.UUID != fakeUUIDs[i] || g.Index != i || g.Name == "" || g.MemoryTotalBytes == 0) {
			t.Errorf("gpus[%d] = %+v, want index %d, uuid %s, a name and a memory size", i, g, i, fakeUUIDs[i])
		}
	}
	if gpus > 0 && body.DriverVersion == "" {
		t.Errorf("registration body has no driver_version:\n%s", r.Body)
	}
}
