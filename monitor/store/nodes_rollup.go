package store

import (
	"math"
	"strconv"
	"strings"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
)

// GPUHour is one GPU's hour of node reports (node_gpu_hours): the seconds
// its node's reports covered it (weight 1), the weighted seconds no user
// held, and its energy.
type GPUHour struct {
	Hour                  int64
	Node, UUID, Model     string
	Observed, Unallocated float64 // seconds
	Energy                float64 // joules
}

// UserIdentity is who a user of a GPU instance is, as its node saw it,
// with what it declared (Declared false: nothing).
type UserIdentity struct {
	Runtime, ContainerID, PodUID, Namespace, Pod, Container, SlurmJob string
	UID                                                               *int64
	Cgroup                                                            string
	Declared                                                          bool
	DeclaredTaskID, DeclaredProject, DeclaredOwner                    string
}

// Key is the identity as one string (node_user_hours.user_key).
func (u *UserIdentity) Key() string {
	uid := ""
	if u.UID != nil {
		uid = strconv.FormatInt(*u.UID, 10)
	}
	decl := ""
	if u.Declared {
		decl = "d"
	}
	return strings.Join([]string{u.Runtime, u.ContainerID, u.PodUID, u.Namespace, u.Pod, u.Container, u.SlurmJob, uid, u.Cgroup,
		decl, u.DeclaredTaskID, u.DeclaredProject, u.DeclaredOwner}, "\x1f")
}

// UserHour is one user's hour on one GPU instance (node_user_hours):
// weighted seconds (a MIG instance's seconds × its share of the GPU) under
// both split rules, the busy part of each, and its share of the energy.
type UserHour struct {
	Hour          int64
	Node, UUID    string
	GPUInstanceID int64 // -1: a whole GPU
	Model         string
	Profile       string
	Slices, Total int64
	User          UserIdentity
	LastTime      int64 // the latest report time of the hour
	// FirstTime is LastTime's earliest value over the hours of a sum
	// (store.LedgerData), a day's or month's earliest report time; LastTime
	// for one hour.
	FirstTime int64
	// Grain and Span: a sum of LedgerData read at grain ("hour", "day" or
	// "month") over the part Span of the window, or one day's bucket
	// ("day"), which LedgerUserHours splits into finer rows where its
	// ties differ; "" for one hour's row (or a raw report's), which is
	// tied by its LastTime.
	Grain       string
	Span        [2]int64
	Equal, Util float64
	BusyEqual   float64
	BusyUtil    float64
	Energy      float64

	// key is User.Key() where the row was read with it (the ledger's
	// reads: a month's user is sorted, tied and counted by it several
	// times); "" where it was not (UserKey builds it then).
	key string
}

// add sums g's seconds and energy into h (a later row of h's bucket),
// taking its model: the one addition of a GPU's roll-up rows.
func (h *GPUHour) add(g GPUHour) {
	h.Observed += g.Observed
	h.Unallocated += g.Unallocated
	h.Energy += g.Energy
	h.Model = g.Model
}

// add sums u's seconds and energy into h, its report times aside (each
// caller keeps the ones its sum means): the one addition of a user's
// roll-up rows.
func (h *UserHour) add(u UserHour) {
	h.Equal += u.Equal
	h.Util += u.Util
	h.BusyEqual += u.BusyEqual
	h.BusyUtil += u.BusyUtil
	h.Energy += u.Energy
}

// UserKey is u.User.Key(), built once where u was read by the ledger.
func (u *UserHour) UserKey() string {
	if u.key != "" {
		return u.key
	}
	return u.User.Key()
}

// TieKey is TieKey(u.Node, &u.User), from u's key.
func (u *UserHour) TieKey() string { return u.Node + "\x1e" + u.UserKey() }

func identityOf(u *wire.NodeUser) UserIdentity {
	id := UserIdentity{Runtime: u.Runtime, ContainerID: u.ContainerID, PodUID: u.PodUID, Namespace: u.Namespace, Pod: u.Pod,
		Container: u.Container, SlurmJob: u.SlurmJob, UID: u.UID, Cgroup: u.Cgroup}
	if d := u.Declared; d != nil {
		id.Declared, id.DeclaredTaskID, id.DeclaredProject, id.DeclaredOwner = true, d.TaskID, d.Project, d.Owner
	}
	return id
}

