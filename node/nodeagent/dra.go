package nodeagent

// Devices from Dynamic Resource Allocation claims and fractional plugins
// (docs/node.md, "DRA claims and shared GPUs"): the kubelet source's
// answer is completed here before the observer sees it. Each claim device
// is resolved through the node's ResourceSlices into a device ID the
// observer's matchers know (GPU-…, MIG-…, or MIG-GPU-<parent>/<gi>/0 for a
// partition DRA created), with a Grant carrying the claim and its part of
// the device; HAMi's memory shares are sized by the GPU's memory.

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/probestream"
	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
	"github.com/paddle-entrypoint/paddle-entrypoint/node/allocation"
	"github.com/paddle-entrypoint/paddle-entrypoint/node/nodereport"
	"github.com/paddle-entrypoint/paddle-entrypoint/node/resourceslices"
)

// startSyncWait bounds the wait for the first list of ResourceSlices and
// ResourceClaims at start.
const startSyncWait = 5 * time.Second

// grantSource completes a source's allocations with their claims' devices.
type grantSource struct {
	inner   Source
	agent   *agent
	watcher *resourceslices.Watcher // nil: no API server
	cancel  context.CancelFunc

	mu     sync.Mutex
	line   *probestream.Line // the sample being observed
	logged map[string]bool   // devices logged once
}

// withGrants wraps the kubelet source; the ResourceSlices watch starts
// where an API server is reachable (--kubeconfig, or in a pod).
func (a *agent) withGrants(inner Source) Source {
	g := &grantSource{inner: inner, agent: a, logged: map[string]bool{}}
	a.grants = g
	if len(a.cfg.DRADrivers) == 0 {
		return g
	}
	var client *resourceslices.Client
	var err error
	if a.cfg.Kubeconfig != "" {
		// One named and unusable is a start-up error, not a silent loss
		// of every claim.
		if client, err = resourceslices.FromKubeconfig(a.cfg.Kubeconfig); err != nil {
			a.grantsErr = fmt.Errorf("--kubeconfig %s: %w", a.cfg.Kubeconfig, err)
			return g
		}
	} else {
		client, err = resourceslices.InCluster(os.Getenv)
	}
	if err != nil {
		a.log.Info("DRA claims are not resolved: no API server for the node's ResourceSlices", "error", err)
		return g
	}
	failed := func(resource string, err error) {
		a.metrics.sourceFailures.WithLabelValues(resource).Inc()
		g.once("watch:"+resource, "list or watch failed: the last answer stands", "resource", resource, "error", err)
	}
	g.watcher = resourceslices.New(client, a.cfg.NodeName, a.cfg.DRADrivers, failed)
	ctx, cancel := context.WithCancel(context.Background())
	g.cancel = cancel
	go g.watcher.Run(ctx)
	// The first samples resolve the claims already, unless the API server
	// is slow to answer.
	wctx, wcancel := context.WithTimeout(ctx, startSyncWait)
	defer wcancel()
	if !g.watcher.WaitSynced(wctx) {
		a.log.Warn("the node's ResourceSlices are not listed yet: DRA claims count once they are", "waited", startSyncWait.String())
	}
	return g
}

func (g *grantSource) Name() string { return g.inner.Name() }

