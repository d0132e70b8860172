package main

import (
	"context"
	"net"
	"path/filepath"

	"google.golang.org/grpc"
	cri "k8s.io/cri-api/pkg/apis/runtime/v1"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// The demo's Kubernetes pod: a container of namespace team-a that was
// allocated the third fake GPU and registered nothing. The namespace maps
// to a project through --namespace-projects: its hours are undeclared,
// charged to that project.
const (
	demoPodUID       = "7e57a11d-0000-4000-8000-000000000001"
	demoPodNamespace = "team-a"
	demoPodName      = "embed-job-0"
	demoPodContainer = "worker"
	// demoPodGPU is the fake NVML's third GPU (testdata/fakenvml: UUIDs
	// GPU-a1b2c3NN-8f2d-4c1b-9a3e-1c2d3e4f5aNN for device NN).
	demoPodGPU = "GPU-a1b2c302-8f2d-4c1b-9a3e-1c2d3e4f5a02"
)

// demoPodContainerID is the pod's container ID, as the CRI names it.
var demoPodContainerID = "c0" + demoContainer[2:]

// kubeletStandIn answers the kubelet's pod-resources List with the demo pod
// holding demoPodGPU.
type kubeletStandIn struct {
	podresourcesapi.UnimplementedPodResourcesListerServer
}

func (kubeletStandIn) List(context.Context, *podresourcesapi.ListPodResourcesRequest) (*podresourcesapi.ListPodResourcesResponse, error) {
	return &podresourcesapi.ListPodResourcesResponse{PodResources: []*podresourcesapi.PodResources{{
		Namespace: demoPodNamespace, Name: demoPodName,
		Containers: []*podresourcesapi.ContainerResources{{Name: demoPodContainer, Devices: []*podresourcesapi.ContainerDevices{
			{ResourceName: "nvidia.com/gpu", DeviceIds: []string{demoPodGPU}}}}},
	}}}, nil
}

// runtimeStandIn answers the CRI's Version and ListContainers with the demo
// pod's running container, labelled as the kubelet labels it.
type runtimeStandIn struct {
	cri.UnimplementedRuntimeServiceServer
}

func (runtimeStandIn) Version(context.Context, *cri.VersionRequest) (*cri.VersionResponse, error) {
	return &cri.VersionResponse{RuntimeName: "containerd", RuntimeVersion: "v2.1.0", RuntimeApiVersion: "v1"}, nil
}

func (runtimeStandIn) ListContainers(_ context.Context, req *cri.ListContainersRequest) (*cri.ListContainersResponse, error) {
	if f := req.GetFilter().GetState(); f != nil && f.State != cri.ContainerState_CONTAINER_RUNNING {
		return &cri.ListContainersResponse{}, nil
	}
	return &cri.ListContainersResponse{Containers: []*cri.Container{{
		Id: demoPodContainerID, State: cri.ContainerState_CONTAINER_RUNNING,
		Metadata: &cri.ContainerMetadata{Name: demoPodContainer},
		Labels: map[string]string{
			"io.kubernetes.pod.uid": demoPodUID, "io.kubernetes.pod.namespace": demoPodNamespace,
			"io.kubernetes.pod.name": demoPodName, "io.kubernetes.container.name": demoPodContainer,
		},
	}}}, nil
}

// kubelet serves the two stand-ins on unix sockets in dir and returns
// their paths and a function that stops them.
func kubelet(dir string) (podResources, criSocket string, stop func(), err error) {
	podResources, criSocket = filepath.Join(dir, "kubelet.sock"), filepath.Join(dir, "containerd.sock")
	var servers []*grpc.Server
	stop = func() {
		for _, s := range servers {
			s.Stop()
		}
	}
	for _, s := range []struct {
		path     string
		register func(*grpc.Server)
	}{
		{podResources, func(s *grpc.Server) { podresourcesapi.RegisterPodResourcesListerServer(s, kubeletStandIn{}) }},
		{criSocket, func(s *grpc.Server) { cri.RegisterRuntimeServiceServer(s, runtimeStandIn{}) }},
	} {
		ln, err := net.Listen("unix", s.path)
		if err != nil {
			stop()
			return "", "", nil, err
		}
		g := grpc.NewServer()
		s.register(g)
		servers = append(servers, g)
		go g.Serve(ln)
	}
	return podResources, criSocket, stop, nil
}
