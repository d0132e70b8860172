// Package podresources asks the kubelet which containers were allocated
// which GPU devices (the pod-resources API's List, gRPC over the kubelet's
// unix socket) and the container runtime which containers run (CRI
// ListContainers), and joins the two by namespace, pod and container name.
//
// Guarantees:
//   - Only nvidia.com/gpu, nvidia.com/mig-* and their ".shared" renames
//     count; device IDs are passed on as the device plugin wrote them.
//   - A container is a user only while CRI lists it running: containers of
//     terminated pods are left out. Without a CRI answer, allocations are
//     kept by name (no container ID).
//   - Every call ends by its context's deadline (a hung socket costs the
//     call, never the agent).
//   - Dynamic Resource Allocation: each container's claims
//     (dynamic_resources: claim, driver, pool, device, CDI names, share
//     ID) are passed on as Allocation.Claims, for the agent to resolve
//     through the node's ResourceSlices.
//   - HAMi: a pod sandbox annotated hami.io/vgpu-devices-allocated (CRI
//     ListPodSandbox; set at the pod's creation) makes its containers, by
//     their index in the pod's spec (the order pod-resources lists them
//     in), allocations of those GPUs with Grants of kind "hami". A
//     runtime without ListPodSandbox, or a malformed annotation, gives no
//     HAMi allocation and breaks nothing else.
package podresources

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	cri "k8s.io/cri-api/pkg/apis/runtime/v1"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/paddle-entrypoint/paddle-entrypoint/node/allocation"
	"github.com/paddle-entrypoint/paddle-entrypoint/node/hami"
)

// CRI labels naming a container's pod.
const (
	labelPodUID       = "io.kubernetes.pod.uid"
	labelPodNamespace = "io.kubernetes.pod.namespace"
	labelPodName      = "io.kubernetes.pod.name"
	labelContainer    = "io.kubernetes.container.name"
)

// IsGPUResource says whether a resource name is a GPU the agent counts.
func IsGPUResource(name string) bool {
	name = strings.TrimSuffix(name, ".shared")
	return name == "nvidia.com/gpu" || strings.HasPrefix(name, "nvidia.com/mig-")
}

// Kubelet is the kubelet's pod-resources API and the runtime's CRI.
type Kubelet struct {
	podResources, criSocket string

	mu      sync.Mutex
	prConn  *grpc.ClientConn
	criConn *grpc.ClientConn
	runtime string // the CRI runtime's name, once asked
}

// New returns a source for the sockets ("" or a missing file: not used).
func New(podResourcesSocket, criSocket string) *Kubelet {
	return &Kubelet{podResources: podResourcesSocket, criSocket: criSocket}
}

// Name names the source in metrics and logs.
func (k *Kubelet) Name() string { return "pod-resources" }

func dial(path string) (*grpc.ClientConn, error) {
	return grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
}

// Close closes the connections.
func (k *Kubelet) Close() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, c := range []*grpc.ClientConn{k.prConn, k.criConn} {
		if c != nil {
			c.Close()
		}
	}
	return nil
}

// ErrCRI marks a failed CRI call (the pod-resources answer still counts).
var ErrCRI = errors.New("CRI ListContainers failed")

// Snapshot lists the running containers (CRI) and the GPU allocations
// (pod-resources) joined to them.
func (k *Kubelet) Snapshot(ctx context.Context) (allocation.Snapshot, error) {
	var snap allocation.Snapshot
	containers, criErr := k.containers(ctx)
	snap.Containers = containers
	allocs, order, prErr := k.allocations(ctx)
	if prErr != nil {
		return snap, criFailed(prErr, criErr, k.criSocket)
	}
	if criErr == nil {
		allocs = append(allocs, k.hamiAllocations(ctx, containers, order)...)
	}
	byName := map[[3]string]allocation.Container{}
	for _, c := range containers {
		byName[[3]string{c.Namespace, c.Pod, c.Name}] = c
	}
	for _, a := range allocs {
		key := [3]string{a.Container.Namespace, a.Container.Pod, a.Container.Name}
		if c, ok := byName[key]; ok {
			a.Container = c
		} else if criErr == nil && k.criSocket != "" {
			continue // not running: a terminated pod's container
		}
		snap.Allocations = append(snap.Allocations, a)
	}
	if criErr != nil && k.criSocket != "" {
		return snap, fmt.Errorf("%w: %v", ErrCRI, criErr)
	}
	return snap, nil
}

