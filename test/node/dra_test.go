package main

// DRA claims and HAMi shares, black-box: the built agent against a
// pod-resources server answering dynamic_resources, a CRI server with
// sandboxes, a TLS API server serving the node's ResourceSlices and the
// claims' allocations (list and watch), and the fake NVML; then the same
// report through the built monitor, its ledger by hand.

import (
	"context"
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	cri "k8s.io/cri-api/pkg/apis/runtime/v1"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/monitorproc"
)

// sandboxRuntime adds CRI ListPodSandbox (with annotations) to runtimeServer.
type sandboxRuntime struct {
	runtimeServer
	sandboxes []*cri.PodSandbox
}

func (r *sandboxRuntime) ListPodSandbox(context.Context, *cri.ListPodSandboxRequest) (*cri.ListPodSandboxResponse, error) {
	return &cri.ListPodSandboxResponse{Items: r.sandboxes}, nil
}

// draCtr is a container holding DRA claim devices: claim ns/name, driver,
// device, share ID.
func draCtr(name string, claims ...[5]string) *podresourcesapi.ContainerResources {
	c := &podresourcesapi.ContainerResources{Name: name}
	for _, cl := range claims {
		res := &podresourcesapi.ClaimResource{DriverName: cl[2], PoolName: "gpu-node-17", DeviceName: cl[3],
			CdiDevices: []*podresourcesapi.CDIDevice{{Name: "k8s." + cl[2] + "/device=" + cl[3]}}}
		if cl[4] != "" {
			share := cl[4]
			res.ShareId = &share
		}
		c.DynamicResources = append(c.DynamicResources, &podresourcesapi.DynamicResource{
			ClaimNamespace: cl[0], ClaimName: cl[1], ClaimResources: []*podresourcesapi.ClaimResource{res}})
	}
	return c
}

