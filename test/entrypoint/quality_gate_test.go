package entrypoint

// Black-box tests of the quality gate and the textfile's life in supervise
// mode (docs/pipelines.md).

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// pipeMonitor answers every request 201 and keeps each body by path.
type pipeMonitor struct {
	*httptest.Server
	mu     sync.Mutex
	bodies map[string][][]byte
}

func newPipeMonitor(t *testing.T) *pipeMonitor {
	m := &pipeMonitor{bodies: map[string][][]byte{}}
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		m.mu.Lock()
		m.bodies[r.URL.Path] = append(m.bodies[r.URL.Path], b)
		m.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, "{}")
	}))
	t.Cleanup(m.Close)
	return m
}

// completion returns the one completion received.
func (m *pipeMonitor) completion(t *testing.T) map[string]any {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	bs := m.bodies["/v1/task/complete"]
	if len(bs) != 1 {
		t.Fatalf("%d completions, want 1", len(bs))
	}
	var c map[string]any
	if err := json.Unmarshal(bs[0], &c); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestPipelineGateSupervised(t *testing.T) {
	tests := []struct {
		name     string
		script   string // the command, run by sh -c
		env      []string
		want     int
		gate     string // the completion's gate as JSON; "" for none
		metrics  string // the completion's metrics as JSON; "" for none
		exitCode float64
		log      string
	}{
		{"passes", `echo '{"accuracy": 0.962, "eval": {"loss": 0.21}, "name": "v3"}' > "$F"`, nil, 0,
			`{"expr":"accuracy>=0.95,eval.loss<0.3","passed":true,"reason":"accuracy=0.962 >= 0.95, eval.loss=0.21 < 0.3"}`,
			`{"accuracy":0.962,"eval.loss":0.21}`, 0, "quality gate passed"},
		{"fails", `echo '{"accuracy": 0.93, "eval": {"loss": 0.21}}' > "$F"`, nil, 1,
			`{"expr":"accuracy>=0.95,eval.loss<0.3","passed":false,"reason":"accuracy=0.93 is not >= 0.95"}`,
			`{"accuracy":0.93,"eval.loss":0.21}`, 0, "quality gate failed"},
		{"fails with PADDLE_GATE_EXIT", `echo '{"accuracy": 0.5, "eval": {"loss": 0.1}}' > "$F"`, []string{"PADDLE_GATE_EXIT=42"}, 42,
			`{"expr":"accuracy>=0.95,eval.loss<0.3","passed":false,"reason":"accuracy=0.5 is not >= 0.95"}`,
			`{"accuracy":0.5,"eval.loss":0.1}`, 0, "quality gate failed"},
		{"file missing", `true`, nil, 1, "", "", 0, "quality gate failed"},
		{"command failed: not gated", `echo '{"accuracy": 0.99, "eval": {"loss": 0}}' > "$F"; exit 3`, nil, 3, "", "", 3, "not evaluated"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newPipeMonitor(t)
			k := newTask(t, "/bin/sh", "-c", tt.script)
			file := filepath.Join(k.Dir, "metrics.json")
			pipeSetenv(k, "PADDLE_ENTRYPOINT_MODE=supervise", "PADDLE_MONITOR_URL="+m.URL, "PADDLE_GPU_SAMPLE=0",
				"PADDLE_GATE=accuracy>=0.95,eval.loss<0.3", "PADDLE_GATE_FILE="+file, "F="+file)
			pipeSetenv(k, tt.env...)
			r := k.Run()
			if r.Code != tt.want {
				t.Fatalf("exit %d, want %d:\n%s", r.Code, tt.want, r.Stderr)
			}
			if !strings.Contains(r.Stderr, tt.log) {
				t.Errorf("no %q in the log:\n%s", tt.log, r.Stderr)
			}
			c := m.completion(t)
			if c["exit_code"] != tt.exitCode {
				t.Errorf("completion exit_code %v, want the command's %v", c["exit_code"], tt.exitCode)
			}
			if tt.name == "file missing" {
				g, _ := c["gate"].(map[string]any)
				if g == nil || g["passed"] != false || !strings.Contains(g["reason"].(string), "no such file") {
					t.Errorf("gate %v, want failed: no such file", c["gate"])
				}
				if _, ok := c["metrics"]; ok {
					t.Errorf("metrics %v without a file", c["metrics"])
				}
				return
			}
			for key, want := range map[string]string{"gate": tt.gate, "metrics": tt.metrics} {
				v, ok := c[key]
				if want == "" {
					if ok {
						t.Errorf("%s = %v, want absent", key, v)
					}
					continue
				}
				var buf bytes.Buffer
				enc := json.NewEncoder(&buf)
				enc.SetEscapeHTML(false)
				enc.Encode(v)
				if got := strings.TrimSuffix(buf.String(), "\n"); got != want {
					t.Errorf("%s = %s, want %s", key, got, want)
				}
			}
		})
	}
}

// The textfile lives as long as the command in supervise mode, CPU task
// included; the command's OTEL_RESOURCE_ATTRIBUTES is set as in exec mode.
func TestPipelineTextfileSupervised(t *testing.T) {
	dir := t.TempDir()
	for _, gpus := range []int{0, 2} {
		k := gpuTask(t, gpus, "/bin/sh", "-c", `test -f "$D/paddle-task-$PADDLE_TASK_ID.prom" || exit 8
case "$OTEL_RESOURCE_ATTRIBUTES" in "paddle.task.id=$PADDLE_TASK_ID,"*) ;; *) exit 9 ;; esac`)
		pipeSetenv(k, "PADDLE_ENTRYPOINT_MODE=supervise", "PADDLE_GPU_SAMPLE=0", "PADDLE_TEXTFILE_DIR="+dir, "D="+dir)
		r := k.Run()
		if r.Code != 0 {
			t.Fatalf("%d GPUs: the command did not see its textfile (exit 8) or its OTel attributes (exit 9): exit %d:\n%s", gpus, r.Code, r.Stderr)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("%d GPUs: %d files left after the command ended", gpus, len(entries))
		}
	}
}
