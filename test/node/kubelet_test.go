package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
	cri "k8s.io/cri-api/pkg/apis/runtime/v1"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
)

// kubeletServer answers pod-resources List with pods.
type kubeletServer struct {
	podresourcesapi.UnimplementedPodResourcesListerServer
	pods []*podresourcesapi.PodResources
}

func (k *kubeletServer) List(context.Context, *podresourcesapi.ListPodResourcesRequest) (*podresourcesapi.ListPodResourcesResponse, error) {
	return &podresourcesapi.ListPodResourcesResponse{PodResources: k.pods}, nil
}

// runtimeServer answers CRI Version and ListContainers.
type runtimeServer struct {
	cri.UnimplementedRuntimeServiceServer
	containers []*cri.Container
}

func (r *runtimeServer) Version(context.Context, *cri.VersionRequest) (*cri.VersionResponse, error) {
	return &cri.VersionResponse{RuntimeName: "containerd", RuntimeVersion: "v2.1.0", RuntimeApiVersion: "v1"}, nil
}

func (r *runtimeServer) ListContainers(_ context.Context, req *cri.ListContainersRequest) (*cri.ListContainersResponse, error) {
	var out []*cri.Container
	for _, c := range r.containers {
		if f := req.GetFilter().GetState(); f != nil && f.State != c.State {
			continue
		}
		out = append(out, c)
	}
	return &cri.ListContainersResponse{Containers: out}, nil
}

// serveGRPC serves register's services on a unix socket in dir.
func serveGRPC(t *testing.T, path string, register func(*grpc.Server)) {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	register(s)
	go s.Serve(ln)
	t.Cleanup(s.Stop)
}

func pod(ns, name string, containers ...*podresourcesapi.ContainerResources) *podresourcesapi.PodResources {
	return &podresourcesapi.PodResources{Namespace: ns, Name: name, Containers: containers}
}

func ctr(name, resource string, ids ...string) *podresourcesapi.ContainerResources {
	return &podresourcesapi.ContainerResources{Name: name, Devices: []*podresourcesapi.ContainerDevices{
		{ResourceName: resource, DeviceIds: ids},
		{ResourceName: "example.com/nic", DeviceIds: []string{"GPU-a1b2c303-8f2d-4c1b-9a3e-1c2d3e4f5a03"}}, // not a GPU resource
	}}
}

func criContainer(id, podUID, ns, pod, name string, state cri.ContainerState) *cri.Container {
	return &cri.Container{Id: id, State: state, Metadata: &cri.ContainerMetadata{Name: name}, Labels: map[string]string{
		"io.kubernetes.pod.uid": podUID, "io.kubernetes.pod.namespace": ns, "io.kubernetes.pod.name": pod, "io.kubernetes.container.name": name,
	}}
}

func userIn(in wire.NodeInstance, pod string) *wire.NodeUser {
	for i := range in.Users {
		if in.Users[i].Pod == pod {
			return &in.Users[i]
		}
	}
	return nil
}