// Close ends the watch and closes the wrapped source.
func (g *grantSource) Close() error {
	if g.cancel != nil {
		g.cancel()
	}
	if c, ok := g.inner.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// setLine gives the sample's probe line (NVML's instances and memory).
func (g *grantSource) setLine(l *probestream.Line) {
	g.mu.Lock()
	g.line = l
	g.mu.Unlock()
}

// once logs msg the first time key is seen (a watch failure logs again
// after a success would be noise: once per agent run).
func (g *grantSource) once(key, msg string, args ...any) {
	g.mu.Lock()
	seen := g.logged[key]
	g.logged[key] = true
	g.mu.Unlock()
	if !seen {
		g.agent.log.Warn(msg, args...)
	}
}

func (g *grantSource) Snapshot(ctx context.Context) (Snapshot, error) {
	snap, err := g.inner.Snapshot(ctx)
	g.mu.Lock()
	line := g.line
	g.mu.Unlock()
	g.resolve(&snap, line)
	return snap, err
}

// resolve turns claims into devices and grants, and sizes the shares.
func (g *grantSource) resolve(snap *Snapshot, line *probestream.Line) {
	for i := range snap.Allocations {
		a := &snap.Allocations[i]
		for _, cd := range a.Claims {
			if g.watcher == nil {
				g.once("no-api-server", "a container holds DRA claims but the agent has no API server to resolve them", "claim", cd.ClaimNamespace+"/"+cd.ClaimName)
				continue
			}
			r := g.watcher.Resolve(cd)
			var dev string
			switch r.Outcome {
			case resourceslices.NotOurs, resourceslices.Unsynced:
				continue
			case resourceslices.Unknown:
				g.once("unknown:"+cd.Key(), "a DRA device the node's ResourceSlices do not name: its claim's containers are users of no instance",
					"driver", cd.Driver, "pool", cd.Pool, "device", cd.Device, "claim", cd.ClaimNamespace+"/"+cd.ClaimName)
				continue
			case resourceslices.VFIO:
				continue // passed to a VM: NVML on the host does not see it
			case resourceslices.Whole, resourceslices.MIG:
				dev = r.Device.UUID
			case resourceslices.DynamicMIG:
				if dev = dynamicMIG(line, r.Device); dev == "" {
					g.once("mig:"+cd.Key(), "a DRA-created MIG device NVML's instances do not tell apart: its claim's containers are users of no instance",
						"device", cd.Device, "parent", r.Device.ParentUUID, "profile", r.Device.Profile)
					continue
				}
			}
			gr := allocation.Grant{Device: dev, Kind: wire.AllocationDRA, ClaimNamespace: cd.ClaimNamespace, ClaimName: cd.ClaimName, Capacity: r.Capacity}
			if r.Capacity == 0 {
				gr.Shared = cd.Key()
			}
			a.Devices = append(a.Devices, dev)
			a.Grants = append(a.Grants, gr)
		}
	}
	g.distrustHAMi(snap)
	sizeShares(snap, line)
}

// distrustHAMi drops the part of a HAMi grant whose container also holds
// that GPU whole (the device plugin's ID is the GPU's UUID, or a DRA grant
// names it): the annotation is the pod's, and a pod that was not placed by
// HAMi could carry one to make its whole GPU look like a sliver. HAMi's own
// device plugin lists IDs of its own, never the bare UUID.
func (g *grantSource) distrustHAMi(snap *Snapshot) {
	whole := map[string]bool{} // container key + "\x00" + lower-case UUID
	for _, a := range snap.Allocations {
		k := a.Container.Namespace + "/" + a.Container.Pod + "/" + a.Container.Name + "\x00"
		hami := map[string]bool{}
		for _, gr := range a.Grants {
			if gr.Kind == wire.AllocationHAMi {
				hami[gr.Device] = true // the annotation's own devices
			}
		}
		for _, d := range a.Devices {
			if !hami[d] {
				whole[k+strings.ToLower(baseID(d))] = true
			}
		}
	}
	for i := range snap.Allocations {
		a := &snap.Allocations[i]
		k := a.Container.Namespace + "/" + a.Container.Pod + "/" + a.Container.Name + "\x00"
		for j := range a.Grants {
			gr := &a.Grants[j]
			if gr.Kind == wire.AllocationHAMi && whole[k+strings.ToLower(gr.Device)] {
				g.once("hami-whole:"+k+gr.Device, "a HAMi annotation on a container that holds the GPU whole: its share is ignored",
					"namespace", a.Container.Namespace, "pod", a.Container.Pod, "container", a.Container.Name, "gpu", gr.Device)
				*gr = allocation.Grant{Device: gr.Device}
			}
		}
	}
}

// sizeShares gives a device shared without sizes 1/n among the n distinct
// containers holding it in this sample (1 for one holder), and a HAMi
// device without a core share its share of the GPU's memory.
func sizeShares(snap *Snapshot, line *probestream.Line) {
	holders := map[string]map[string]bool{}
	for _, a := range snap.Allocations {
		for _, gr := range a.Grants {
			if gr.Shared == "" {
				continue
			}
			if holders[gr.Shared] == nil {
				holders[gr.Shared] = map[string]bool{}
			}
			holders[gr.Shared][containerKey(a.Container)] = true
		}
	}
	memory := map[string]uint64{}
	if line != nil {
		for _, gpu := range line.GPUs {
			memory[strings.ToLower(gpu.UUID)] = gpu.MemoryTotalBytes
		}
	}
	for i := range snap.Allocations {
		for j := range snap.Allocations[i].Grants {
			gr := &snap.Allocations[i].Grants[j]
			switch {
			case gr.Shared != "":
				gr.Capacity = 1 / float64(len(holders[gr.Shared]))
			case gr.Kind == wire.AllocationHAMi && gr.Capacity == 0 && gr.MemoryBytes > 0:
				if total := memory[strings.ToLower(gr.Device)]; total > 0 {
					gr.Capacity = min(float64(gr.MemoryBytes)/float64(total), 1)
				}
			}
		}
	}
}

func containerKey(c Container) string {
	if c.ID != "" {
		return c.ID
	}
	return c.Namespace + "/" + c.Pod + "/" + c.Name
}

// dynamicMIG finds the NVML instance of a MIG partition DRA created (no
// UUID in the slice): on its parent GPU, of its profile, at the placement
// the device's name gives where NVML gives the instances' placements; the
// one instance of that profile where it does not. Several candidates that
// nothing tells apart: "".
func dynamicMIG(line *probestream.Line, d resourceslices.Device) string {
	if line == nil {
		return ""
	}
	for _, gpu := range line.GPUs {
		if !strings.EqualFold(gpu.UUID, d.ParentUUID) {
			continue
		}
		var candidates []probestream.Instance
		for _, in := range gpu.Instances {
			if in.Profile == d.Profile {
				candidates = append(candidates, in)
			}
		}
		found := -1
		for _, in := range candidates {
			if d.PlacementStart >= 0 && in.PlacementStart != nil && *in.PlacementStart == d.PlacementStart {
				found = in.GPUInstanceID
			}
		}
		if found < 0 && len(candidates) == 1 && (d.PlacementStart < 0 || candidates[0].PlacementStart == nil) {
			found = candidates[0].GPUInstanceID
		}
		if found >= 0 {
			return fmt.Sprintf("MIG-%s/%s/0", gpu.UUID, strconv.Itoa(found))
		}
	}
	return ""
}

// applyGrants copies what the allocation's grants say about the devices
// of this instance onto its user's reading: the kind, the claim, the part
// (the parts of two grants on one instance add up, at most 1; a device
// shared without sizes is one part however many claims name it).
func applyGrants(ur *nodereport.UserReading, a Allocation, allocated func(dev string) bool) {
	counted := map[string]bool{} // a device shared without sizes counts once per container
	for _, gr := range a.Grants {
		if gr.Kind == "" || !allocated(gr.Device) || (gr.Shared != "" && counted[gr.Shared]) {
			continue
		}
		if gr.Shared != "" {
			counted[gr.Shared] = true
		}
		ur.Allocation, ur.ClaimNamespace, ur.ClaimName = gr.Kind, gr.ClaimNamespace, gr.ClaimName
		if gr.Capacity > 0 {
			c := gr.Capacity
			if ur.CapacityShare != nil {
				c = min(c+*ur.CapacityShare, 1)
			}
			ur.CapacityShare = &c
		}
	}
}
