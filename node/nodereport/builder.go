// Package nodereport turns the node agent's samples into one report per
// interval (wire.NodeReport, docs/node.md "The report").
//
// Guarantees:
//   - Every figure is a count of samples divided by the instance's own
//     samples: shares are in [0, 1] and an instance's samples never exceed
//     the report's.
//   - Energy tiles: a GPU's increase is measured from the last reading of
//     the previous interval (the first of this one after a start), and is
//     nil when the counter went down (a driver reload) or has no readings.
//   - The report keeps within the wire limits: at most 64 instances, 256
//     users per instance (those present in the most samples kept), and a
//     JSON body of at most wire.MaxNodeReportBytes.
package nodereport

import (
	"cmp"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
)

// User is one user of a GPU instance: a container, a Slurm job or a host
// user. Equal Users are one user.
type User struct {
	Runtime, ContainerID, PodUID, Namespace, Pod, Container, SlurmJob string
	Cgroup                                                            string // host users
	UID                                                               int64  // host users; -1 otherwise
}

// InstanceKey names a whole GPU (GI -1) or a MIG GPU instance.
type InstanceKey struct {
	GPU string
	GI  int
}

// Observation is one sample of the node.
type Observation struct {
	GPUs      []GPUReading
	Instances []InstanceReading
}

// GPUReading is one GPU's energy counter in a sample.
type GPUReading struct {
	UUID             string
	EnergyMillijoule *uint64
}

// InstanceReading is what one instance showed in a sample.
type InstanceReading struct {
	Key              InstanceKey
	MIG              bool // a MIG GPU instance, or a MIG-mode GPU without one (GI -1)
	Profile          string
	Slices           int
	TotalSlices      int
	MIGUUIDs         []string
	Name             string
	MemoryTotalBytes uint64
	Util             *float64 // device utilisation or GPM SM activity
	Users            []UserReading
}

// UserReading is one user's presence on an instance in a sample.
type UserReading struct {
	User      User
	Allocated bool     // the kubelet or the runtime gave it a device of the instance
	Seen      bool     // it had a process on the instance
	SMUtil    *float64 // its processes' summed SM utilisation; nil without a value
	UsedBytes uint64   // its processes' used memory
	Declared  *wire.Declaration
	// Where a DRA claim or a fractional plugin gave the device (not part
	// of the user's identity): the allocation's kind, the claim, and the
	// part of the instance given in this sample (nil: not fractional).
	Allocation, ClaimNamespace, ClaimName string
	CapacityShare                         *float64
}

type userAcc struct {
	allocated, seen, busy, smN int
	smSum                      float64
	memPeak                    uint64
	declared                   *wire.Declaration
	allocation, claimNS, claim string
	capN                       int
	capSum                     float64
}

type instAcc struct {
	last                        InstanceReading
	samples, utilN, busy, occup int
	utilSum                     float64
	users                       map[User]*userAcc
}

type gpuAcc struct {
	base, last *uint64 // millijoules
	readings   int     // including a base from the previous interval
	reset      bool
}

// Builder accumulates one interval's samples.
type Builder struct {
	node      string
	version   string
	start     time.Time
	samples   int
	gpus      map[string]*gpuAcc
	gpuOrder  []string
	instances map[InstanceKey]*instAcc
	lastMJ    map[string]uint64 // last reading of the previous interval, per GPU
}

// New starts the interval that begins at start.
func New(node, version string, start time.Time) *Builder {
	b := &Builder{node: node, version: version, lastMJ: map[string]uint64{}}
	b.Reset(start)
	return b
}

// Start is the beginning of the interval being built.
func (b *Builder) Start() time.Time { return b.start }

// Samples is the number of samples added since the interval began.
func (b *Builder) Samples() int { return b.samples }

// Reset begins a new interval at start, keeping each GPU's last energy
// reading as the next interval's base.
func (b *Builder) Reset(start time.Time) {
	for u, g := range b.gpus {
		if g.last != nil {
			b.lastMJ[u] = *g.last
		}
	}
	b.start = start
	b.samples = 0
	b.gpus = map[string]*gpuAcc{}
	b.gpuOrder = nil
	b.instances = map[InstanceKey]*instAcc{}
}