// TestOnceKubelet: test gRPC servers implementing the real pod-resources
// List and CRI ListContainers: an allocated container with no GPU process
// (its labels read through a process of its container), a time-slicing
// replica, a MIG device, a terminated pod's container; then a socket that
// hangs.
func TestOnceKubelet(t *testing.T) {
	needCgroups(t)
	const (
		uidA = "11111111-2222-4333-8444-555555555555"
		idA  = "a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1"
		uidB = "66666666-7777-4888-9999-000000000000"
		idB  = "b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1"
		uidC = "12121212-3434-4545-8656-787878787878"
		idC  = "c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1"
		idD  = "d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1"
		gpu0 = "GPU-a1b2c300-8f2d-4c1b-9a3e-1c2d3e4f5a00"
		gpu1 = "GPU-a1b2c301-8f2d-4c1b-9a3e-1c2d3e4f5a01"
		mig9 = "MIG-a1b2c302-0900-4b1c-9d2e-0f1a2b3c4d02"
	)
	// A: allocated GPU 0, no GPU process; a process of its container
	// (the pause program in its root) carries its labels.
	a := startIn(t, containerRoot(t, []byte("project=search_ranking\ntask_id=task-a\nowner=alice@example.com\n"), nil))
	inCgroup(t, a, "kubepods/burstable/pod"+uidA+"/"+idA)
	// B: a time-slicing replica of GPU 1, with a process on it.
	b := startIn(t, containerRoot(t, []byte("project=serving\ntask_id=task-b\n"), nil))
	inCgroup(t, b, "kubepods/besteffort/pod"+uidB+"/"+idB)
	dir, err := os.MkdirTemp("", "pn-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	prSock, criSock := filepath.Join(dir, "kubelet.sock"), filepath.Join(dir, "containerd.sock")
	serveGRPC(t, prSock, func(s *grpc.Server) {
		podresourcesapi.RegisterPodResourcesListerServer(s, &kubeletServer{pods: []*podresourcesapi.PodResources{
			pod("team-a", "train-0", ctr("paddle", "nvidia.com/gpu", gpu0)),
			pod("team-b", "infer-0", ctr("srv", "nvidia.com/gpu.shared", gpu1+"::2")),
			pod("team-c", "small-0", ctr("paddle", "nvidia.com/mig-1g.18gb", mig9)),
			pod("team-d", "done-0", ctr("paddle", "nvidia.com/gpu", gpu0)), // terminated
		}})
	})
	serveGRPC(t, criSock, func(s *grpc.Server) {
		cri.RegisterRuntimeServiceServer(s, &runtimeServer{containers: []*cri.Container{
			criContainer(idA, uidA, "team-a", "train-0", "paddle", cri.ContainerState_CONTAINER_RUNNING),
			criContainer(idB, uidB, "team-b", "infer-0", "srv", cri.ContainerState_CONTAINER_RUNNING),
			criContainer(idC, uidC, "team-c", "small-0", "paddle", cri.ContainerState_CONTAINER_RUNNING),
			criContainer(idD, "dead", "team-d", "done-0", "paddle", cri.ContainerState_CONTAINER_EXITED),
		}})
	})
	state := filepath.Join(dir, "state")
	writeState(t, state, fmt.Sprintf("proc 1 compute %d 1000 20", b), "util 0 0", "util 1 50")
	env := nodeEnv(state, "FAKE_NVML_GPUS=3", "FAKE_NVML_MIG_2=9:0:1:17920",
		"PADDLE_NODE_POD_RESOURCES_SOCKET="+prSock, "PADDLE_NODE_CRI_SOCKET="+criSock)
	r := once(t, env, "--interval", "0")
	if len(r.Instances) != 3 {
		t.Fatalf("instances %+v", r.Instances)
	}
	i0, i1, i9 := r.Instances[0], r.Instances[1], r.Instances[2]
	ua := userIn(i0, "train-0")
	if ua == nil || ua.ContainerID != idA || ua.PodUID != uidA || ua.Namespace != "team-a" || ua.Container != "paddle" || ua.Runtime != "cri" && ua.Runtime != "containerd" ||
		ua.AllocatedShare != 1 || ua.SeenShare != 0 || ua.BusyShare != 0 || ua.Declared == nil || ua.Declared.TaskID != "task-a" {
		t.Errorf("allocated idle container: %+v", ua)
	}
	if len(i0.Users) != 1 || i0.OccupiedShare != 1 || i0.BusyShare != 0 {
		t.Errorf("GPU 0 (the terminated pod's container is no user): %+v", i0)
	}
	ub := userIn(i1, "infer-0")
	if ub == nil || len(i1.Users) != 1 || ub.ContainerID != idB || ub.AllocatedShare != 1 || ub.SeenShare != 1 || *ub.SMUtilMean != 20 || ub.Declared == nil || ub.Declared.TaskID != "task-b" {
		t.Errorf("time-slicing replica with a process: %+v (users %d)", ub, len(i1.Users))
	}
	uc := userIn(i9, "small-0")
	if i9.GPUInstanceID == nil || *i9.GPUInstanceID != 9 || uc == nil || uc.ContainerID != idC || uc.AllocatedShare != 1 || uc.Declared != nil {
		t.Errorf("MIG device: %+v", i9)
	}

	// A socket that accepts and never answers: the calls end at their
	// bound, the sample goes on without allocations, the failure is logged.
	hung := filepath.Join(dir, "hung.sock")
	ln, err := net.Listen("unix", hung)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	code, out, errs := runNode(t, nodeEnv(state, "FAKE_NVML_GPUS=3", "FAKE_NVML_MIG_2=9:0:1:17920",
		"PADDLE_NODE_POD_RESOURCES_SOCKET="+hung, "PADDLE_NODE_CRI_SOCKET="+hung), "once", "--interval", "0")
	if code != 0 || !strings.Contains(errs, "allocation source failed") || strings.Contains(out, "train-0") || !strings.Contains(out, `"samples": 1`) {
		t.Errorf("hung socket: exit %d\n%s\n%s", code, out, errs)
	}
}