// Rollup divides the kept span [start, end) of report r into the hours it
// touches and returns each GPU's and each user's part of them (the rules
// of docs/cost.md, "The ledger"):
//   - a GPU is observed in the span when one of its entries has samples;
//   - a whole GPU is one instance of weight 1; a MIG instance weighs
//     slices/total_slices × its samples / the report's samples; what no
//     instance covers is unallocated;
//   - an instance of weight w over d seconds leaves w·d·(1 − occupied_share)
//     unallocated and splits w·d·occupied_share among its users in
//     proportion to their presence max(allocated_share, seen_share)
//     (equally when every presence is 0), or, for the util rule, to
//     presence × sm_util_mean on a whole GPU (as equal when those are all
//     0, and on MIG instances); occupied time without users is
//     unallocated;
//   - a user with capacity_share c (a DRA consumable-capacity share, a
//     HAMi core share, a time-sliced 1/n) is attributed at most c·w·d of
//     the instance's occupied time; the rest is unallocated (capacityLimits);
//   - energy (the GPU's, and each instance's shared by its users in
//     proportion to their part) counts by the part of the interval kept.
//
// A GPU's Observed equals its Unallocated plus its users' Equal (and Util)
// over the same hour: the ledger's check.
func Rollup(r *wire.NodeReport, start, end int64) ([]GPUHour, []UserHour) {
	if end <= start || r.IntervalSeconds <= 0 {
		return nil, nil
	}
	energy := map[string]*float64{}
	for _, g := range r.GPUs {
		energy[g.UUID] = g.EnergyJoules
	}
	var order []string
	byGPU := map[string][]*wire.NodeInstance{}
	for i := range r.Instances {
		in := &r.Instances[i]
		if byGPU[in.UUID] == nil {
			order = append(order, in.UUID)
		}
		byGPU[in.UUID] = append(byGPU[in.UUID], in)
	}
	var gpus []GPUHour
	var users []UserHour
	for a := start; a < end; {
		hour := a - a%3600
		b := min(hour+3600, end)
		d := float64(b - a)
		part := d / float64(r.IntervalSeconds) // of the interval's energy
		for _, uuid := range order {
			ins := byGPU[uuid]
			observed := false
			for _, in := range ins {
				observed = observed || in.Samples > 0
			}
			if !observed {
				continue
			}
			g := GPUHour{Hour: hour, Node: r.Node, UUID: uuid, Model: ins[0].Name, Observed: d}
			if e := energy[uuid]; e != nil {
				g.Energy = *e * part
			}
			covered := 0.0
			idx := map[string]int{}
			for _, in := range ins {
				w := instanceWeight(r, in)
				if w <= 0 {
					continue
				}
				covered += w
				occupied := w * d * in.OccupiedShare
				g.Unallocated += w * d * (1 - in.OccupiedShare)
				if len(in.Users) == 0 {
					g.Unallocated += occupied
					continue
				}
				equal, util := splits(in)
				limits := capacityLimits(in, w*d)
				if limits != nil {
					util = equal // see capacityLimits
				}
				ie := 0.0
				if in.EnergyJoules != nil {
					ie = *in.EnergyJoules * part
				}
				gi := int64(-1)
				if in.GPUInstanceID != nil {
					gi = int64(*in.GPUInstanceID)
				}
				for j := range in.Users {
					u := &in.Users[j]
					id := identityOf(u)
					key := strconv.FormatInt(gi, 10) + "\x1e" + id.Key()
					k, ok := idx[key]
					if !ok {
						k = len(users)
						idx[key] = k
						users = append(users, UserHour{Hour: hour, Node: r.Node, UUID: uuid, GPUInstanceID: gi, Model: in.Name,
							Profile: in.Profile, Slices: int64(in.Slices), Total: int64(in.TotalSlices), User: id, LastTime: r.Time})
					}
					uh := &users[k]
					e, ut := occupied*equal[j], occupied*util[j]
					part := 1.0 // of the user's energy share kept
					if limits != nil && e > limits[j] {
						// Beyond its capacity share: unallocated.
						g.Unallocated += e - limits[j]
						part = limits[j] / e
						e, ut = limits[j], limits[j]
					}
					uh.Equal += e
					uh.Util += ut
					uh.BusyEqual += e * u.BusyShare
					uh.BusyUtil += ut * u.BusyShare
					uh.Energy += ie * equal[j] * in.OccupiedShare * part
				}
			}
			if covered < 1 {
				g.Unallocated += (1 - covered) * d
			}
			gpus = append(gpus, g)
		}
		a = b
	}
	return gpus, users
}

// capacityLimits returns, for an instance with a user holding a
// fractional allocation (capacity_share c), each user's most attributable
// seconds of the span's weighted seconds wd: c·wd for those with a share,
// unlimited for the others; nil when no user has a share below 1. On such an
// instance the util rule splits as the equal rule does, so that both rules
// leave the same time unallocated (the ledger's check holds for both).
func capacityLimits(in *wire.NodeInstance, wd float64) []float64 {
	var out []float64
	for j := range in.Users {
		c := in.Users[j].CapacityShare
		if c == nil || *c >= 1 {
			continue // a whole device limits nothing
		}
		if out == nil {
			out = make([]float64, len(in.Users))
			for k := range out {
				out[k] = math.Inf(1)
			}
		}
		out[j] = *c * wd
	}
	return out
}

// instanceWeight is an entry's share of its GPU over the report: 1 for a
// whole GPU with samples, slices/total × samples/report samples for a MIG
// instance, 0 for a MIG-mode GPU without instances.
func instanceWeight(r *wire.NodeReport, in *wire.NodeInstance) float64 {
	if in.Samples <= 0 || r.Samples <= 0 {
		return 0
	}
	if in.GPUInstanceID == nil {
		if in.TotalSlices > 0 {
			return 0
		}
		return 1
	}
	return float64(in.Slices) / float64(in.TotalSlices) * float64(in.Samples) / float64(r.Samples)
}

// splits returns each user's fraction of an instance's occupied time under
// the equal rule and the util rule; each list adds up to 1.
func splits(in *wire.NodeInstance) (equal, util []float64) {
	n := len(in.Users)
	equal, util = make([]float64, n), make([]float64, n)
	presence := make([]float64, n)
	sum := 0.0
	for j := range in.Users {
		presence[j] = max(in.Users[j].AllocatedShare, in.Users[j].SeenShare)
		sum += presence[j]
	}
	for j := range equal {
		if sum > 0 {
			equal[j] = presence[j] / sum
		} else {
			equal[j] = 1 / float64(n)
		}
	}
	weighted := make([]float64, n)
	wsum := 0.0
	if in.GPUInstanceID == nil {
		for j := range in.Users {
			if m := in.Users[j].SMUtilMean; m != nil {
				weighted[j] = presence[j] * *m
				wsum += weighted[j]
			}
		}
	}
	for j := range util {
		if wsum > 0 {
			util[j] = weighted[j] / wsum
		} else {
			util[j] = equal[j]
		}
	}
	return equal, util
}
