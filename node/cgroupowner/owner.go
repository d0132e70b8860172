// Package cgroupowner tells who owns a process on a GPU node — a container
// (with its runtime, container ID and, on Kubernetes, pod UID), a Slurm job,
// or a host user — from what the kernel says about it: /proc/PID/cgroup
// (split by github.com/prometheus/procfs), /proc/PID/status and
// /proc/PID/stat. Nothing a container writes about itself is read.
//
// Guarantees:
//   - The cgroup path used is the v2 line's when it is not "/", else the
//     first v1 line of pids, memory, name=systemd whose path is not "/" —
//     except that on a hybrid node a v1 line that names a container wins
//     over a v2 line that does not (Path); leading "/.." components (a
//     cgroup namespace's view) are dropped.
//   - The layout table (Classify) matches anywhere in the path and the
//     outermost container wins (kind, Docker-in-Docker): the kubelet's
//     three QoS classes in the systemd and cgroupfs drivers with
//     containerd, CRI-O and cri-dockerd, Docker, podman and Slurm; anything
//     else is a host user keyed by (cgroup path, UID).
//   - A process whose start time (/proc/PID/stat) differs before and after
//     its cgroup and status are read (it exited, or its PID was reused) is
//     reported as gone, never attributed to the new process's owner.
package cgroupowner

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

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
	between func() // tests: runs after the first read of the start time
}

