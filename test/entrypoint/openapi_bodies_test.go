package entrypoint

import (
	"bytes"
	"context"
	"encoding/json"
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

// TestSuperviseHeartbeatMatchesOpenAPI checks heartbeats that carry GPU
// samples against docs/openapi.yaml, and that every field they send is
// documented there (the schema allows more, for later versions).
func TestSuperviseHeartbeatMatchesOpenAPI(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromFile("docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	doc.Servers = openapi3.Servers{{URL: "/"}}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	m := newSupMonitor(t)
	k := gpuTask(t, 2, "/bin/sh", "-c", "sleep 1")
	k.Setenv("PADDLE_ENTRYPOINT_MODE", "supervise")
	k.Setenv("PADDLE_MONITOR_URL", m.URL)
	k.Setenv("PADDLE_GPU_SAMPLE", "50ms")
	k.Setenv("PADDLE_HEARTBEAT", "200ms")
	k.Setenv("FAKE_NVML_UTIL", "0,35,90")
	k.Setenv("FAKE_NVML_MIG_0", h200MIG) // entries with mig_uuid too
	if r := k.Run(); r.Code != 0 {
		t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
	}
	schema := doc.Components.Schemas["Heartbeat"].Value
	hbs := m.requests("/v1/task/heartbeat")
	if len(hbs) < 2 {
		t.Fatalf("%d heartbeats", len(hbs))
	}
	for _, rq := range hbs {
		req, _ := http.NewRequest(http.MethodPost, "/v1/task/heartbeat", bytes.NewReader(rq.Body))
		req.Header = rq.Header
		route, params, err := router.FindRoute(req)
		if err != nil {
			t.Fatal(err)
		}
		in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
		if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
			t.Errorf("heartbeat does not match docs/openapi.yaml: %v\nbody: %s", err, rq.Body)
		}
		var body map[string]any
		json.Unmarshal(rq.Body, &body)
		if !strings.Contains(string(rq.Body), `"mig_uuid":"MIG-`) || !strings.Contains(string(rq.Body), `{"uuid":"`+fakeUUID(1)+`","samples":`) {
			t.Errorf("heartbeat without MIG and whole-GPU entries: %s", rq.Body)
		}
		undocumented(t, "Heartbeat", schema, body)
	}
}

// undocumented reports each key of v that schema does not declare, at any
// depth.
func undocumented(t *testing.T, at string, schema *openapi3.Schema, v any) {
	t.Helper()
	switch v := v.(type) {
	case map[string]any:
		for key, val := range v {
			p, ok := schema.Properties[key]
			if !ok {
				t.Errorf("%s.%s is sent but not in docs/openapi.yaml", at, key)
				continue
			}
			undocumented(t, at+"."+key, p.Value, val)
		}
	case []any:
		for _, e := range v {
			undocumented(t, at+"[]", schema.Items.Value, e)
		}
	}
}
