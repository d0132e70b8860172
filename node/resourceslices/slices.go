package resourceslices

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/node/allocation"
)

// Device is one device of a ResourceSlice, as the agent needs it.
type Device struct {
	Driver, Pool, Name string
	Type               string // the "type" attribute: "gpu", "mig", "vfio", … ("" when absent)
	UUID               string // the "uuid" attribute: GPU-… or MIG-…
	ParentUUID         string // "parentUUID": the GPU a MIG device is part of
	Profile            string // "profile": a MIG device's profile (1g.18gb)
	PlacementStart     int    // a DRA-created MIG partition's first slice; -1 unknown
	Capacity           map[string]float64
}

// attribute is a DRA device attribute: one of its typed values.
type attribute struct {
	Int     *int64  `json:"int"`
	Bool    *bool   `json:"bool"`
	String  *string `json:"string"`
	Version *string `json:"version"`
}

type sliceJSON struct {
	object
	Spec struct {
		Driver string `json:"driver"`
		Pool   struct {
			Name string `json:"name"`
		} `json:"pool"`
		NodeName string `json:"nodeName"`
		Devices  []struct {
			Name       string               `json:"name"`
			Attributes map[string]attribute `json:"attributes"`
			Capacity   map[string]struct {
				Value string `json:"value"`
			} `json:"capacity"`
		} `json:"devices"`
	} `json:"spec"`
}

type claimJSON struct {
	object
	Status struct {
		Allocation *struct {
			Devices struct {
				Results []struct {
					Driver           string            `json:"driver"`
					Pool             string            `json:"pool"`
					Device           string            `json:"device"`
					ShareID          string            `json:"shareID"`
					ConsumedCapacity map[string]string `json:"consumedCapacity"`
				} `json:"results"`
			} `json:"devices"`
		} `json:"allocation"`
	} `json:"status"`
}

// result is one allocated device of a claim with what it consumed.
type result struct {
	driver, pool, device, shareID string
	consumed                      map[string]float64
}

// trailingPlacement is a DRA-created MIG device's name ending in its
// placement: "…-<start>" or "…-<start>-<size>" (gpu-0-mig-1g.18gb-3-1).
var trailingPlacement = regexp.MustCompile(`-(\d+)(?:-(\d+))?$`)

// Watcher keeps the node's ResourceSlices and the claims' allocations.
type Watcher struct {
	drivers []string
	slices  *collection
	claims  *collection
}

// New watches the ResourceSlices of node (spec.nodeName) and every
// ResourceClaim, for the drivers named. failed is told each failed list
// or watch, naming the resource.
func New(c *Client, node string, drivers []string, failed func(resource string, err error)) *Watcher {
	w := &Watcher{drivers: drivers}
	w.slices = &collection{client: c, path: "/apis/resource.k8s.io/v1/resourceslices", selector: "spec.nodeName=" + node,
		decode: w.decodeSlice, failed: func(err error) { failed("resourceslices", err) }}
	w.claims = &collection{client: c, path: "/apis/resource.k8s.io/v1/resourceclaims",
		decode: w.decodeClaim, failed: func(err error) { failed("resourceclaims", err) }}
	return w
}

// Run lists and watches until ctx ends.
func (w *Watcher) Run(ctx context.Context) {
	go w.claims.run(ctx)
	w.slices.run(ctx)
}

// WaitSynced waits until both lists have succeeded once, or ctx ends
// (the agent's first samples then already know the claims).
func (w *Watcher) WaitSynced(ctx context.Context) bool {
	for !w.slices.isSynced() || !w.claims.isSynced() {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(20 * time.Millisecond):
		}
	}
	return true
}

// Synced says whether the slices were listed once (before that, no device
// is known and none is reported unknown).
func (w *Watcher) Synced() bool { return w.slices.isSynced() }

func (w *Watcher) ours(driver string) bool { return slices.Contains(w.drivers, driver) }

func (w *Watcher) decodeSlice(raw json.RawMessage) (string, any, error) {
	var s sliceJSON
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", nil, fmt.Errorf("a ResourceSlice does not decode: %w", err)
	}
	if !w.ours(s.Spec.Driver) {
		return s.key(), nil, nil
	}
	var devs []Device
	for _, d := range s.Spec.Devices {
		dev := Device{Driver: s.Spec.Driver, Pool: s.Spec.Pool.Name, Name: d.Name, PlacementStart: -1, Capacity: map[string]float64{}}
		for k, a := range d.Attributes {
			// An attribute's name is qualified by its domain or, bare,
			// by the driver's.
			name := k
			if i := strings.LastIndexByte(k, '/'); i >= 0 {
				name = k[i+1:]
			}
			switch {
			case a.String != nil && name == "uuid":
				dev.UUID = *a.String
			case a.String != nil && name == "parentUUID":
				dev.ParentUUID = *a.String
			case a.String != nil && name == "profile":
				dev.Profile = *a.String
			case a.String != nil && name == "type":
				dev.Type = *a.String
			case a.Int != nil && name == "placementStart":
				dev.PlacementStart = int(*a.Int)
			}
		}
		if dev.PlacementStart < 0 && dev.UUID == "" && dev.ParentUUID != "" {
			if m := trailingPlacement.FindStringSubmatch(d.Name); m != nil {
				dev.PlacementStart, _ = strconv.Atoi(m[1])
			}
		}
		for k, c := range d.Capacity {
			name := k
			if i := strings.LastIndexByte(k, '/'); i >= 0 {
				name = k[i+1:]
			}
			if v, err := parseQuantity(c.Value); err == nil {
				dev.Capacity[name] = v
			}
		}
		devs = append(devs, dev)
	}
	return s.key(), devs, nil
}