// Add counts one successful sample.
func (b *Builder) Add(o Observation) {
	b.samples++
	for _, g := range o.GPUs {
		acc := b.gpus[g.UUID]
		if acc == nil {
			acc = &gpuAcc{}
			if mj, ok := b.lastMJ[g.UUID]; ok {
				acc.base = &mj
				acc.readings = 1
			}
			b.gpus[g.UUID] = acc
			b.gpuOrder = append(b.gpuOrder, g.UUID)
		}
		if g.EnergyMillijoule == nil {
			continue
		}
		v := *g.EnergyMillijoule
		if acc.last != nil && v < *acc.last || acc.last == nil && acc.base != nil && v < *acc.base {
			acc.reset = true
		}
		if acc.base == nil {
			acc.base = &v
		}
		acc.last = &v
		acc.readings++
	}
	for _, in := range o.Instances {
		acc := b.instances[in.Key]
		if acc == nil {
			acc = &instAcc{users: map[User]*userAcc{}}
			b.instances[in.Key] = acc
		}
		acc.last = in
		acc.samples++
		hasProcess, present := false, false
		for _, u := range in.Users {
			hasProcess = hasProcess || u.Seen
			present = present || u.Seen || u.Allocated
		}
		busy := hasProcess
		if in.Util != nil {
			acc.utilN++
			acc.utilSum += *in.Util
			busy = *in.Util >= 1
		}
		if busy {
			acc.busy++
		}
		if present {
			acc.occup++
		}
		for _, u := range in.Users {
			ua := acc.users[u.User]
			if ua == nil {
				ua = &userAcc{}
				acc.users[u.User] = ua
			}
			if u.Allocated {
				ua.allocated++
			}
			if u.Seen {
				ua.seen++
				ua.memPeak = max(ua.memPeak, u.UsedBytes)
			}
			switch {
			case u.Seen && u.SMUtil != nil:
				ua.smN++
				ua.smSum += min(*u.SMUtil, 100)
				if *u.SMUtil >= 1 {
					ua.busy++
				}
			case u.SMUtil == nil && (u.Seen || u.Allocated) && busy:
				ua.busy++
			}
			if u.Declared != nil {
				ua.declared = u.Declared
			}
			if u.Allocation != "" {
				ua.allocation, ua.claimNS, ua.claim = u.Allocation, u.ClaimNamespace, u.ClaimName
			}
			if u.CapacityShare != nil {
				ua.capN++
				ua.capSum += *u.CapacityShare
			}
		}
	}
}

