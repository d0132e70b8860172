package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// dockerAPI serves the Docker-compatible API's list and inspect of
// containers (by ID: the inspect body) on a unix socket.
func dockerAPI(t *testing.T, path, engine string, containers map[string]map[string]any) {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /version", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"Components": []map[string]string{{"Name": engine}}})
	})
	mux.HandleFunc("GET /containers/json", func(w http.ResponseWriter, r *http.Request) {
		var list []map[string]string
		for id := range containers {
			list = append(list, map[string]string{"Id": id})
		}
		json.NewEncoder(w).Encode(list)
	})
	mux.HandleFunc("GET /containers/{id}/json", func(w http.ResponseWriter, r *http.Request) {
		c, ok := containers[r.PathValue("id")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		json.NewEncoder(w).Encode(c)
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
}

func inspectBody(id, name string, env []string, requests ...map[string]any) map[string]any {
	return map[string]any{
		"Id": id, "Name": "/" + name, "State": map[string]any{"Running": true},
		"Config":     map[string]any{"Env": env},
		"HostConfig": map[string]any{"DeviceRequests": requests},
	}
}

// TestOnceDocker: a Docker-compatible API's containers with GPU device
// requests (explicit IDs, a count of -1) or NVIDIA_VISIBLE_DEVICES (an
// index, a MIG UUID) are users of those instances, allocated, with or
// without a process.
func TestOnceDocker(t *testing.T) {
	const (
		id1  = "1111111111111111111111111111111111111111111111111111111111111111"
		id2  = "2222222222222222222222222222222222222222222222222222222222222222"
		id3  = "3333333333333333333333333333333333333333333333333333333333333333"
		id4  = "4444444444444444444444444444444444444444444444444444444444444444"
		gpu0 = "GPU-a1b2c300-8f2d-4c1b-9a3e-1c2d3e4f5a00"
		mig  = "MIG-a1b2c302-0900-4b1c-9d2e-0f1a2b3c4d02"
	)
	dir, err := os.MkdirTemp("", "pn-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "docker.sock")
	dockerAPI(t, sock, "Podman Engine", map[string]map[string]any{
		id1: inspectBody(id1, "explicit", nil, map[string]any{"Driver": "nvidia", "DeviceIDs": []string{gpu0}}),
		id2: inspectBody(id2, "everything", nil, map[string]any{"Driver": "", "Count": -1, "Capabilities": [][]string{{"gpu"}}}),
		id3: inspectBody(id3, "by-index", []string{"NVIDIA_VISIBLE_DEVICES=1"}),
		id4: inspectBody(id4, "mig", []string{"PATH=/bin", "NVIDIA_VISIBLE_DEVICES=" + mig}),
	})
	state := filepath.Join(dir, "state")
	writeState(t, state, "util 0 10")
	r := once(t, nodeEnv(state, "FAKE_NVML_GPUS=3", "FAKE_NVML_MIG_2=9:0:1:17920", "PADDLE_NODE_DOCKER_SOCKET="+sock), "--interval", "0")
	users := map[string][]string{} // instance -> container names
	for _, in := range r.Instances {
		key := in.UUID
		if in.GPUInstanceID != nil {
			key = fmt.Sprintf("%s/%d", in.UUID, *in.GPUInstanceID)
		}
		for _, u := range in.Users {
			if u.Runtime != "podman" || u.AllocatedShare != 1 || u.SeenShare != 0 {
				t.Errorf("%s: user %+v", key, u)
			}
			users[key] = append(users[key], u.Container)
		}
	}
	want := map[string]string{
		gpu0: "everything,explicit",
		"GPU-a1b2c301-8f2d-4c1b-9a3e-1c2d3e4f5a01":   "by-index,everything",
		"GPU-a1b2c302-8f2d-4c1b-9a3e-1c2d3e4f5a02/9": "everything,mig",
	}
	for k, w := range want {
		got := users[k]
		slices.Sort(got)
		if strings.Join(got, ",") != w {
			t.Errorf("%s: users %v, want %s", k, got, w)
		}
	}
}