func (w *Watcher) decodeClaim(raw json.RawMessage) (string, any, error) {
	var c claimJSON
	if err := json.Unmarshal(raw, &c); err != nil {
		return "", nil, fmt.Errorf("a ResourceClaim does not decode: %w", err)
	}
	if c.Status.Allocation == nil {
		return c.key(), nil, nil
	}
	var out []result
	for _, r := range c.Status.Allocation.Devices.Results {
		if !w.ours(r.Driver) || len(r.ConsumedCapacity) == 0 {
			continue
		}
		res := result{driver: r.Driver, pool: r.Pool, device: r.Device, shareID: r.ShareID, consumed: map[string]float64{}}
		for k, q := range r.ConsumedCapacity {
			name := k
			if i := strings.LastIndexByte(k, '/'); i >= 0 {
				name = k[i+1:]
			}
			if v, err := parseQuantity(q); err == nil {
				res.consumed[name] = v
			}
		}
		out = append(out, res)
	}
	if len(out) == 0 {
		return c.key(), nil, nil
	}
	return c.key(), out, nil
}

// device finds a device of the node's slices.
func (w *Watcher) device(driver, pool, name string) (Device, bool) {
	var found Device
	ok := false
	w.slices.each(func(v any) {
		for _, d := range v.([]Device) {
			if !ok && d.Driver == driver && d.Pool == pool && d.Name == name {
				found, ok = d, true
			}
		}
	})
	return found, ok
}

// Outcome is how a claim's device resolved.
type Outcome int

const (
	NotOurs    Outcome = iota // another driver's device (a NIC, …)
	Unsynced                  // the slices were never listed yet
	Unknown                   // no slice of the node names it
	VFIO                      // passed to a VM: a user of no instance
	Whole                     // a GPU by UUID
	MIG                       // a MIG device by UUID
	DynamicMIG                // a DRA-created MIG partition: parent, profile, placement
)

// Resolved is a claim's device as the agent maps it to GPU instances.
type Resolved struct {
	Outcome Outcome
	Device  Device
	// Capacity is the share's consumed capacity over the device's (the
	// largest such fraction over the capacities it consumed), in (0, 1];
	// 0 when the claim consumed no capacity of it.
	Capacity float64
}

// Resolve maps one device of a claim.
func (w *Watcher) Resolve(cd allocation.ClaimDevice) Resolved {
	if !w.ours(cd.Driver) {
		return Resolved{Outcome: NotOurs}
	}
	if !w.Synced() {
		return Resolved{Outcome: Unsynced}
	}
	d, ok := w.device(cd.Driver, cd.Pool, cd.Device)
	if !ok {
		return Resolved{Outcome: Unknown}
	}
	r := Resolved{Device: d}
	switch {
	case strings.EqualFold(d.Type, "vfio") || strings.Contains(strings.ToLower(d.Name), "vfio"):
		r.Outcome = VFIO
	case strings.HasPrefix(strings.ToUpper(d.UUID), "MIG-"):
		r.Outcome = MIG
	case d.UUID != "":
		r.Outcome = Whole
	case d.ParentUUID != "" && d.Profile != "":
		r.Outcome = DynamicMIG
	default:
		r.Outcome = Unknown
		return r
	}
	if v, ok := w.claims.get(cd.ClaimNamespace + "/" + cd.ClaimName); ok {
		for _, res := range v.([]result) {
			if res.driver != cd.Driver || res.pool != cd.Pool || res.device != cd.Device || res.shareID != cd.ShareID {
				continue
			}
			for name, used := range res.consumed {
				if total := d.Capacity[name]; total > 0 {
					r.Capacity = max(r.Capacity, min(used/total, 1))
				}
			}
		}
	}
	return r
}

// Path is the REST path the watcher lists slices with (for the docs and
// the RBAC test).
func SlicesPath(node string) string {
	return "/apis/resource.k8s.io/v1/resourceslices?" + url.Values{"fieldSelector": {"spec.nodeName=" + node}}.Encode()
}
