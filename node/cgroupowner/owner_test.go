package cgroupowner

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const (
	cid        = "3f2a9c41d8e07b5a6c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f2a3b"
	fixturePod = "7c1e5d2a-4b3f-4e6d-9a8b-1c2d3e4f5a6b"
	deleg      = "/user.slice/user-1500.slice/user@1500.service" // a user manager's delegated subtree
)

// TestLookupLayouts reads the fixture proc tree (testdata/proc: the
// /proc/PID/cgroup files of real nodes' layouts, one PID per layout, made
// by testdata/mkfixture.sh), and the impersonations of issue 37.
func TestLookupLayouts(t *testing.T) {
	k8s := func(rt, id string) Owner {
		return Owner{Kind: KindContainer, Runtime: rt, ContainerID: id, PodUID: fixturePod, UID: -1}
	}
	ctr := func(rt string) Owner { return Owner{Kind: KindContainer, Runtime: rt, ContainerID: cid, UID: -1} }
	host := func(path string, uid int64) Owner { return Owner{Kind: KindHost, Cgroup: path, UID: uid} }
	cases := []struct {
		pid  int
		name string
		want Owner
	}{
		{1001, "v2 systemd guaranteed containerd", k8s(RuntimeContainerd, cid)},
		{1002, "v2 systemd burstable containerd", k8s(RuntimeContainerd, cid)},
		{1003, "v2 systemd besteffort CRI-O", k8s(RuntimeCRIO, cid)},
		{1004, "v1 cgroupfs guaranteed (no runtime in the path)", k8s(RuntimeCRI, cid)},
		{1005, "v1 cgroupfs burstable", k8s(RuntimeCRI, cid)},
		{1006, "v1 cgroupfs besteffort CRI-O", k8s(RuntimeCRIO, cid)},
		{1007, "v2 cgroupfs burstable", k8s(RuntimeCRI, cid)},
		{1008, "v1 systemd cri-dockerd", k8s(RuntimeDocker, cid)},
		{1009, "v2 Docker systemd", ctr(RuntimeDocker)},
		{1010, "v1 Docker cgroupfs", ctr(RuntimeDocker)},
		{1011, "v2 podman root, nested container group", ctr(RuntimePodman)},
		{1012, "v2 rootless podman: its user's delegated subtree, a host user", host("/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-"+cid+".scope", 1000)},
		{1013, "v1 podman cgroupfs", ctr(RuntimePodman)},
		{1014, "v2 podman payload", ctr(RuntimePodman)},
		{1015, "v1 Slurm", Owner{Kind: KindSlurm, SlurmJob: "4242", UID: -1}},
		{1016, "v2 Slurm slurmstepd.scope", Owner{Kind: KindSlurm, SlurmJob: "4242", UID: -1}},
		{1017, "v2 login session", host("/user.slice/user-1000.slice/session-3.scope", 1000)},
		{1018, "/.. components where /proc/1 is at the root: unresolvable, a host user", host("/../../../kubepods.slice/kubepods-pod7c1e5d2a_4b3f_4e6d_9a8b_1c2d3e4f5a6b.slice/cri-containerd-"+cid+".scope", 1000)},
		{1019, "kind: the outermost container (the node's) wins", ctr(RuntimeDocker)},
		{1020, "v1 with pids at the root: memory", k8s(RuntimeCRI, cid)},
		{1021, "v1 with pids and memory at the root: name=systemd", ctr(RuntimeDocker)},
		{1022, "the root cgroup", host("/", 0)},
		{1023, "CRI-O's conmon is no container", host("/system.slice/crio-conmon-"+cid+".scope", 1000)},
		{1024, "a pod's own cgroup (no container below)", k8s(RuntimeCRI, "")},
		{1025, "kind's kubelet.slice at the top without --kubelet-cgroup-root: no anchor", host("/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-pod7c1e5d2a_4b3f_4e6d_9a8b_1c2d3e4f5a6b.slice/cri-containerd-"+cid+".scope", 1000)},
		{1026, "hybrid: v2 line at the runtime's service, v1 pids in the pod", k8s(RuntimeCRI, cid)},
		{1027, "v2 systemd guaranteed CRI-O", k8s(RuntimeCRIO, cid)},
		{1028, "v2 systemd burstable CRI-O", k8s(RuntimeCRIO, cid)},
		{1029, "v2 systemd besteffort containerd", k8s(RuntimeContainerd, cid)},
		{1030, "v1 cgroupfs guaranteed CRI-O", k8s(RuntimeCRIO, cid)},
		{1031, "v1 cgroupfs burstable CRI-O", k8s(RuntimeCRIO, cid)},
		{1032, "v1 cgroupfs besteffort (no runtime in the path)", k8s(RuntimeCRI, cid)},
		// Impersonations (issue 37, F2): an unprivileged user's own groups
		// below its delegated subtree, named like a victim's pod, a Slurm
		// job or a container, are that user's.
		{1033, "v2 user@1500.service/kubepods/burstable/pod<victim>/<id>", host(deleg+"/kubepods/burstable/pod"+fixturePod+"/"+cid, 1500)},
		{1034, "v1 user@1500.service/kubepods/burstable/pod<victim>/<id>", host(deleg+"/kubepods/burstable/pod"+fixturePod+"/"+cid, 1500)},
		{1035, "v1 user@2000.service/slurm/uid_2000/job_4242/step_0", host("/user.slice/user-2000.slice/user@2000.service/slurm/uid_2000/job_4242/step_0", 2000)},
		{1036, "v2 user@1500.service/docker/<id>", host(deleg+"/docker/"+cid, 1500)},
		{1037, "v2 user@1500.service/app.slice/kubepods.slice/…/cri-containerd-<id>.scope", host(deleg+"/app.slice/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod7c1e5d2a_4b3f_4e6d_9a8b_1c2d3e4f5a6b.slice/cri-containerd-"+cid+".scope", 1500)},
		{1038, "v2 a delegated service's docker-<id>.scope", host("/system.slice/build.service/docker-"+cid+".scope", 1500)},
		{1039, "v2 user@1500.service/system.slice/slurmstepd.scope/job_4242", host(deleg+"/system.slice/slurmstepd.scope/job_4242/step_0", 1500)},
		{1040, "hybrid: v1 pids in a pod, memory and name=systemd in a session: disagree", host("/user.slice/user-1500.slice/session-4.scope", 0)},
		{1041, "hybrid: the v2 line names a container and wins", ctr(RuntimeDocker)},
		{1042, "v1 lines naming two containers disagree", host("/kubepods/burstable/pod"+fixturePod+"/"+cid, 0)},
		{1043, "kubepods below system.slice: no anchor", host("/system.slice/kubepods/burstable/pod"+fixturePod+"/"+cid, 0)},
		{1044, "kubepods below /kubelet without --kubelet-cgroup-root: no anchor", host("/kubelet/kubepods/burstable/pod"+fixturePod+"/"+cid, 0)},
		{1045, "v2 rootless podman payload below user@1500.service", host(deleg+"/user.slice/podman-1234.scope/libpod-payload-"+cid, 1500)},
		{1046, "v2 libpod-payload directly in system.slice: not where podman makes it", host("/system.slice/libpod-payload-"+cid, 0)},
	}
	r, err := NewReader("testdata/proc", Table{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, start, err := r.Lookup(c.pid)
			if err != nil {
				t.Fatalf("Lookup(%d): %v", c.pid, err)
			}
			if got != c.want {
				t.Errorf("Lookup(%d) = %+v, want %+v", c.pid, got, c.want)
			}
			if start != uint64(5000+c.pid) {
				t.Errorf("start time %d, want %d", start, 5000+c.pid)
			}
		})
	}
}

