package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// TestSuperviseBodiesMatchOpenAPI checks every request supervise mode
// sends — registration, heartbeat, completion with a signal, GPU summaries,
// a gate and metrics — against docs/openapi.yaml.
func TestSuperviseBodiesMatchOpenAPI(t *testing.T) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile("docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	doc.Servers = openapi3.Servers{{URL: "/"}}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	m := newSupMonitor(t)
	// Killed by SIGTERM: signal in the completion, no gate (not gated).
	run := func(script string, want int, env ...string) {
		t.Helper()
		k := gpuTask(t, 2, "/bin/sh", "-c", script)
		for _, e := range env {
			key, value, _ := strings.Cut(e, "=")
			k.Setenv(key, value)
		}
		metrics := filepath.Join(k.Dir, "metrics.json")
		os.WriteFile(metrics, []byte(`{"accuracy":0.99}`), 0o644)
		k.Setenv("PADDLE_ENTRYPOINT_MODE", "supervise")
		k.Setenv("PADDLE_MONITOR_URL", m.URL)
		k.Setenv("PADDLE_GPU_SAMPLE", "100ms")
		k.Setenv("PADDLE_HEARTBEAT", "200ms")
		k.Setenv("FAKE_NVML_UTIL", "0,35,90")
		k.Setenv("PADDLE_GATE", "accuracy>=0.95")
		k.Setenv("PADDLE_GATE_FILE", metrics)
		if r := k.Run(); r.Code != want {
			t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
		}
	}
	// GPU 0 in MIG mode: MIG entries, shares and energy (estimated) beside
	// a whole GPU.
	run("sleep 0.6; kill -TERM $$", 143, "FAKE_NVML_MIG_0="+h200MIG)
	// Exit 0: the gate's verdict and metrics in the completion.
	run("sleep 0.3", 0, "PADDLE_GPU_SHARE=0.5")
	seen := map[string]int{}
	for i, rq := range m.requests("") {
		path := m.pathsNow()[i]
		seen[path]++
		req, _ := http.NewRequest(http.MethodPost, path, bytes.NewReader(rq.Body))
		req.Header = rq.Header
		route, params, err := router.FindRoute(req)
		if err != nil {
			t.Fatalf("POST %s is not in docs/openapi.yaml: %v", path, err)
		}
		in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
		if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
			t.Errorf("POST %s does not match docs/openapi.yaml: %v\nbody: %s", path, err, rq.Body)
		}
	}
	if seen["/v1/task/register"] != 2 || seen["/v1/task/complete"] != 2 || seen["/v1/task/heartbeat"] < 2 {
		t.Errorf("requests %v, want a registration, heartbeats and a completion", seen)
	}
}
