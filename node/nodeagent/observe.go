package nodeagent

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/probestream"
	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
	"github.com/paddle-entrypoint/paddle-entrypoint/node/allocation"
	"github.com/paddle-entrypoint/paddle-entrypoint/node/cgroupowner"
	"github.com/paddle-entrypoint/paddle-entrypoint/node/containerroot"
	"github.com/paddle-entrypoint/paddle-entrypoint/node/nodereport"
)

// The allocation types, as the sources give them.
type (
	Container  = allocation.Container
	Allocation = allocation.Allocation
	Snapshot   = allocation.Snapshot
	Source     = allocation.Source
)

// ownerEntry caches a PID's owner while its start time stays the same.
type ownerEntry struct {
	start uint64
	owner cgroupowner.Owner
	what  cgroupowner.Seen
	mps   bool // the driver's MPS server: no user
	seen  bool // in the current interval
}

// How a sample's kubepods paths are checked against CRI (docs/node.md, "Who owns each process").
const (
	criNone     = iota // no CRI on this node: paths stand
	criVerify          // CRI answered: a pod UID stands only for a container CRI lists for it
	criTrust           // CRI failing, for at most 3 samples: paths stand (counted)
	criDistrust        // CRI failing longer: no kubepods path stands
)

// maxRefusedLogged bounds the paths remembered as logged.
const maxRefusedLogged = 1024

// criView is one sample's CRI check.
type criView struct {
	mode int
	pods map[string]string // container ID -> pod UID, as CRI listed them (criVerify)
}

// declEntry is a container's declaration in the current interval.
type declEntry struct {
	decl *wire.Declaration
}

// observer turns probe lines into observations.
type observer struct {
	log        *slog.Logger
	proc       string
	labelsPath string
	owners     *cgroupowner.Reader
	roots      containerroot.Roots

	cache    map[uint32]*ownerEntry
	decls    map[string]declEntry // by container ID (or "slurm:<job>"), this interval
	reasons  map[string]string    // the reason last logged per container
	snapshot Snapshot
	byID     map[string]Container
	cri      criView
	refused  map[string]bool // kubepods paths CRI did not vouch for, logged once
}

func newObserver(log *slog.Logger, proc, labelsPath string, table cgroupowner.Table) (*observer, error) {
	r, err := cgroupowner.NewReader(proc, table)
	if err != nil {
		return nil, err
	}
	return &observer{
		log: log, proc: proc, labelsPath: labelsPath, owners: r, roots: containerroot.Roots{Proc: proc},
		cache: map[uint32]*ownerEntry{}, decls: map[string]declEntry{}, reasons: map[string]string{}, byID: map[string]Container{}, refused: map[string]bool{},
	}, nil
}

// setSnapshot installs the allocation sources' merged answer.
func (o *observer) setSnapshot(s Snapshot) {
	o.snapshot = s
	o.byID = make(map[string]Container, len(s.Containers))
	for _, c := range s.Containers {
		o.byID[c.ID] = c
	}
	for _, a := range s.Allocations {
		if _, ok := o.byID[a.Container.ID]; !ok && a.Container.ID != "" {
			o.byID[a.Container.ID] = a.Container
		}
	}
}

// newInterval forgets the declarations (re-read once per interval) and
// the owners of processes not seen in the last one.
func (o *observer) newInterval() {
	for pid, e := range o.cache {
		if !e.seen {
			delete(o.cache, pid)
		}
		e.seen = false
	}
	clear(o.decls)
}

// owner returns pid's entry, from the cache while its start time holds.
func (o *observer) owner(pid uint32) (*ownerEntry, bool) {
	start, err := o.owners.StartTime(int(pid))
	if err != nil {
		delete(o.cache, pid)
		return nil, false
	}
	if e, ok := o.cache[pid]; ok && e.start == start {
		e.seen = true
		return e, true
	}
	ow, what, start, err := o.owners.LookupSeen(int(pid))
	if err != nil {
		delete(o.cache, pid)
		return nil, false
	}
	e := &ownerEntry{start: start, owner: ow, what: what, mps: o.owners.IsMPSServer(int(pid)), seen: true}
	o.cache[pid] = e
	return e, true
}

// vouched applies this sample's CRI check to a process's owner: a pod UID
// read from a kubepods path stands only where CRI lists that container ID
// for that pod (or, while CRI fails, for at most 3 samples); otherwise the
// process is a host user keyed by its path and UID, unattributed. A path
// names a pod only where the kubelet makes its groups, and root alone can
// make groups there; CRI is the runtime's word that the container is the
// pod's.
func (o *observer) vouched(e *ownerEntry) cgroupowner.Owner {
	ow := e.owner
	if ow.Kind != cgroupowner.KindContainer || ow.PodUID == "" {
		return ow
	}
	switch o.cri.mode {
	case criNone, criTrust:
		return ow
	case criVerify:
		if ow.ContainerID != "" && o.cri.pods[ow.ContainerID] == ow.PodUID {
			return ow
		}
	}
	if !o.refused[e.what.Cgroup] {
		if len(o.refused) >= maxRefusedLogged {
			clear(o.refused) // a user making group after group costs a log line each, never memory
		}
		o.refused[e.what.Cgroup] = true
		why := "CRI does not list its container for its pod"
		if o.cri.mode == criDistrust {
			why = "CRI has not answered for more than 3 samples"
		}
		o.log.Info("a kubepods path is not vouched for: a host user", "cgroup", e.what.Cgroup, "uid", e.what.UID, "pod_uid", ow.PodUID, "container_id", ow.ContainerID, "reason", why)
	}
	return cgroupowner.Owner{Kind: cgroupowner.KindHost, Cgroup: e.what.Cgroup, UID: e.what.UID}
}

