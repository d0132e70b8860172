package cgroupowner

import (
	"strconv"
	"strings"
)

// The layout table. A cgroup path names a container or a Slurm job only
// where the kubelet, the container runtimes and slurmstepd create their
// groups: the places below, the anchors. Every one of them is a group only
// root can create below (the hierarchy's top, system.slice, machine.slice,
// the kubelet's cgroup root). A delegated subtree — a user manager's
// user.slice/user-N.slice/user@N.service, a rootless runtime's user
// groups — is no anchor, and nothing below it is recognised: its owner
// may create groups of any name there, named like another user's pod,
// Slurm job or container, and stays a host user keyed by path and UID.
//
//	anchor (where)                            layouts recognised there
//	the top                                   kubepods/[QOS/]pod<uid>[/<id>]                   (cgroupfs driver)
//	                                          kubepods.slice/[kubepods-QOS.slice/]kubepods[-QOS]-pod<uid>.slice[/<runtime>-<id>.scope] (systemd driver)
//	                                          docker/<id>, libpod_parent/libpod[-payload]-<id>
//	                                          slurm…/uid_<u>/job_<j>[/…]
//	the kubelet's --cgroup-root R             the kubepods layouts below R (R/kubepods/…, or R.slice/R-kubepods.slice/…)
//	system.slice                              docker-, cri-containerd-, crio-, libpod-<id>.scope; slurmstepd.scope/job_<j>[/…]
//	machine.slice                             libpod-<id>.scope, libpod-payload-<id>
//
// The outermost match wins, and only anchored matches count: every group
// below a recognised container is that container's (a kind node's
// kubelet.slice/kubelet-kubepods….slice/… pods, a Docker-in-Docker
// daemon's containers are the outer container), so naming a group there
// like another pod changes nothing.

// Table is the layout table with the node's own anchors.
type Table struct {
	// KubeletRoot is the kubelet's --cgroup-root ("" or "/": the top),
	// as the kubelet takes it: "/kubelet" (the cgroupfs driver's group,
	// the systemd driver's kubelet.slice).
	KubeletRoot string
}

// Classify is the layout table with the default anchors.
func Classify(path string) Owner { return Table{}.Classify(path) }

// Classify is the owner a cgroup path (seen from the host's root) names.
// Host users get the path in Cgroup (their UID is the caller's to fill in).
func (t Table) Classify(path string) Owner {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	if o, ok := t.top(parts); ok {
		return o
	}
	return Owner{Kind: KindHost, Cgroup: path, UID: -1}
}

// top matches the layouts anchored at the hierarchy's top.
func (t Table) top(parts []string) (Owner, bool) {
	if o, ok := kubepods(parts, ""); ok {
		return o, true
	}
	if root := t.rootParts(); len(root) > 0 && len(parts) > len(root) {
		if equal(parts[:len(root)], root) {
			if o, ok := kubepods(parts[len(root):], ""); ok {
				return o, true
			}
		}
		// The systemd driver names the root R as R.slice and prefixes its
		// children with R-: /kubelet.slice/kubelet-kubepods.slice/….
		if len(root) == 1 && parts[0] == root[0]+".slice" {
			if o, ok := kubepods(parts[1:], root[0]+"-"); ok {
				return o, true
			}
		}
	}
	if o, ok := runtimeTop(parts); ok {
		return o, true
	}
	if len(parts) >= 2 && (parts[0] == "system.slice" || parts[0] == "machine.slice") {
		if parts[0] == "system.slice" && parts[1] == "slurmstepd.scope" {
			return slurmJob(parts[2:], 0)
		}
		if rt, id, ok := containerScope(parts[1], parts[0] == "machine.slice", false); ok {
			return Owner{Kind: KindContainer, Runtime: rt, ContainerID: id, UID: -1}, true
		}
	}
	if len(parts) >= 3 && strings.HasPrefix(parts[0], "slurm") && strings.HasPrefix(parts[1], "uid_") && isDigits(strings.TrimPrefix(parts[1], "uid_")) {
		return slurmJob(parts[2:], 0)
	}
	return Owner{}, false
}

func (t Table) rootParts() []string {
	r := strings.Trim(t.KubeletRoot, "/")
	if r == "" {
		return nil
	}
	r = strings.TrimSuffix(r, ".slice")
	return strings.Split(r, "/")
}

// runtimeTop matches Docker's and podman's cgroupfs groups at the top.
func runtimeTop(parts []string) (Owner, bool) {
	if len(parts) < 2 {
		return Owner{}, false
	}
	switch {
	case parts[0] == "docker" && isID(parts[1]):
		return Owner{Kind: KindContainer, Runtime: RuntimeDocker, ContainerID: parts[1], UID: -1}, true
	case parts[0] == "libpod_parent":
		for _, p := range []string{"libpod-payload-", "libpod-"} {
			if id, ok := strings.CutPrefix(parts[1], p); ok && isID(id) {
				return Owner{Kind: KindContainer, Runtime: RuntimePodman, ContainerID: id, UID: -1}, true
			}
		}
	}
	return Owner{}, false
}