// NewReader opens the proc file system at root.
func NewReader(root string) (*Reader, error) {
	fs, err := procfs.NewFS(root)
	if err != nil {
		return nil, fmt.Errorf("proc file system %s: %w", root, err)
	}
	return &Reader{fs: fs}, nil
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

// Lookup returns the owner of pid and its start time. The start time is
// read before and after the cgroup: a change is ErrGone.
func (r *Reader) Lookup(pid int) (Owner, uint64, error) {
	before, err := r.StartTime(pid)
	if err != nil {
		return Owner{}, 0, err
	}
	if r.between != nil {
		r.between()
	}
	p, err := r.fs.Proc(pid)
	if err != nil {
		return Owner{}, 0, fmt.Errorf("%w: %v", ErrGone, err)
	}
	cgs, err := p.Cgroups()
	if err != nil {
		return Owner{}, 0, fmt.Errorf("%w: /proc/%d/cgroup: %v", ErrGone, pid, err)
	}
	o := Classify(Path(cgs))
	if o.Kind == KindHost {
		st, err := p.NewStatus()
		if err != nil {
			return Owner{}, 0, fmt.Errorf("%w: /proc/%d/status: %v", ErrGone, pid, err)
		}
		o.UID = int64(st.UIDs[0])
	}
	after, err := r.StartTime(pid)
	if err != nil {
		return Owner{}, 0, err
	}
	if after != before {
		return Owner{}, 0, fmt.Errorf("%w: pid %d started at %d, then at %d", ErrGone, pid, before, after)
	}
	return o, before, nil
}

// Path picks the cgroup path that tells the owner, "/" when every line is
// the root: of the v2 line and the v1 lines of pids, memory and
// name=systemd, in this order, those whose path is not "/", the first that
// names a container or a Slurm job, else the first of them. On a pure v2
// or a pure v1 node this is the v2 line, or the first v1 line that is not
// the root; on a hybrid node (systemd's unified hierarchy beside v1
// controllers) a runtime that places its containers in the v1 hierarchies
// only leaves the v2 line at its own service, and the v1 line tells.
func Path(cgs []procfs.Cgroup) string {
	var candidates []string
	for _, c := range cgs {
		if c.HierarchyID == 0 && len(c.Controllers) == 0 {
			if p := clean(c.Path); p != "/" {
				candidates = append(candidates, p)
			}
		}
	}
	for _, want := range []string{"pids", "memory", "name=systemd"} {
		for _, c := range cgs {
			if c.HierarchyID == 0 {
				continue
			}
			for _, ctl := range c.Controllers {
				if ctl == want {
					if p := clean(c.Path); p != "/" {
						candidates = append(candidates, p)
					}
				}
			}
		}
	}
	for _, p := range candidates {
		if Classify(p).Kind != KindHost {
			return p
		}
	}
	if len(candidates) > 0 {
		return candidates[0]
	}
	return "/"
}

// clean drops the leading "/.." components of a path seen from another
// cgroup namespace.
func clean(p string) string {
	for strings.HasPrefix(p, "/..") {
		p = strings.TrimPrefix(p, "/..")
	}
	if p == "" {
		return "/"
	}
	return p
}

// Classify is the layout table: the owner a cgroup path names. Host users
// get the path in Cgroup (their UID is the caller's to fill in).
func Classify(path string) Owner {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for i := 0; i < len(parts); i++ {
		c := parts[i]
		next := ""
		if i+1 < len(parts) {
			next = parts[i+1]
		}
		// Kubernetes: the pod's cgroup, then the container's.
		if uid, ok := podUID(c, i > 0 && strings.HasPrefix(parts[i-1], "kubepods") || i > 1 && parts[i-2] == "kubepods"); ok {
			o := Owner{Kind: KindContainer, PodUID: uid, Runtime: RuntimeCRI, UID: -1}
			if rt, id, ok := containerScope(next); ok {
				o.Runtime, o.ContainerID = rt, id
			} else if isID(next) {
				o.ContainerID = next
			}
			return o
		}
		if rt, id, ok := containerScope(c); ok {
			return Owner{Kind: KindContainer, Runtime: rt, ContainerID: id, UID: -1}
		}
		switch {
		case c == "docker" && isID(next):
			return Owner{Kind: KindContainer, Runtime: RuntimeDocker, ContainerID: next, UID: -1}
		case c == "libpod_parent" && strings.HasPrefix(next, "libpod-") && isID(strings.TrimPrefix(next, "libpod-")):
			return Owner{Kind: KindContainer, Runtime: RuntimePodman, ContainerID: strings.TrimPrefix(next, "libpod-"), UID: -1}
		case c == "slurm" || c == "slurmstepd.scope":
			for _, p := range parts[i+1:] {
				if j, ok := strings.CutPrefix(p, "job_"); ok && isDigits(j) {
					return Owner{Kind: KindSlurm, SlurmJob: j, UID: -1}
				}
			}
		}
	}
	return Owner{Kind: KindHost, Cgroup: path, UID: -1}
}

// podUID recognises a pod's cgroup: [kubelet-]kubepods[-QOS]-pod<uid>.slice (the
// systemd driver; "_" for "-" in the UID) or pod<uid> under kubepods (the
// cgroupfs driver).
func podUID(c string, underKubepods bool) (string, bool) {
	if rest, ok := strings.CutSuffix(c, ".slice"); ok && strings.Contains(rest, "kubepods") {
		if i := strings.LastIndex(rest, "-pod"); i >= 0 {
			uid := strings.ReplaceAll(rest[i+len("-pod"):], "_", "-")
			if isUID(uid) {
				return uid, true
			}
		}
		return "", false
	}
	if uid, ok := strings.CutPrefix(c, "pod"); ok && underKubepods && isUID(uid) {
		return uid, true
	}
	return "", false
}

// containerScope recognises a container's own cgroup named by its runtime.
func containerScope(c string) (runtime, id string, ok bool) {
	name := strings.TrimSuffix(c, ".scope")
	for _, r := range []struct{ prefix, runtime string }{
		{"cri-containerd-", RuntimeContainerd},
		{"crio-", RuntimeCRIO},
		{"docker-", RuntimeDocker},
		{"libpod-payload-", RuntimePodman},
		{"libpod-", RuntimePodman},
	} {
		if id, found := strings.CutPrefix(name, r.prefix); found && isID(id) {
			return r.runtime, id, true
		}
	}
	return "", "", false
}

// isID: a container ID, at least 12 lower-case hex digits.
func isID(s string) bool {
	if len(s) < 12 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !(s[i] >= '0' && s[i] <= '9' || s[i] >= 'a' && s[i] <= 'f') {
			return false
		}
	}
	return true
}

// isUID: a pod UID, hex digits and dashes (36 characters for a UUID; a
// static pod's is a 32-digit hash).
func isUID(s string) bool {
	if len(s) < 32 || len(s) > 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !(s[i] >= '0' && s[i] <= '9' || s[i] >= 'a' && s[i] <= 'f' || s[i] == '-') {
			return false
		}
	}
	return true
}

func isDigits(s string) bool {
	_, err := strconv.ParseUint(s, 10, 64)
	return err == nil
}