// user is the report's user for an owner, named with what the runtime
// says about its container.
func (o *observer) user(ow cgroupowner.Owner) nodereport.User {
	switch ow.Kind {
	case cgroupowner.KindHost:
		return nodereport.User{Cgroup: ow.Cgroup, UID: ow.UID}
	case cgroupowner.KindSlurm:
		return nodereport.User{Runtime: "slurm", SlurmJob: ow.SlurmJob, UID: -1}
	}
	u := nodereport.User{Runtime: ow.Runtime, ContainerID: ow.ContainerID, PodUID: ow.PodUID, UID: -1}
	if c, ok := o.byID[ow.ContainerID]; ok {
		u.Namespace, u.Pod, u.Container = c.Namespace, c.Pod, c.Name
		if u.PodUID == "" {
			u.PodUID = c.PodUID
		}
		if u.Runtime == cgroupowner.RuntimeCRI && c.Runtime != "" {
			u.Runtime = c.Runtime
		}
	}
	return u
}

func containerUser(c Container) nodereport.User {
	rt := c.Runtime
	if rt == "" {
		rt = cgroupowner.RuntimeCRI
	}
	return nodereport.User{Runtime: rt, ContainerID: c.ID, PodUID: c.PodUID, Namespace: c.Namespace, Pod: c.Pod, Container: c.Name, UID: -1}
}

// declared reads what the container of pid declared, once per interval.
func (o *observer) declared(key string, pid int) *wire.Declaration {
	if e, ok := o.decls[key]; ok {
		return e.decl
	}
	d, reason := o.readDeclaration(pid)
	o.decls[key] = declEntry{decl: d}
	if reason != "" && o.reasons[key] != reason {
		o.reasons[key] = reason
		o.log.Info("container declares nothing", "container", key, "pid", pid, "reason", reason)
	}
	return d
}

func (o *observer) readDeclaration(pid int) (*wire.Declaration, string) {
	own, err := o.roots.OwnRoot(pid)
	if err != nil {
		return nil, err.Error()
	}
	if !own {
		return nil, "no root of its own"
	}
	paths := []string{}
	if p := o.roots.LabelsPathEnv(o.roots.FirstProcess(pid)); p != "" {
		paths = append(paths, p)
	}
	paths = append(paths, o.labelsPath)
	var reason string
	for _, p := range paths {
		d, err := o.roots.Read(pid, p)
		if err == nil {
			return &wire.Declaration{TaskID: d.TaskID, Project: d.Project, Owner: d.Owner}, ""
		}
		if reason == "" || !errors.Is(err, containerroot.ErrAbsent) {
			reason = err.Error()
		}
	}
	return nil, reason
}

// pidOfContainer finds a process of a container with no GPU process (an
// allocated idle one), by its ID in /proc/*/cgroup.
func (o *observer) pidOfContainer(id string) int {
	entries, err := os.ReadDir(o.proc)
	if err != nil {
		return 0
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(o.proc, e.Name(), "cgroup"))
		if err != nil || !strings.Contains(string(b), id) {
			continue
		}
		// The kernel's owner, not the text: a host user's own group named
		// with another container's ID must not declare for it.
		if oe, ok := o.owner(uint32(pid)); ok && oe.owner.Kind == cgroupowner.KindContainer && oe.owner.ContainerID == id {
			return pid
		}
	}
	return 0
}