// criFailed keeps a failed CRI call visible beside a failed pod-resources
// call: the agent checks pod UIDs from paths against CRI's answer (it
// tells the two apart with errors.Is(err, ErrCRI)).
func criFailed(prErr, criErr error, criSocket string) error {
	if criErr == nil || criSocket == "" {
		return prErr
	}
	return errors.Join(prErr, fmt.Errorf("%w: %v", ErrCRI, criErr))
}

// allocations lists the GPU allocations and DRA claims of every
// container, and each pod's containers in the order the kubelet lists them
// (the pod's spec), by namespace and name.
func (k *Kubelet) allocations(ctx context.Context) ([]allocation.Allocation, map[[2]string][]string, error) {
	if k.podResources == "" {
		return nil, nil, nil
	}
	if _, err := os.Stat(k.podResources); err != nil {
		return nil, nil, nil
	}
	k.mu.Lock()
	if k.prConn == nil {
		c, err := dial(k.podResources)
		if err != nil {
			k.mu.Unlock()
			return nil, nil, err
		}
		k.prConn = c
	}
	conn := k.prConn
	k.mu.Unlock()
	resp, err := podresourcesapi.NewPodResourcesListerClient(conn).List(ctx, &podresourcesapi.ListPodResourcesRequest{})
	if err != nil {
		return nil, nil, fmt.Errorf("pod-resources List on %s: %w", k.podResources, err)
	}
	var out []allocation.Allocation
	order := map[[2]string][]string{}
	for _, p := range resp.GetPodResources() {
		pk := [2]string{p.GetNamespace(), p.GetName()}
		for _, c := range p.GetContainers() {
			order[pk] = append(order[pk], c.GetName())
			var devs []string
			for _, d := range c.GetDevices() {
				if IsGPUResource(d.GetResourceName()) {
					devs = append(devs, d.GetDeviceIds()...)
				}
			}
			claims := claimDevices(c.GetDynamicResources())
			if len(devs) == 0 && len(claims) == 0 {
				continue
			}
			out = append(out, allocation.Allocation{
				Container: allocation.Container{Namespace: p.GetNamespace(), Pod: p.GetName(), Name: c.GetName(), Runtime: "cri"},
				Devices:   devs,
				Claims:    claims,
			})
		}
	}
	return out, order, nil
}

// claimDevices flattens a container's DRA claims to their devices.
func claimDevices(drs []*podresourcesapi.DynamicResource) []allocation.ClaimDevice {
	var out []allocation.ClaimDevice
	for _, dr := range drs {
		for _, r := range dr.GetClaimResources() {
			cd := allocation.ClaimDevice{ClaimNamespace: dr.GetClaimNamespace(), ClaimName: dr.GetClaimName(),
				Driver: r.GetDriverName(), Pool: r.GetPoolName(), Device: r.GetDeviceName(), ShareID: r.GetShareId()}
			for _, d := range r.GetCdiDevices() {
				cd.CDIDevices = append(cd.CDIDevices, d.GetName())
			}
			out = append(out, cd)
		}
	}
	return out
}