// fakeAPIServer serves resource.k8s.io/v1 resourceslices (only with the
// field selector spec.nodeName=gpu-node-17) and resourceclaims, lists and
// watches (a watch stays open without events), to the bearer token; once
// down is set it answers 503 and ends its watches.
func fakeAPIServer(t *testing.T, token string, slices, claims []map[string]any, down *atomic.Bool) *httptest.Server {
	t.Helper()
	list := func(items []map[string]any) []byte {
		b, _ := json.Marshal(map[string]any{"kind": "List", "metadata": map[string]any{"resourceVersion": "100"}, "items": items})
		return b
	}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, `{"kind":"Status","code":503}`, http.StatusServiceUnavailable)
			return
		}
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, `{"kind":"Status","code":401}`, http.StatusUnauthorized)
			return
		}
		var items []map[string]any
		switch r.URL.Path {
		case "/apis/resource.k8s.io/v1/resourceslices":
			if r.URL.Query().Get("fieldSelector") != "spec.nodeName=gpu-node-17" {
				http.Error(w, "the agent must select its node's slices", http.StatusBadRequest)
				return
			}
			items = slices
		case "/apis/resource.k8s.io/v1/resourceclaims":
			items = claims
		default:
			http.NotFound(w, r)
			return
		}
		if r.URL.Query().Get("watch") == "1" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(200)
			w.(http.Flusher).Flush()
			for !down.Load() {
				select {
				case <-r.Context().Done():
					return
				case <-time.After(50 * time.Millisecond):
				}
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(list(items))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// kubeconfigFor writes a JSON kubeconfig naming srv with token.
func kubeconfigFor(t *testing.T, dir string, srv *httptest.Server, token string) string {
	t.Helper()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	kc := map[string]any{"apiVersion": "v1", "kind": "Config", "current-context": "agent",
		"clusters": []any{map[string]any{"name": "c", "cluster": map[string]any{"server": srv.URL, "certificate-authority-data": base64.StdEncoding.EncodeToString(ca)}}},
		"users":    []any{map[string]any{"name": "u", "user": map[string]any{"token": token}}},
		"contexts": []any{map[string]any{"name": "agent", "context": map[string]any{"cluster": "c", "user": "u"}}}}
	b, _ := json.Marshal(kc)
	path := filepath.Join(dir, "kubeconfig.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func draDevice(name string, attrs map[string]string, capacity map[string]string) map[string]any {
	a := map[string]any{}
	for k, v := range attrs {
		a[k] = map[string]any{"string": v}
	}
	c := map[string]any{}
	for k, v := range capacity {
		c[k] = map[string]any{"value": v}
	}
	return map[string]any{"name": name, "attributes": a, "capacity": c}
}

func fakeGPU(i int) string { return fmt.Sprintf("GPU-a1b2c3%02d-8f2d-4c1b-9a3e-1c2d3e4f5a%02d", i, i) }

// draFixture starts the servers and returns the agent's environment; down
// takes the API server down.
func draFixture(t *testing.T) (env []string, dir string, down *atomic.Bool) {
	t.Helper()
	dir, err := os.MkdirTemp("", "pn-dra-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	const token = "agent-token"
	slices := []map[string]any{
		{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": map[string]any{"name": "gpu-node-17-gpu.nvidia.com-x", "resourceVersion": "7"},
			"spec": map[string]any{"driver": "gpu.nvidia.com", "nodeName": "gpu-node-17", "pool": map[string]any{"name": "gpu-node-17", "generation": 1, "resourceSliceCount": 1},
				"devices": []any{
					draDevice("gpu-0", map[string]string{"type": "gpu", "uuid": fakeGPU(0)}, map[string]string{"memory": "80Gi"}),
					draDevice("gpu-1", map[string]string{"type": "gpu", "gpu.nvidia.com/uuid": fakeGPU(1)}, nil),
					draDevice("gpu-2", map[string]string{"type": "gpu", "uuid": fakeGPU(2)}, map[string]string{"memory": "80Gi", "cores": "100"}),
					// A partition DRA creates when it allocates it: no UUID;
					// the second 3g of the GPU, placed at slice 4 (NVML's
					// GPU instance 5; instance 2 is at 0).
					draDevice("gpu-3-mig-3g.71gb-4-4", map[string]string{"type": "mig", "parentUUID": fakeGPU(3), "profile": "3g.71gb"}, nil),
					// Passed to a VM: NVML's GPU 0 must not count it.
					draDevice("gpu-0-vfio", map[string]string{"type": "vfio", "uuid": fakeGPU(0)}, nil),
				}}},
		// Another driver's devices, one with a GPU's name and UUID.
		{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": map[string]any{"name": "gpu-node-17-nic", "resourceVersion": "8"},
			"spec": map[string]any{"driver": "nic.example.com", "nodeName": "gpu-node-17", "pool": map[string]any{"name": "gpu-node-17"},
				"devices": []any{draDevice("gpu-4", map[string]string{"uuid": fakeGPU(4)}, nil)}}},
	}
	claim := func(ns, name, device, share, memory string) map[string]any {
		return map[string]any{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": map[string]any{"name": name, "namespace": ns, "resourceVersion": "9"},
			"status": map[string]any{"allocation": map[string]any{"devices": map[string]any{"results": []any{
				map[string]any{"request": "gpu", "driver": "gpu.nvidia.com", "pool": "gpu-node-17", "device": device, "shareID": share,
					"consumedCapacity": map[string]any{"memory": memory}}}}}}}
	}
	claims := []map[string]any{
		claim("team-c", "share-a", "gpu-2", "s-1", "20Gi"),
		claim("team-c", "share-b", "gpu-2", "s-2", "40Gi"),
	}
	down = new(atomic.Bool)
	api := fakeAPIServer(t, token, slices, claims, down)
	kubeconfig := kubeconfigFor(t, dir, api, token)

	const gpu = "gpu.nvidia.com"
	prSock, criSock := filepath.Join(dir, "kubelet.sock"), filepath.Join(dir, "containerd.sock")
	serveGRPC(t, prSock, func(s *grpc.Server) {
		podresourcesapi.RegisterPodResourcesListerServer(s, &kubeletServer{pods: []*podresourcesapi.PodResources{
			pod("team-a", "train-0", draCtr("paddle", [5]string{"team-a", "train-0-gpu", gpu, "gpu-0", ""})),
			pod("team-b", "infer-0", draCtr("srv", [5]string{"team-b", "shared-gpu", gpu, "gpu-1", ""})),
			pod("team-b", "infer-1", draCtr("srv", [5]string{"team-b", "shared-gpu", gpu, "gpu-1", ""})),
			pod("team-c", "share-a", draCtr("main", [5]string{"team-c", "share-a", gpu, "gpu-2", "s-1"})),
			pod("team-c", "share-b", draCtr("main", [5]string{"team-c", "share-b", gpu, "gpu-2", "s-2"})),
			pod("team-d", "mig-0", draCtr("paddle", [5]string{"team-d", "mig-0-gpu", gpu, "gpu-3-mig-3g.71gb-4-4", ""})),
			pod("team-e", "ghost", draCtr("paddle", [5]string{"team-e", "ghost-gpu", gpu, "gpu-9", ""})),
			pod("team-e", "vm-0", draCtr("launcher", [5]string{"team-e", "vm-gpu", gpu, "gpu-0-vfio", ""})),
			pod("team-e", "nic-0", draCtr("app", [5]string{"team-e", "nic", "nic.example.com", "gpu-4", ""})),
			// HAMi's pods: its device plugin's IDs are its own; the
			// sandbox's annotation says which GPU and how much.
			pod("team-f", "hami-0", ctr("paddle", "nvidia.com/gpu", fakeGPU(4)+"-3"), &podresourcesapi.ContainerResources{Name: "helper"}),
			pod("team-f", "hami-1", ctr("paddle", "nvidia.com/gpu", fakeGPU(4)+"-7")),
		}})
	})
	var containers []*cri.Container
	for i, c := range [][3]string{{"team-a", "train-0", "paddle"}, {"team-b", "infer-0", "srv"}, {"team-b", "infer-1", "srv"},
		{"team-c", "share-a", "main"}, {"team-c", "share-b", "main"}, {"team-d", "mig-0", "paddle"}, {"team-e", "ghost", "paddle"},
		{"team-e", "vm-0", "launcher"}, {"team-e", "nic-0", "app"}, {"team-f", "hami-0", "paddle"}, {"team-f", "hami-0", "helper"}, {"team-f", "hami-1", "paddle"}} {
		id := strings.Repeat(fmt.Sprintf("%02x", i+1), 32)
		containers = append(containers, criContainer(id, "uid-"+c[1], c[0], c[1], c[2], cri.ContainerState_CONTAINER_RUNNING))
	}
	sandbox := func(ns, name, annotation string) *cri.PodSandbox {
		return &cri.PodSandbox{Id: "sb-" + name, State: cri.PodSandboxState_SANDBOX_READY,
			Metadata: &cri.PodSandboxMetadata{Name: name, Namespace: ns, Uid: "uid-" + name}, Annotations: map[string]string{"hami.io/vgpu-devices-allocated": annotation}}
	}
	serveGRPC(t, criSock, func(s *grpc.Server) {
		cri.RegisterRuntimeServiceServer(s, &sandboxRuntime{runtimeServer: runtimeServer{containers: containers}, sandboxes: []*cri.PodSandbox{
			// 20480 MiB of an 80 GiB GPU, no core limit: 0.25.
			sandbox("team-f", "hami-0", fakeGPU(4)+",NVIDIA,20480,0:;;"),
			// 30 % of the cores.
			sandbox("team-f", "hami-1", fakeGPU(4)+",NVIDIA,8000,30:;"),
			// A malformed annotation breaks nothing.
			sandbox("team-b", "infer-0", "GPU-,,,:;"),
			// A pod's own annotation claiming 1 % of the GPU its claim
			// holds whole: ignored, logged.
			sandbox("team-a", "train-0", fakeGPU(0)+",NVIDIA,1,1:;"),
		}})
	})
	state := filepath.Join(dir, "state")
	writeState(t, state, "# no processes: every user is allocated and idle")
	env = nodeEnv(state, "FAKE_NVML_GPUS=5", "FAKE_NVML_MIG_3=2:0:3:72192:0,5:0:3:72192:4",
		"PADDLE_NODE_POD_RESOURCES_SOCKET="+prSock, "PADDLE_NODE_CRI_SOCKET="+criSock, "PADDLE_NODE_KUBECONFIG="+kubeconfig)
	return env, dir, down
}

// TestOnceDRA: each DRA and HAMi user's allocation, claim and shares in
// the report body.
func TestOnceDRA(t *testing.T) {
	env, _, _ := draFixture(t)
	code, out, errs := runNode(t, env, "once", "--interval", "0")
	if code != 0 {
		t.Fatalf("once: exit %d\n%s", code, errs)
	}
	var r wire.NodeReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if err := r.Validate(time.Now()); err != nil {
		t.Fatalf("the report breaks the monitor's rules: %v", err)
	}
	checkDRAReport(t, r, errs)
}

type draWant struct {
	gpu, gi            int // gi -1: whole
	pod, container     string
	allocation         string
	claimNS, claimName string
	capacity           float64
}

var draWants = []draWant{
	{0, -1, "train-0", "paddle", "dra", "team-a", "train-0-gpu", 1},
	{1, -1, "infer-0", "srv", "dra", "team-b", "shared-gpu", 0.5},
	{1, -1, "infer-1", "srv", "dra", "team-b", "shared-gpu", 0.5},
	{2, -1, "share-a", "main", "dra", "team-c", "share-a", 0.25}, // 20Gi of 80Gi
	{2, -1, "share-b", "main", "dra", "team-c", "share-b", 0.5},  // 40Gi of 80Gi
	{3, 5, "mig-0", "paddle", "dra", "team-d", "mig-0-gpu", 1},   // created by the allocation
	{4, -1, "hami-0", "paddle", "hami", "", "", 0.25},            // 20480 MiB of 80 GiB
	{4, -1, "hami-1", "paddle", "hami", "", "", 0.3},             // 30 % of the cores
}

func checkDRAReport(t *testing.T, r wire.NodeReport, errs string) {
	t.Helper()
	byKey := map[[2]int]wire.NodeInstance{}
	for _, in := range r.Instances {
		i := -1
		for g := 0; g < 5; g++ {
			if in.UUID == fakeGPU(g) {
				i = g
			}
		}
		gi := -1
		if in.GPUInstanceID != nil {
			gi = *in.GPUInstanceID
		}
		byKey[[2]int{i, gi}] = in
	}
	users := 0
	for _, w := range draWants {
		in, ok := byKey[[2]int{w.gpu, w.gi}]
		if !ok {
			t.Errorf("no instance GPU %d GI %d: %+v", w.gpu, w.gi, r.Instances)
			continue
		}
		u := userIn(in, w.pod)
		if u == nil {
			t.Errorf("GPU %d GI %d: no user %s (users %+v)\n%s", w.gpu, w.gi, w.pod, in.Users, errs)
			continue
		}
		if u.Container != w.container || u.Allocation != w.allocation || u.ClaimNamespace != w.claimNS || u.ClaimName != w.claimName ||
			u.AllocatedShare != 1 || u.SeenShare != 0 || u.CapacityShare == nil || math.Abs(*u.CapacityShare-w.capacity) > 1e-9 || u.ContainerID == "" {
			t.Errorf("GPU %d GI %d user %s: %+v (capacity %v), want %+v", w.gpu, w.gi, w.pod, *u, deref(u.CapacityShare), w)
		}
	}
	for _, in := range r.Instances {
		users += len(in.Users)
		for _, u := range in.Users {
			if u.Pod == "ghost" || u.Pod == "vm-0" || u.Pod == "nic-0" || u.Container == "helper" {
				t.Errorf("%s/%s is a user of %s: %+v", u.Pod, u.Container, in.UUID, u)
			}
		}
	}
	if users != len(draWants) {
		t.Errorf("%d users, want %d", users, len(draWants))
	}
	if !strings.Contains(errs, "a HAMi annotation on a container that holds the GPU whole") {
		t.Errorf("the forged HAMi annotation is not logged:\n%s", errs)
	}
	if n := strings.Count(errs, "gpu-9"); n != 1 || !strings.Contains(errs, "ResourceSlices do not name") {
		t.Errorf("the unknown device gpu-9 logged %d times, want once:\n%s", n, errs)
	}
}

func deref(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}

// TestDRALedgerByHand: the DRA and HAMi report through the built
// monitor: each share caps its user's time, the rest is unallocated; the
// registered DRA pod's hour is its project's line in the bill.
//
// By hand, for the hour the report covers (5 GPUs, 5 GPU-hours; train-0
// registered a task of search_x, every other user is an unregistered pod,
// undeclared, charged to its namespace's project):
//
//	GPU 0 whole claim (train-0):                     1 attributed (search_x)
//	GPU 1 one claim shared by two pods, 1/2 + 1/2:   1 undeclared (ads_x)
//	GPU 2 shares 0.25 and 0.5 (presence 1/2 each, capped): 0.75 undeclared (ads_x), 0.25 unallocated
//	GPU 3 one 3g instance of 7 slices (DRA-created): 3/7 undeclared (vision_x), 4/7 unallocated
//	GPU 4 HAMi 0.25 and 0.3:                         0.55 undeclared (hami_x), 0.45 unallocated
//
// undeclared 2.3 + 3/7 = 2.728571, unallocated 0.7 + 4/7 = 1.271429; at
// 10 an hour (the 3g instance 5 an instance-hour: 3/7 GPU-hour is one
// instance-hour): attributed 10, undeclared 17.5 + 5 + 5.5 = 28, unallocated
// 12.71, total 50.71 (5 × 10 less the 3g's 3/7 × 10 plus its 5).
func TestDRALedgerByHand(t *testing.T) {
	monitor, err := monitorBin()
	if err != nil {
		t.Fatal(err)
	}
	env, dir, _ := draFixture(t)
	code, out, errs := runNode(t, env, "once", "--interval", "0")
	if code != 0 {
		t.Fatalf("once: exit %d\n%s", code, errs)
	}
	var r wire.NodeReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	checkDRAReport(t, r, errs)
	// The agent's body as it would send it for an hour three hours ago.
	h := time.Now().Unix()/3600*3600 - 3*3600
	r.Time, r.IntervalSeconds = h+3600, 3600
	body, _ := json.Marshal(r)

	tokens := filepath.Join(dir, "tokens.json")
	nodeTok := mint(t, monitor, tokens, "gpu-nodes", "--node", "gpu-node-17")
	teamTok := mint(t, monitor, tokens, "team-a", "--project", "search_*")
	prices := filepath.Join(dir, "prices.json")
	ns := filepath.Join(dir, "namespaces.json")
	writeFile := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(prices, `{"currency":"CNY","models":{"NVIDIA A100-SXM4-80GB":10,"NVIDIA A100-SXM4-80GB 3g.71gb":5}}`)
	writeFile(ns, `{"team-a":"search_x","team-b":"ads_x","team-c":"ads_x","team-d":"vision_x","team-f":"hami_x"}`)
	db := filepath.Join(dir, "m.db")
	srv, err := monitorproc.Start(monitor, []string{"--listen", "127.0.0.1:0", "--db", db, "--tokens", tokens, "--prices", prices, "--namespace-projects", ns},
		monitorproc.Options{Env: []string{"PATH=/usr/bin:/bin"}, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Kill)
	post := func(path, token, body string, header map[string]string) {
		t.Helper()
		req, _ := http.NewRequest("POST", srv.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 201 {
			t.Fatalf("POST %s: %d %s", path, resp.StatusCode, b)
		}
	}
	// train-0's entrypoint registered its task (the pod UID CRI gives).
	post("/v1/task/register", teamTok, fmt.Sprintf(`{"schema_version":1,"task_id":"t-train-0","task_name":"train","project":"search_x",
		"owner":"ann@example.com","start_time":%d,"hostname":"train-0","k8s_pod_uid":"uid-train-0","k8s_node":"gpu-node-17","labels":{},
		"gpu_count":1,"gpus":[{"index":0,"uuid":"%s","name":"NVIDIA A100-SXM4-80GB","memory_total_bytes":85899345920,"share":1}]}`, h-100, fakeGPU(0)),
		map[string]string{"Idempotency-Key": "t-train-0", "User-Agent": "paddle-entrypoint/test"})
	post("/v1/nodes/report", nodeTok, string(body), nil)
	srv.Kill()

	from, to := time.Unix(h, 0).UTC().Format(time.RFC3339), time.Unix(h+3600, 0).UTC().Format(time.RFC3339)
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(monitor, append(args, "--db", db, "--prices", prices, "--namespace-projects", ns, "--from", from, "--to", to)...).CombinedOutput()
		if err != nil {
			t.Fatalf("paddle-monitor %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	want := "state,gpu_hours,cost\nattributed,1,10\nundeclared,2.728571,28\nunattributed,0,0\nunallocated,1.271429,12.71\nunobserved,0,0\ntotal,5,50.71\n"
	if got := run("ledger", "--by", "state", "--format", "csv"); got != want {
		t.Errorf("ledger --by state:\n%s\nwant\n%s", got, want)
	}
	// The bill: train-0's claim is its task's project line (allocated and
	// idle: billed all the same); the others are their namespaces' lines.
	rows, err := csv.NewReader(strings.NewReader(run("report", "--by", "project", "--format", "csv"))).ReadAll()
	if err != nil || len(rows) < 2 {
		t.Fatalf("report --by project: %v %v", rows, err)
	}
	col := map[string]int{}
	for i, name := range rows[0] {
		col[name] = i
	}
	got := map[string]string{}
	for _, row := range rows[1:] {
		got[row[col["project"]]] = strings.Join([]string{row[col["gpu_hours"]], row[col["idle_gpu_hours"]], row[col["cost"]],
			row[col["observed_gpu_hours"]], row[col["undeclared_gpu_hours"]], row[col["billing_basis"]]}, " ")
	}
	// gpu_hours idle_gpu_hours cost observed undeclared basis
	wantBill := map[string]string{
		"search_x": "1 1 10 1 0 observed",
		"ads_x":    "1.75 1.75 17.5 0 1.75 observed",
		"vision_x": "0.428571 0.428571 5 0 0.428571 observed",
		"hami_x":   "0.55 0.55 5.5 0 0.55 observed",
	}
	if len(got) != len(wantBill) {
		t.Errorf("bill lines %v, want %v", got, wantBill)
	}
	for p, w := range wantBill {
		if got[p] != w {
			t.Errorf("bill line %s: %q, want %q", p, got[p], w)
		}
	}
}

// TestDRAWatchFails: the agent running; the API server goes down after
// the first lists: every later report still has the claims' users (the
// last answer stands) and the failures are counted in /metrics.
func TestDRAWatchFails(t *testing.T) {
	env, dir, down := draFixture(t)
	rcv := newReceiver(t, nil)
	listen := freeAddr(t)
	os.WriteFile(filepath.Join(dir, "token"), []byte("node-token\n"), 0o600)
	p := startNode(t, append(env, "PADDLE_MONITOR_URL="+rcv.URL, "PADDLE_NODE_TOKEN_FILE="+filepath.Join(dir, "token"),
		"PADDLE_NODE_REPORT_SPOOL="+filepath.Join(dir, "r.db"), "PADDLE_NODE_INTERVAL=5s", "PADDLE_NODE_SAMPLE=1s", "PADDLE_NODE_LISTEN="+listen))
	waitFor(t, 30*time.Second, "the first report", func() bool { return len(rcv.reports()) >= 1 })
	down.Store(true)
	n := len(rcv.reports())
	waitFor(t, 30*time.Second, "two reports after the API server went down", func() bool { return len(rcv.reports()) >= n+2 })
	m := metricsText(t, listen)
	if v := metricValue(m, `paddle_node_allocation_source_failures_total{source="resourceslices"}`); v < 1 {
		t.Errorf("resourceslices failures %v, want at least 1\n%s", v, m)
	}
	last := rcv.reports()[len(rcv.reports())-1]
	var found *wire.NodeUser
	for _, in := range last.Instances {
		if in.UUID == fakeGPU(2) {
			found = userIn(in, "share-b")
		}
	}
	if found == nil || found.Allocation != "dra" || found.CapacityShare == nil || *found.CapacityShare != 0.5 || found.AllocatedShare != 1 {
		t.Errorf("after the API server went down, share-b: %+v\n%s", found, p.stderr.String())
	}
	if !strings.Contains(p.stderr.String(), "list or watch failed: the last answer stands") {
		t.Errorf("the failure is not logged:\n%s", p.stderr.String())
	}
}