// observe turns one probe line into an observation.
func (o *observer) observe(line *probestream.Line) nodereport.Observation {
	var obs nodereport.Observation
	byIndex := map[string]probestream.GPU{}
	for _, g := range line.GPUs {
		byIndex[strconv.Itoa(g.Index)] = g
	}
	for _, g := range line.GPUs {
		obs.GPUs = append(obs.GPUs, nodereport.GPUReading{UUID: g.UUID, EnergyMillijoule: g.EnergyMillijoule})
		switch {
		case !g.MIGMode:
			in := nodereport.InstanceReading{Key: nodereport.InstanceKey{GPU: g.UUID, GI: -1}, Name: g.Name, MemoryTotalBytes: g.MemoryTotalBytes}
			if g.Util != nil {
				v := float64(*g.Util)
				in.Util = &v
			}
			in.Users = o.users(g.Processes, g.ProcessUtil, func(dev string) bool { return matchWhole(dev, g, byIndex) })
			obs.Instances = append(obs.Instances, in)
		case len(g.Instances) == 0:
			obs.Instances = append(obs.Instances, nodereport.InstanceReading{
				Key: nodereport.InstanceKey{GPU: g.UUID, GI: -1}, MIG: true, TotalSlices: g.TotalSlices, Name: g.Name, MemoryTotalBytes: g.MemoryTotalBytes,
			})
		default:
			for _, mi := range g.Instances {
				in := nodereport.InstanceReading{
					Key: nodereport.InstanceKey{GPU: g.UUID, GI: mi.GPUInstanceID}, MIG: true,
					Profile: mi.Profile, Slices: mi.Slices, TotalSlices: g.TotalSlices, MIGUUIDs: mi.MIGUUIDs,
					Name: g.Name, MemoryTotalBytes: mi.MemoryTotalBytes, Util: mi.Util,
				}
				in.Users = o.users(mi.Processes, false, func(dev string) bool { return matchMIG(dev, g, mi, byIndex) })
				obs.Instances = append(obs.Instances, in)
			}
		}
	}
	return obs
}

// users gathers an instance's users: owners of its processes, and the
// containers allocated a device of it.
func (o *observer) users(procs []probestream.Process, procUtil bool, allocated func(dev string) bool) []nodereport.UserReading {
	var out []nodereport.UserReading
	index := map[nodereport.User]int{}
	get := func(u nodereport.User) *nodereport.UserReading {
		if i, ok := index[u]; ok {
			return &out[i]
		}
		index[u] = len(out)
		out = append(out, nodereport.UserReading{User: u})
		return &out[len(out)-1]
	}
	for _, p := range procs {
		e, ok := o.owner(p.PID)
		if !ok || e.mps {
			continue
		}
		ow := o.vouched(e)
		ur := get(o.user(ow))
		ur.Seen = true
		ur.UsedBytes += p.UsedMemoryBytes
		if procUtil && p.SMUtil != nil {
			v := float64(*p.SMUtil)
			if ur.SMUtil != nil {
				v += *ur.SMUtil
			}
			ur.SMUtil = &v
		}
		if ur.Declared == nil {
			switch ow.Kind {
			case cgroupowner.KindContainer:
				ur.Declared = o.declared(ow.ContainerID, int(p.PID))
			case cgroupowner.KindSlurm:
				ur.Declared = o.declared("slurm:"+ow.SlurmJob, int(p.PID))
			}
		}
	}
	for _, a := range o.snapshot.Allocations {
		hit := false
		for _, d := range a.Devices {
			if allocated(d) {
				hit = true
				break
			}
		}
		if !hit {
			continue
		}
		u := containerUser(a.Container)
		// A process owner of the same container is the same user.
		for k := range index {
			if k.ContainerID != "" && k.ContainerID == a.Container.ID {
				u = k
			}
		}
		ur := get(u)
		ur.Allocated = true
		applyGrants(ur, a, allocated)
		if ur.Declared == nil && a.Container.ID != "" {
			if d, ok := o.decls[a.Container.ID]; ok {
				ur.Declared = d.decl
			} else if pid := o.pidOfContainer(a.Container.ID); pid > 0 {
				ur.Declared = o.declared(a.Container.ID, pid)
			} else {
				o.decls[a.Container.ID] = declEntry{} // no process: looked for once an interval
			}
		}
	}
	return out
}

// baseID strips a time-slicing or MPS replica's "::<n>".
func baseID(dev string) string {
	if i := strings.Index(dev, "::"); i >= 0 {
		return dev[:i]
	}
	return dev
}

func matchWhole(dev string, g probestream.GPU, byIndex map[string]probestream.GPU) bool {
	dev = baseID(dev)
	if strings.EqualFold(dev, "all") || strings.EqualFold(dev, g.UUID) {
		return true
	}
	if x, ok := byIndex[dev]; ok && x.UUID == g.UUID {
		return true
	}
	return false
}

func matchMIG(dev string, g probestream.GPU, mi probestream.Instance, byIndex map[string]probestream.GPU) bool {
	dev = baseID(dev)
	if strings.EqualFold(dev, "all") {
		return true
	}
	for _, u := range mi.MIGUUIDs {
		if strings.EqualFold(dev, u) {
			return true
		}
	}
	// The older MIG-GPU-<uuid>/<gi>/<ci>.
	if rest, ok := strings.CutPrefix(dev, "MIG-"); ok {
		parts := strings.Split(rest, "/")
		if len(parts) == 3 && strings.EqualFold(parts[0], g.UUID) && parts[1] == strconv.Itoa(mi.GPUInstanceID) {
			return true
		}
	}
	// An index or the GPU's own UUID names every instance of it
	// (NVIDIA_VISIBLE_DEVICES outside Kubernetes).
	if strings.EqualFold(dev, g.UUID) {
		return true
	}
	if x, ok := byIndex[dev]; ok && x.UUID == g.UUID {
		return true
	}
	return false
}