// hamiAllocations reads HAMi's annotation on the running pods' sandboxes.
// A container is found by its index in the kubelet's list of the pod's
// containers, or, without that list, as the pod's only running container.
func (k *Kubelet) hamiAllocations(ctx context.Context, containers []allocation.Container, order map[[2]string][]string) []allocation.Allocation {
	k.mu.Lock()
	conn := k.criConn
	k.mu.Unlock()
	if conn == nil {
		return nil
	}
	resp, err := cri.NewRuntimeServiceClient(conn).ListPodSandbox(ctx, &cri.ListPodSandboxRequest{
		Filter: &cri.PodSandboxFilter{State: &cri.PodSandboxStateValue{State: cri.PodSandboxState_SANDBOX_READY}}})
	if err != nil {
		return nil // a runtime without it: no HAMi allocations
	}
	var out []allocation.Allocation
	for _, sb := range resp.GetItems() {
		v, ok := sb.GetAnnotations()[hami.Annotation]
		if !ok {
			continue
		}
		perContainer, err := hami.Parse(v)
		if err != nil {
			continue
		}
		md := sb.GetMetadata()
		pk := [2]string{md.GetNamespace(), md.GetName()}
		var running []allocation.Container
		for _, c := range containers {
			if c.Namespace == pk[0] && c.Pod == pk[1] && (c.PodUID == "" || md.GetUid() == "" || c.PodUID == md.GetUid()) {
				running = append(running, c)
			}
		}
		for i, devs := range perContainer {
			if len(devs) == 0 {
				continue
			}
			var name string
			switch names := order[pk]; {
			case i < len(names):
				name = names[i]
			case names == nil && len(running) == 1:
				name = running[0].Name
			default:
				continue
			}
			a := allocation.Allocation{Container: allocation.Container{Namespace: pk[0], Pod: pk[1], Name: name, PodUID: md.GetUid(), Runtime: "cri"}}
			for _, d := range devs {
				a.Devices = append(a.Devices, d.UUID)
				g := allocation.Grant{Device: d.UUID, Kind: "hami", Capacity: d.Share(0), MemoryBytes: d.MemoryMiB << 20}
				a.Grants = append(a.Grants, g)
			}
			out = append(out, a)
		}
	}
	return out
}

func (k *Kubelet) containers(ctx context.Context) ([]allocation.Container, error) {
	if k.criSocket == "" {
		return nil, nil
	}
	if _, err := os.Stat(k.criSocket); err != nil {
		return nil, err
	}
	k.mu.Lock()
	if k.criConn == nil {
		c, err := dial(k.criSocket)
		if err != nil {
			k.mu.Unlock()
			return nil, err
		}
		k.criConn = c
	}
	conn := k.criConn
	rt := k.runtime
	k.mu.Unlock()
	client := cri.NewRuntimeServiceClient(conn)
	if rt == "" {
		if v, err := client.Version(ctx, &cri.VersionRequest{}); err == nil {
			rt = runtimeName(v.GetRuntimeName())
			k.mu.Lock()
			k.runtime = rt
			k.mu.Unlock()
		}
	}
	resp, err := client.ListContainers(ctx, &cri.ListContainersRequest{Filter: &cri.ContainerFilter{State: &cri.ContainerStateValue{State: cri.ContainerState_CONTAINER_RUNNING}}})
	if err != nil {
		return nil, fmt.Errorf("CRI ListContainers on %s: %w", k.criSocket, err)
	}
	var out []allocation.Container
	for _, c := range resp.GetContainers() {
		if c.GetState() != cri.ContainerState_CONTAINER_RUNNING {
			continue
		}
		l := c.GetLabels()
		name := l[labelContainer]
		if name == "" {
			name = c.GetMetadata().GetName()
		}
		out = append(out, allocation.Container{
			ID: c.GetId(), Runtime: rt, PodUID: l[labelPodUID], Namespace: l[labelPodNamespace], Pod: l[labelPodName], Name: name,
		})
	}
	return out, nil
}

// runtimeName spells CRI's runtime name as the report does.
func runtimeName(n string) string {
	switch strings.ToLower(n) {
	case "containerd":
		return "containerd"
	case "cri-o", "crio":
		return "cri-o"
	case "docker":
		return "docker"
	}
	return "cri"
}
