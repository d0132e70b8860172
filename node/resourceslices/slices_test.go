package resourceslices

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/node/allocation"
)

func TestParseQuantity(t *testing.T) {
	tests := []struct {
		in   string
		want float64
		bad  bool
	}{
		{"80Gi", 80 << 30, false}, {"500m", 0.5, false}, {"1.5", 1.5, false}, {"1e3", 1000, false},
		{"2k", 2000, false}, {"3E", 3e18, false}, {"100", 100, false}, {"10Mi", 10 << 20, false},
		{"", 0, true}, {"-1", 0, true}, {"Gi", 0, true}, {"ten", 0, true}, {"NaN", 0, true},
	}
	for _, tc := range tests {
		got, err := parseQuantity(tc.in)
		if (err != nil) != tc.bad || (!tc.bad && got != tc.want) {
			t.Errorf("parseQuantity(%q) = %v, %v; want %v (error %v)", tc.in, got, err, tc.want, tc.bad)
		}
	}
}

// apiServer serves one slice list, then watch events from events (one
// stream per watch; a closed stream ends the watch), and fails the lists
// while fail is set.
type apiServer struct {
	mu     sync.Mutex
	slices []any
	fail   bool
	events chan string
	lists  int
}

func (a *apiServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	fail, slices := a.fail, a.slices
	a.mu.Unlock()
	if fail {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	if r.URL.Query().Get("watch") == "1" {
		if r.URL.Path != "/apis/resource.k8s.io/v1/resourceslices" {
			<-r.Context().Done()
			return
		}
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		for {
			select {
			case ev, ok := <-a.events:
				if !ok {
					return
				}
				fmt.Fprintln(w, ev)
				w.(http.Flusher).Flush()
			case <-r.Context().Done():
				return
			}
		}
	}
	items := []any{}
	if r.URL.Path == "/apis/resource.k8s.io/v1/resourceslices" {
		a.mu.Lock()
		a.lists++
		a.mu.Unlock()
		items = slices
	}
	json.NewEncoder(w).Encode(map[string]any{"metadata": map[string]any{"resourceVersion": "1"}, "items": items})
}

func slice(name, driver string, devices ...any) map[string]any {
	return map[string]any{"metadata": map[string]any{"name": name, "resourceVersion": "2"},
		"spec": map[string]any{"driver": driver, "nodeName": "n1", "pool": map[string]any{"name": "n1"}, "devices": devices}}
}

func dev(name string, attrs map[string]string) map[string]any {
	a := map[string]any{}
	for k, v := range attrs {
		a[k] = map[string]any{"string": v}
	}
	return map[string]any{"name": name, "attributes": a}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestWatcher: the list, a watch's added, modified and deleted slices,
// other drivers ignored, and a failed list keeping the last answer.
func TestWatcher(t *testing.T) {
	api := &apiServer{slices: []any{slice("s1", "gpu.nvidia.com", dev("gpu-0", map[string]string{"uuid": "GPU-0"})),
		slice("s2", "nic.example.com", dev("gpu-1", map[string]string{"uuid": "GPU-1"}))}, events: make(chan string, 8)}
	srv := httptest.NewServer(api)
	defer srv.Close()
	var mu sync.Mutex
	var failures []string
	w := New(&Client{Server: srv.URL, HTTP: srv.Client()}, "n1", []string{"gpu.nvidia.com"}, func(res string, err error) {
		mu.Lock()
		failures = append(failures, res)
		mu.Unlock()
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go w.Run(ctx)
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if !w.WaitSynced(wctx) {
		t.Fatal("never synced")
	}
	cd := func(driver, device string) allocation.ClaimDevice {
		return allocation.ClaimDevice{Driver: driver, Pool: "n1", Device: device}
	}
	if r := w.Resolve(cd("gpu.nvidia.com", "gpu-0")); r.Outcome != Whole || r.Device.UUID != "GPU-0" {
		t.Errorf("gpu-0: %+v", r)
	}
	if r := w.Resolve(cd("nic.example.com", "gpu-1")); r.Outcome != NotOurs {
		t.Errorf("another driver's device: %+v", r)
	}
	if r := w.Resolve(cd("gpu.nvidia.com", "gpu-1")); r.Outcome != Unknown {
		t.Errorf("a device no slice of ours names: %+v", r)
	}
	// A watch adds a MIG partition created at allocation, then deletes s1.
	b, _ := json.Marshal(map[string]any{"type": "ADDED", "object": slice("s3", "gpu.nvidia.com",
		dev("gpu-2-mig-1g.18gb-3", map[string]string{"parentUUID": "GPU-2", "profile": "1g.18gb"}))})
	api.events <- string(b)
	waitFor(t, "the added slice", func() bool { return w.Resolve(cd("gpu.nvidia.com", "gpu-2-mig-1g.18gb-3")).Outcome == DynamicMIG })
	if r := w.Resolve(cd("gpu.nvidia.com", "gpu-2-mig-1g.18gb-3")); r.Device.PlacementStart != 3 || r.Device.ParentUUID != "GPU-2" {
		t.Errorf("dynamic MIG: %+v", r.Device)
	}
	b, _ = json.Marshal(map[string]any{"type": "DELETED", "object": slice("s1", "gpu.nvidia.com")})
	api.events <- string(b)
	waitFor(t, "the deleted slice", func() bool { return w.Resolve(cd("gpu.nvidia.com", "gpu-0")).Outcome == Unknown })

	// The server fails; the watch ends: the last answer stands, counted.
	api.mu.Lock()
	api.fail = true
	api.mu.Unlock()
	close(api.events)
	waitFor(t, "a failure counted", func() bool { mu.Lock(); defer mu.Unlock(); return len(failures) > 0 })
	if r := w.Resolve(cd("gpu.nvidia.com", "gpu-2-mig-1g.18gb-3")); r.Outcome != DynamicMIG {
		t.Errorf("after the failure the last answer is gone: %+v", r)
	}
}

// TestConsumedCapacity: a share's part is its consumed capacity over the
// device's, the largest such fraction; another share ID's result does
// not count.
func TestConsumedCapacity(t *testing.T) {
	w := &Watcher{drivers: []string{"gpu.nvidia.com"}}
	w.slices = &collection{objects: map[string]any{}, synced: true}
	w.claims = &collection{objects: map[string]any{}, synced: true}
	raw, _ := json.Marshal(slice("s", "gpu.nvidia.com", map[string]any{"name": "gpu-0",
		"attributes": map[string]any{"uuid": map[string]any{"string": "GPU-0"}},
		"capacity":   map[string]any{"memory": map[string]any{"value": "80Gi"}, "gpu.nvidia.com/cores": map[string]any{"value": "100"}}}))
	k, v, err := w.decodeSlice(raw)
	if err != nil {
		t.Fatal(err)
	}
	w.slices.objects[k] = v
	raw, _ = json.Marshal(map[string]any{"metadata": map[string]any{"name": "c", "namespace": "ns"},
		"status": map[string]any{"allocation": map[string]any{"devices": map[string]any{"results": []any{
			map[string]any{"driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-0", "shareID": "a", "consumedCapacity": map[string]any{"memory": "20Gi", "cores": "40"}},
			map[string]any{"driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-0", "shareID": "b", "consumedCapacity": map[string]any{"memory": "80Gi"}},
		}}}}})
	k, v, err = w.decodeClaim(raw)
	if err != nil {
		t.Fatal(err)
	}
	w.claims.objects[k] = v
	r := w.Resolve(allocation.ClaimDevice{ClaimNamespace: "ns", ClaimName: "c", Driver: "gpu.nvidia.com", Pool: "n1", Device: "gpu-0", ShareID: "a"})
	if r.Outcome != Whole || r.Capacity != 0.4 {
		t.Errorf("share a: %+v, want capacity 0.4 (40 of 100 cores beats 20Gi of 80Gi)", r)
	}
	r = w.Resolve(allocation.ClaimDevice{ClaimNamespace: "ns", ClaimName: "other", Driver: "gpu.nvidia.com", Pool: "n1", Device: "gpu-0"})
	if r.Capacity != 0 {
		t.Errorf("a claim without consumed capacity: %+v", r)
	}
}