// slurmJob reads job_<j> at parts[at] (the layout fixes where it is).
func slurmJob(parts []string, at int) (Owner, bool) {
	if at >= len(parts) {
		return Owner{}, false
	}
	if j, ok := strings.CutPrefix(parts[at], "job_"); ok && isDigits(j) {
		return Owner{Kind: KindSlurm, SlurmJob: j, UID: -1}, true
	}
	return Owner{}, false
}

// kubepods matches the kubelet's groups at the start of parts: prefix is
// the systemd driver's name prefix of a non-default cgroup root
// ("kubelet-").
func kubepods(parts []string, prefix string) (Owner, bool) {
	if len(parts) < 2 {
		return Owner{}, false
	}
	var uid string
	var rest []string
	switch parts[0] {
	case "kubepods": // cgroupfs driver: kubepods/[burstable|besteffort/]pod<uid>
		if prefix != "" {
			return Owner{}, false
		}
		i := 1
		if parts[1] == "burstable" || parts[1] == "besteffort" {
			i = 2
		}
		if i >= len(parts) {
			return Owner{}, false
		}
		u, ok := strings.CutPrefix(parts[i], "pod")
		if !ok || !isUID(u) {
			return Owner{}, false
		}
		uid, rest = u, parts[i+1:]
	case prefix + "kubepods.slice": // systemd driver
		base := prefix + "kubepods"
		i := 1
		for _, qos := range []string{"burstable", "besteffort"} {
			if parts[1] == base+"-"+qos+".slice" {
				base += "-" + qos
				i = 2
			}
		}
		if i >= len(parts) {
			return Owner{}, false
		}
		name, ok := strings.CutSuffix(parts[i], ".slice")
		if !ok {
			return Owner{}, false
		}
		u, ok := strings.CutPrefix(name, base+"-pod")
		u = strings.ReplaceAll(u, "_", "-")
		if !ok || !isUID(u) {
			return Owner{}, false
		}
		uid, rest = u, parts[i+1:]
	default:
		return Owner{}, false
	}
	o := Owner{Kind: KindContainer, PodUID: uid, Runtime: RuntimeCRI, UID: -1}
	if len(rest) > 0 {
		if rt, id, ok := containerScope(rest[0], false, parts[0] == "kubepods"); ok {
			o.Runtime, o.ContainerID = rt, id
		} else if isID(rest[0]) {
			o.ContainerID = rest[0]
		}
	}
	return o, true
}

// containerScope recognises a container's own group named by its
// runtime: a systemd scope, or with bare the cgroupfs driver's name
// (CRI-O's crio-<id> in a kubepods pod); podman's payload group
// (libpod-payload-<id>, no .scope) only with payload, where podman makes
// it (machine.slice).
func containerScope(c string, payload, bare bool) (runtime, id string, ok bool) {
	if payload {
		if id, found := strings.CutPrefix(c, "libpod-payload-"); found && isID(id) {
			return RuntimePodman, id, true
		}
	}
	name, scope := strings.CutSuffix(c, ".scope")
	if !scope && !bare {
		return "", "", false
	}
	for _, r := range []struct{ prefix, runtime string }{
		{"cri-containerd-", RuntimeContainerd},
		{"crio-", RuntimeCRIO},
		{"docker-", RuntimeDocker},
		{"libpod-", RuntimePodman},
	} {
		if id, found := strings.CutPrefix(name, r.prefix); found && isID(id) {
			return r.runtime, id, true
		}
	}
	return "", "", false
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// isID: a container ID, at least 12 lower-case hex digits.
func isID(s string) bool {
	return len(s) >= 12 && len(s) <= 128 && lowerHex(s, false)
}

// isUID: a pod UID, hex digits and dashes (36 characters for a UUID; a
// static pod's is a 32-digit hash).
func isUID(s string) bool {
	return len(s) >= 32 && len(s) <= 36 && lowerHex(s, true)
}

// lowerHex: every byte of s a lower-case hex digit, or a dash where dash.
func lowerHex(s string, dash bool) bool {
	for i := 0; i < len(s); i++ {
		if !(s[i] >= '0' && s[i] <= '9' || s[i] >= 'a' && s[i] <= 'f' || dash && s[i] == '-') {
			return false
		}
	}
	return true
}

func isDigits(s string) bool {
	_, err := strconv.ParseUint(s, 10, 64)
	return err == nil
}