func TestLookupGone(t *testing.T) {
	r, err := NewReader(t.TempDir(), Table{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.Lookup(4242); !errors.Is(err, ErrGone) {
		t.Fatalf("Lookup of a missing PID: %v, want ErrGone", err)
	}
}

// TestLookupPIDReused: a process whose start time changes while its cgroup
// is read (its PID now names another process) is gone, not attributed.
func TestLookupPIDReused(t *testing.T) {
	dir := t.TempDir()
	pid := 77
	d := filepath.Join(dir, strconv.Itoa(pid))
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(start int) {
		stat := strconv.Itoa(pid) + " (x) S 1"
		for range 17 {
			stat += " 0"
		}
		stat += " " + strconv.Itoa(start) + strings.Repeat(" 0", 30) + "\n"
		if err := os.WriteFile(filepath.Join(d, "stat"), []byte(stat), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(100)
	if err := os.WriteFile(filepath.Join(d, "cgroup"), []byte("0::/docker/"+cid+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := NewReader(dir, Table{})
	if err != nil {
		t.Fatal(err)
	}
	o, start, err := r.Lookup(pid)
	if err != nil || start != 100 || o.ContainerID != cid {
		t.Fatalf("Lookup = %+v, %d, %v", o, start, err)
	}
	// The PID reused between the two reads of its start time.
	r.between = func() { write(200) }
	if _, _, err := r.Lookup(pid); !errors.Is(err, ErrGone) {
		t.Fatalf("Lookup with the PID reused in between: %v, want ErrGone", err)
	}
}

// TestKubeletCgroupRoot: with the kubelet's --cgroup-root /kubelet (kind),
// its kubepods groups below /kubelet and kubelet.slice are anchored.
func TestKubeletCgroupRoot(t *testing.T) {
	r, err := NewReader("testdata/proc", Table{KubeletRoot: "/kubelet"})
	if err != nil {
		t.Fatal(err)
	}
	for pid, want := range map[int]Owner{
		1025: {Kind: KindContainer, Runtime: RuntimeContainerd, ContainerID: cid, PodUID: fixturePod, UID: -1},
		1044: {Kind: KindContainer, Runtime: RuntimeCRI, ContainerID: cid, PodUID: fixturePod, UID: -1},
		1002: {Kind: KindContainer, Runtime: RuntimeContainerd, ContainerID: cid, PodUID: fixturePod, UID: -1}, // the top still counts
		1033: {Kind: KindHost, Cgroup: deleg + "/kubepods/burstable/pod" + fixturePod + "/" + cid, UID: 1500},
	} {
		if got, _, err := r.Lookup(pid); err != nil || got != want {
			t.Errorf("Lookup(%d) = %+v, %v; want %+v", pid, got, err, want)
		}
	}
}

// TestLookupNamespace: the agent in a cgroup namespace three levels below
// the host's root (testdata/procns: PID 1, the host's init, shows
// /../../../init.scope). A path climbing exactly to the host's root is
// resolved; a path inside the agent's own namespace, or climbing too
// little or too far, is a host user keyed by the path as read.
func TestLookupNamespace(t *testing.T) {
	r, err := NewReader("testdata/procns", Table{})
	if err != nil {
		t.Fatal(err)
	}
	const scope = "/kubepods.slice/kubepods-pod7c1e5d2a_4b3f_4e6d_9a8b_1c2d3e4f5a6b.slice/cri-containerd-" + cid + ".scope"
	host := func(p string, uid int64) Owner { return Owner{Kind: KindHost, Cgroup: p, UID: uid} }
	for _, c := range []struct {
		pid  int
		want Owner
	}{
		{2001, Owner{Kind: KindContainer, Runtime: RuntimeContainerd, ContainerID: cid, PodUID: fixturePod, UID: -1}},
		{2002, host(scope, 0)},
		{2003, host("/../.."+scope, 0)},
		{2004, host("/../../../.."+scope, 0)},
		{2005, host("/user.slice/user-1000.slice/session-3.scope", 1000)},
	} {
		if got, _, err := r.Lookup(c.pid); err != nil || got != c.want {
			t.Errorf("Lookup(%d) = %+v, %v; want %+v", c.pid, got, err, c.want)
		}
	}
}

// TestMPSServer: the MPS server is told by its executable and its
// parent's (links and argv[0] in a fixture tree), never by comm.
func TestMPSServer(t *testing.T) {
	dir := t.TempDir()
	proc := func(pid, ppid int, exe, argv0 string) {
		d := filepath.Join(dir, strconv.Itoa(pid))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		stat := strconv.Itoa(pid) + " (nvidia-cuda-mps) S " + strconv.Itoa(ppid) + strings.Repeat(" 0", 18) + " 100" + strings.Repeat(" 0", 30) + "\n"
		os.WriteFile(filepath.Join(d, "stat"), []byte(stat), 0o644)
		os.WriteFile(filepath.Join(d, "comm"), []byte("nvidia-cuda-mps\n"), 0o644)
		os.WriteFile(filepath.Join(d, "cmdline"), []byte(argv0+"\x00-d\x00"), 0o644)
		if exe != "" {
			os.Symlink(exe, filepath.Join(d, "exe"))
		}
	}
	proc(10, 1, "/usr/bin/nvidia-cuda-mps-control", "nvidia-cuda-mps-control")
	proc(11, 10, "/usr/bin/nvidia-cuda-mps-server", "nvidia-cuda-mps-server")
	proc(12, 1, "/home/eve/nvidia-cuda-mps-server", "nvidia-cuda-mps-server") // the name, no control daemon
	proc(13, 10, "/usr/bin/python3", "nvidia-cuda-mps-server")                // argv[0] only: exe wins
	proc(14, 10, "", "/usr/bin/nvidia-cuda-mps-server")                       // no exe link: argv[0]
	proc(15, 1, "/usr/bin/python3.11", "python3")                             // a client
	r, err := NewReader(dir, Table{})
	if err != nil {
		t.Fatal(err)
	}
	for pid, want := range map[int]bool{10: false, 11: true, 12: false, 13: false, 14: true, 15: false, 99: false} {
		if got := r.IsMPSServer(pid); got != want {
			t.Errorf("IsMPSServer(%d) = %v, want %v", pid, got, want)
		}
	}
}

// TestOwnCgroupNeverDisagrees: a v1 line at the agent's own group
// (testdata/procself: self is PID 3000, its memory line
// /agent.slice/paddle-node.service) never disagrees, as "/" never does; a
// line at any other group does.
func TestOwnCgroupNeverDisagrees(t *testing.T) {
	r, err := NewReader("testdata/procself", Table{})
	if err != nil {
		t.Fatal(err)
	}
	for pid, want := range map[int]Owner{
		3001: {Kind: KindContainer, Runtime: RuntimeCRI, ContainerID: cid, PodUID: fixturePod, UID: -1},
		3002: {Kind: KindHost, Cgroup: "/kubepods/burstable/pod" + fixturePod + "/" + cid, UID: 0},
	} {
		if got, _, err := r.Lookup(pid); err != nil || got != want {
			t.Errorf("Lookup(%d) = %+v, %v; want %+v", pid, got, err, want)
		}
	}
}
