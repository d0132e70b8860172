package nodeagent

import (
	"io"
	"log/slog"
	"testing"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/probestream"
	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
	"github.com/paddle-entrypoint/paddle-entrypoint/node/allocation"
	"github.com/paddle-entrypoint/paddle-entrypoint/node/nodereport"
	"github.com/paddle-entrypoint/paddle-entrypoint/node/resourceslices"
)

// TestSizeShares: a device shared without sizes is 1/n among the distinct
// containers holding it (a container holding it twice is one), one holder
// gets 1; a HAMi grant without a core share gets its memory share.
func TestSizeShares(t *testing.T) {
	ctr := func(id string) Container { return Container{ID: id} }
	shared := func(key string) allocation.Grant {
		return allocation.Grant{Device: "GPU-a", Kind: wire.AllocationDRA, Shared: key}
	}
	snap := Snapshot{Allocations: []Allocation{
		{Container: ctr("c1"), Grants: []allocation.Grant{shared("d/p/gpu-0"), shared("d/p/gpu-0")}},
		{Container: ctr("c2"), Grants: []allocation.Grant{shared("d/p/gpu-0")}},
		{Container: ctr("c3"), Grants: []allocation.Grant{shared("d/p/gpu-0")}},
		{Container: ctr("c4"), Grants: []allocation.Grant{shared("d/p/gpu-1")}},
		{Container: ctr("c5"), Grants: []allocation.Grant{{Device: "GPU-b", Kind: wire.AllocationHAMi, MemoryBytes: 20 << 30}}},
		{Container: ctr("c6"), Grants: []allocation.Grant{{Device: "GPU-b", Kind: wire.AllocationHAMi, Capacity: 0.3, MemoryBytes: 1 << 30}}},
		{Container: ctr("c7"), Grants: []allocation.Grant{{Device: "GPU-unknown", Kind: wire.AllocationHAMi, MemoryBytes: 1 << 30}}},
	}}
	line := &probestream.Line{GPUs: []probestream.GPU{{UUID: "GPU-B", MemoryTotalBytes: 80 << 30}}}
	sizeShares(&snap, line)
	want := []float64{1.0 / 3, 1.0 / 3, 1.0 / 3, 1.0 / 3, 1, 0.25, 0.3, 0}
	var got []float64
	for _, a := range snap.Allocations {
		for _, g := range a.Grants {
			got = append(got, g.Capacity)
		}
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("grants' capacities %v, want %v", got, want)
			break
		}
	}
}

// TestDynamicMIG: a DRA-created partition is its parent's one instance of
// its profile; two of that profile cannot be told apart.
func TestDynamicMIG(t *testing.T) {
	line := &probestream.Line{GPUs: []probestream.GPU{{UUID: "GPU-P", MIGMode: true, Instances: []probestream.Instance{
		{GPUInstanceID: 2, Profile: "3g.71gb"}, {GPUInstanceID: 7, Profile: "1g.18gb"}, {GPUInstanceID: 8, Profile: "1g.18gb"}}}}}
	tests := []struct {
		d    resourceslices.Device
		want string
	}{
		{resourceslices.Device{ParentUUID: "gpu-p", Profile: "3g.71gb"}, "MIG-GPU-P/2/0"},
		{resourceslices.Device{ParentUUID: "GPU-P", Profile: "1g.18gb"}, ""}, // ambiguous
		{resourceslices.Device{ParentUUID: "GPU-P", Profile: "7g.141gb"}, ""},
		{resourceslices.Device{ParentUUID: "GPU-Q", Profile: "3g.71gb"}, ""},
	}
	for _, tc := range tests {
		if got := dynamicMIG(line, tc.d); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.d, got, tc.want)
		}
	}
	if got := dynamicMIG(nil, tests[0].d); got != "" {
		t.Errorf("without a line: %q", got)
	}
	// With NVML's placements, the device's placement picks among two of a
	// profile; a placement NVML's instances do not have matches none.
	at := func(v int) *int { return &v }
	placed := &probestream.Line{GPUs: []probestream.GPU{{UUID: "GPU-P", MIGMode: true, Instances: []probestream.Instance{
		{GPUInstanceID: 1, Profile: "3g.71gb", PlacementStart: at(0)}, {GPUInstanceID: 2, Profile: "3g.71gb", PlacementStart: at(4)},
		{GPUInstanceID: 9, Profile: "1g.18gb", PlacementStart: at(6)}}}}}
	for _, tc := range []struct {
		d    resourceslices.Device
		want string
	}{
		{resourceslices.Device{ParentUUID: "GPU-P", Profile: "3g.71gb", PlacementStart: 4}, "MIG-GPU-P/2/0"},
		{resourceslices.Device{ParentUUID: "GPU-P", Profile: "3g.71gb", PlacementStart: 0}, "MIG-GPU-P/1/0"},
		{resourceslices.Device{ParentUUID: "GPU-P", Profile: "3g.71gb", PlacementStart: -1}, ""},
		{resourceslices.Device{ParentUUID: "GPU-P", Profile: "1g.18gb", PlacementStart: 5}, ""},
		{resourceslices.Device{ParentUUID: "GPU-P", Profile: "1g.18gb", PlacementStart: -1}, "MIG-GPU-P/9/0"},
	} {
		if got := dynamicMIG(placed, tc.d); got != tc.want {
			t.Errorf("with placements, %+v: %q, want %q", tc.d, got, tc.want)
		}
	}
	// The device ID it gives is one the observer's MIG matcher takes.
	g := line.GPUs[0]
	if !matchMIG("MIG-GPU-P/2/0", g, g.Instances[0], nil) || matchMIG("MIG-GPU-P/2/0", g, g.Instances[1], nil) {
		t.Error("MIG-GPU-P/2/0 does not name instance 2 alone")
	}
}

