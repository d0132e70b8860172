// Package cgroupowner tells who owns a process on a GPU node — a container
// (with its runtime, container ID and, on Kubernetes, pod UID), a Slurm job,
// or a host user — from what the kernel says about it: /proc/PID/cgroup
// (split by github.com/prometheus/procfs), /proc/PID/status and
// /proc/PID/stat. Nothing a container writes about itself is read.
//
// Guarantees:
//   - A path names a container or a Slurm job only where the kubelet, the
//     runtimes and slurmstepd create their groups (the anchors of Table,
//     layout.go); below a delegated subtree (a user manager's
//     user@N.service, a rootless runtime's groups) nothing is recognised,
//     whatever its name: that is a host user keyed by (path, UID).
//   - The path used (Table.Path): the v2 line's when it names a container
//     or a Slurm job; otherwise the v1 lines of pids, memory and
//     name=systemd must agree ("/" never disagrees), and where they do not
//     the process is a host user. No line wins over another because it
//     names a container.
//   - Paths shown from inside a cgroup namespace ("/.." components) are
//     resolved to the host's root with the depth of /proc/1/cgroup's;
//     a path that does not resolve there is a host user.
//   - A process whose start time (/proc/PID/stat) differs before and after
//     its cgroup and status are read (it exited, or its PID was reused) is
//     reported as gone, never attributed to the new process's owner.
//   - The MPS server (MPSServer) is told by its executable and its
//     parent's, never by the 15-character comm.
package cgroupowner

import (
	"errors"
	"fmt"
	"sync"

	"github.com/prometheus/procfs"
)

// Kinds of owner.
const (
	KindContainer = "container"
	KindSlurm     = "slurm"
	KindHost      = "host"
)

// Runtimes as the report names them. RuntimeCRI: a kubelet path that names
// no runtime (the cgroupfs driver with containerd), until CRI says which.
const (
	RuntimeContainerd = "containerd"
	RuntimeCRIO       = "cri-o"
	RuntimeCRI        = "cri"
	RuntimeDocker     = "docker"
	RuntimePodman     = "podman"
)

// Owner is who a process belongs to. Two processes with equal Owners are
// one user of a GPU.
type Owner struct {
	Kind        string
	Runtime     string // containers
	ContainerID string // containers
	PodUID      string // Kubernetes containers
	SlurmJob    string // Slurm jobs: the job id
	Cgroup      string // host users: the cgroup path
	UID         int64  // host users: the real UID; -1 otherwise
}

// ErrGone: the process exited, or its PID now names another process.
var ErrGone = errors.New("process gone or its PID reused")

// Reader reads owners under a proc file system (the host's, or a fixture
// tree in tests).
type Reader struct {
	fs      procfs.FS
	root    string
	table   Table
	between func() // tests: runs after the first read of the start time

	depthOnce sync.Once
	depths    Depths
	own       Own
}

// NewReader opens the proc file system at root, with the layout table t.
func NewReader(root string, t Table) (*Reader, error) {
	fs, err := procfs.NewFS(root)
	if err != nil {
		return nil, fmt.Errorf("proc file system %s: %w", root, err)
	}
	return &Reader{fs: fs, root: root, table: t}, nil
}

// Depths returns the cgroup namespace depth of each hierarchy, read once
// from /proc/1/cgroup (PID 1 of the host's PID namespace, whose groups are
// at the host's top: its leading "/.." components are how far the agent's
// namespace root is below the host's; unreadable: every depth is 0), and
// the agent's own groups from /proc/self/cgroup (none in a fixture tree).
func (r *Reader) Depths() (Depths, Own) {
	r.depthOnce.Do(func() {
		r.depths, r.own = Depths{}, Own{}
		if p, err := r.fs.Proc(1); err == nil {
			if cgs, err := p.Cgroups(); err == nil {
				for _, c := range cgs {
					k, _ := dotdots(c.Path)
					for _, key := range keys(c) {
						r.depths[key] = k
					}
				}
			}
		}
		if p, err := r.fs.Self(); err == nil {
			if cgs, err := p.Cgroups(); err == nil {
				for _, c := range cgs {
					for _, key := range keys(c) {
						r.own[key] = c.Path
					}
				}
			}
		}
	})
	return r.depths, r.own
}

// StartTime is a process's start time in clock ticks since boot: with the
// PID, it names one process for as long as the machine runs.
func (r *Reader) StartTime(pid int) (uint64, error) {
	p, err := r.fs.Proc(pid)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrGone, err)
	}
	st, err := p.Stat()
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrGone, err)
	}
	return st.Starttime, nil
}

// Seen is what the kernel says of a process besides its owner: the cgroup
// path its owner was told from (resolved to the host's root where it
// could be) and its real UID, so that a caller that refuses the owner
// (the CRI check) can key it as a host user.
type Seen struct {
	Cgroup string
	UID    int64
}

// Lookup returns the owner of pid and its start time. The start time is
// read before and after the cgroup: a change is ErrGone.
func (r *Reader) Lookup(pid int) (Owner, uint64, error) {
	o, _, start, err := r.LookupSeen(pid)
	return o, start, err
}

// LookupSeen is Lookup with what the kernel said (Seen).
func (r *Reader) LookupSeen(pid int) (Owner, Seen, uint64, error) {
	before, err := r.StartTime(pid)
	if err != nil {
		return Owner{}, Seen{}, 0, err
	}
	if r.between != nil {
		r.between()
	}
	p, err := r.fs.Proc(pid)
	if err != nil {
		return Owner{}, Seen{}, 0, fmt.Errorf("%w: %v", ErrGone, err)
	}
	cgs, err := p.Cgroups()
	if err != nil {
		return Owner{}, Seen{}, 0, fmt.Errorf("%w: /proc/%d/cgroup: %v", ErrGone, pid, err)
	}
	depths, own := r.Depths()
	path, ok := r.table.Path(cgs, depths, own)
	o := Owner{Kind: KindHost, Cgroup: path, UID: -1}
	if ok {
		o = r.table.Classify(path)
	}
	seen := Seen{Cgroup: path, UID: -1}
	st, err := p.NewStatus()
	switch {
	case err == nil:
		seen.UID = int64(st.UIDs[0])
	case o.Kind == KindHost: // a host user is keyed by its UID: without it, no user
		return Owner{}, Seen{}, 0, fmt.Errorf("%w: /proc/%d/status: %v", ErrGone, pid, err)
	}
	if o.Kind == KindHost {
		o.UID = seen.UID
	}
	after, err := r.StartTime(pid)
	if err != nil {
		return Owner{}, Seen{}, 0, err
	}
	if after != before {
		return Owner{}, Seen{}, 0, fmt.Errorf("%w: pid %d started at %d, then at %d", ErrGone, pid, before, after)
	}
	return o, seen, before, nil
}