// Report closes the interval at end: the report of [Start, end).
func (b *Builder) Report(end time.Time, final bool) wire.NodeReport {
	r := wire.NodeReport{
		SchemaVersion:   wire.NodeReportSchemaVersion,
		Node:            b.node,
		Time:            end.Unix(),
		IntervalSeconds: end.Unix() - b.start.Unix(),
		AgentVersion:    b.version,
		Samples:         b.samples,
		Final:           final,
		GPUs:            []wire.NodeGPU{},
		Instances:       []wire.NodeInstance{},
	}
	energy := map[string]*float64{}
	for _, u := range b.gpuOrder {
		g := b.gpus[u]
		var e *float64
		if g.readings >= 2 && !g.reset {
			v := float64(*g.last-*g.base) / 1000
			e = &v
		}
		energy[u] = e
		r.GPUs = append(r.GPUs, wire.NodeGPU{UUID: u, EnergyJoules: e})
	}
	keys := make([]InstanceKey, 0, len(b.instances))
	for k := range b.instances {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, c InstanceKey) int {
		return cmp.Or(cmp.Compare(a.GPU, c.GPU), cmp.Compare(a.GI, c.GI))
	})
	// A GPU is whole or in MIG mode within one report: one that had MIG
	// instances in the interval (re-partitioned, or its mode changed) is
	// reported by them alone.
	hasMIG := map[string]bool{}
	for _, k := range keys {
		if k.GI >= 0 {
			hasMIG[k.GPU] = true
		}
	}
	keys = slices.DeleteFunc(keys, func(k InstanceKey) bool { return k.GI < 0 && hasMIG[k.GPU] })
	if len(keys) > wire.MaxNodeInstances {
		keys = keys[:wire.MaxNodeInstances]
	}
	for _, k := range keys {
		acc := b.instances[k]
		in := acc.last
		n := float64(acc.samples)
		ni := wire.NodeInstance{
			UUID:             k.GPU,
			Profile:          in.Profile,
			Slices:           in.Slices,
			TotalSlices:      in.TotalSlices,
			MIGUUIDs:         append([]string{}, in.MIGUUIDs...),
			Name:             in.Name,
			MemoryTotalBytes: in.MemoryTotalBytes,
			Samples:          acc.samples,
			BusyShare:        float64(acc.busy) / n,
			BusyBasis:        wire.BusyBasisProcesses,
			OccupiedShare:    float64(acc.occup) / n,
			Users:            []wire.NodeUser{},
		}
		ni.GPUInstanceID = known(k.GI)
		if ni.UtilMean = mean(acc.utilSum, acc.utilN); ni.UtilMean != nil {
			ni.BusyBasis = wire.BusyBasisUtilization
		}
		if e := energy[k.GPU]; e != nil {
			v := *e
			if in.MIG {
				if in.TotalSlices > 0 && k.GI >= 0 {
					v = v * float64(in.Slices) / float64(in.TotalSlices)
					ni.EnergyJoules, ni.EnergyEstimated = &v, true
				}
			} else {
				ni.EnergyJoules = &v
			}
		}
		users := make([]User, 0, len(acc.users))
		for u := range acc.users {
			users = append(users, u)
		}
		presence := func(u User) int { a := acc.users[u]; return max(a.allocated, a.seen) }
		slices.SortFunc(users, func(a, c User) int {
			return cmp.Or(-cmp.Compare(presence(a), presence(c)), compareUsers(a, c))
		})
		if len(users) > wire.MaxInstanceUsers {
			users = users[:wire.MaxInstanceUsers]
		}
		for _, u := range users {
			a := acc.users[u]
			nu := wire.NodeUser{
				Runtime: text(u.Runtime), ContainerID: text(u.ContainerID), PodUID: text(u.PodUID),
				Namespace: text(u.Namespace), Pod: text(u.Pod), Container: text(u.Container), SlurmJob: text(u.SlurmJob),
				Cgroup:              text(u.Cgroup),
				AllocatedShare:      float64(a.allocated) / n,
				SeenShare:           float64(a.seen) / n,
				BusyShare:           float64(a.busy) / n,
				UsedMemoryPeakBytes: a.memPeak,
				Declared:            a.declared,
			}
			nu.UID, nu.SMUtilMean = known(u.UID), mean(a.smSum, a.smN)
			nu.Allocation, nu.ClaimNamespace, nu.ClaimName = a.allocation, text(a.claimNS), text(a.claim)
			if a.capN > 0 {
				// The mean part over the samples it was given one in.
				c := min(a.capSum/float64(a.capN), 1)
				nu.CapacityShare = &c
			}
			ni.Users = append(ni.Users, nu)
		}
		r.Instances = append(r.Instances, ni)
	}
	fit(&r)
	return r
}

// known is v, or nil for the -1 that stands for none (a whole GPU's GI,
// a user that is no host user).
func known[T int | int64](v T) *T {
	if v < 0 {
		return nil
	}
	return &v
}

// mean is sum over n samples, or nil over none.
func mean(sum float64, n int) *float64 {
	if n == 0 {
		return nil
	}
	m := sum / float64(n)
	return &m
}

// MaxTextBytes is the report's bound on a text field.
const MaxTextBytes = 1024

// text keeps a name the runtime or the kernel gave within the report's
// rules for text (no control character, at most MaxTextBytes): a
// control character becomes "?", a longer name is cut at a character
// boundary. Nothing a user names can then make the monitor refuse the
// node's report.
func text(s string) string {
	if strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		s = strings.Map(func(r rune) rune {
			if r < 0x20 || r == 0x7f {
				return '?'
			}
			return r
		}, s)
	}
	if len(s) > MaxTextBytes {
		s = strings.ToValidUTF8(s[:MaxTextBytes], "")
	}
	return s
}

func compareUsers(a, c User) int {
	return cmp.Or(cmp.Compare(a.Runtime, c.Runtime), cmp.Compare(a.ContainerID, c.ContainerID),
		cmp.Compare(a.PodUID, c.PodUID), cmp.Compare(a.SlurmJob, c.SlurmJob),
		cmp.Compare(a.Cgroup, c.Cgroup), cmp.Compare(a.UID, c.UID))
}

// fit drops the least present users until the body is within the limit.
func fit(r *wire.NodeReport) {
	for limit := wire.MaxInstanceUsers / 2; limit > 0; limit /= 2 {
		b, err := json.Marshal(r)
		if err != nil || len(b) <= wire.MaxNodeReportBytes {
			return
		}
		for i := range r.Instances {
			if len(r.Instances[i].Users) > limit {
				r.Instances[i].Users = r.Instances[i].Users[:limit]
			}
		}
	}
}