// TestApplyGrants: a grant's kind, claim and part go to the reading of the
// instance its device is on; two on one instance add up, at most 1.
func TestApplyGrants(t *testing.T) {
	a := Allocation{Grants: []allocation.Grant{
		{Device: "GPU-a", Kind: wire.AllocationDRA, ClaimNamespace: "ns", ClaimName: "c1", Capacity: 0.75},
		{Device: "GPU-a", Kind: wire.AllocationDRA, ClaimNamespace: "ns", ClaimName: "c2", Capacity: 0.5},
		{Device: "GPU-b", Kind: wire.AllocationDRA, ClaimNamespace: "ns", ClaimName: "c3", Capacity: 0.1},
	}}
	var ur nodereport.UserReading
	applyGrants(&ur, a, func(d string) bool { return d == "GPU-a" })
	if ur.Allocation != "dra" || ur.ClaimNamespace != "ns" || ur.ClaimName != "c2" || ur.CapacityShare == nil || *ur.CapacityShare != 1 {
		t.Errorf("%+v (capacity %v)", ur, ur.CapacityShare)
	}
	// One container holding a time-sliced device through two claims: 1/3
	// once, not twice.
	twice := Allocation{Grants: []allocation.Grant{
		{Device: "GPU-a", Kind: wire.AllocationDRA, Shared: "d/p/gpu-0", Capacity: 1.0 / 3},
		{Device: "GPU-a", Kind: wire.AllocationDRA, Shared: "d/p/gpu-0", Capacity: 1.0 / 3}}}
	var once nodereport.UserReading
	applyGrants(&once, twice, func(d string) bool { return d == "GPU-a" })
	if once.CapacityShare == nil || *once.CapacityShare != 1.0/3 {
		t.Errorf("a shared device named twice: %v", once.CapacityShare)
	}
	var none nodereport.UserReading
	applyGrants(&none, a, func(d string) bool { return d == "GPU-z" })
	if none.Allocation != "" || none.CapacityShare != nil {
		t.Errorf("a grant of another instance applied: %+v", none)
	}
}

// TestDistrustHAMi: a HAMi annotation on a container that holds its GPU
// by the device plugin's bare UUID (not HAMi's own IDs) gives no share.
func TestDistrustHAMi(t *testing.T) {
	c := Container{Namespace: "ns", Pod: "p", Name: "train"}
	hamiAlloc := func(uuid string, capacity float64) Allocation {
		return Allocation{Container: c, Devices: []string{uuid}, Grants: []allocation.Grant{{Device: uuid, Kind: wire.AllocationHAMi, Capacity: capacity}}}
	}
	for _, tc := range []struct {
		name   string
		allocs []Allocation
		want   float64
	}{
		{"HAMi's own device IDs beside it", []Allocation{{Container: c, Devices: []string{"GPU-a-3"}}, hamiAlloc("GPU-a", 0.3)}, 0.3},
		{"the plugin's whole GPU first", []Allocation{{Container: c, Devices: []string{"GPU-A"}}, hamiAlloc("GPU-a", 0.01)}, 0},
		{"the plugin's whole GPU after", []Allocation{hamiAlloc("GPU-a", 0.01), {Container: c, Devices: []string{"GPU-a::2"}}}, 0},
		{"another container's whole GPU", []Allocation{{Container: Container{Namespace: "ns", Pod: "q", Name: "train"}, Devices: []string{"GPU-a"}}, hamiAlloc("GPU-a", 0.3)}, 0.3},
	} {
		snap := Snapshot{Allocations: tc.allocs}
		g := &grantSource{agent: &agent{log: slog.New(slog.NewTextHandler(io.Discard, nil))}, logged: map[string]bool{}}
		g.distrustHAMi(&snap)
		var got float64 = -1
		for _, a := range snap.Allocations {
			for _, gr := range a.Grants {
				got = gr.Capacity
			}
		}
		if got != tc.want {
			t.Errorf("%s: capacity %v, want %v", tc.name, got, tc.want)
		}
	}
}
