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
)

// TestLookupLayouts reads the fixture proc tree (testdata/proc: the
// /proc/PID/cgroup files of real nodes' layouts, one PID per layout).
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
		{1012, "v2 rootless podman", ctr(RuntimePodman)},
		{1013, "v1 podman cgroupfs", ctr(RuntimePodman)},
		{1014, "v2 podman payload", ctr(RuntimePodman)},
		{1015, "v1 Slurm", Owner{Kind: KindSlurm, SlurmJob: "4242", UID: -1}},
		{1016, "v2 Slurm slurmstepd.scope", Owner{Kind: KindSlurm, SlurmJob: "4242", UID: -1}},
		{1017, "v2 login session", host("/user.slice/user-1000.slice/session-3.scope", 1000)},
		{1018, "cgroup namespace view (/.. components)", k8s(RuntimeContainerd, cid)},
		{1019, "kind: the outermost container (the node's) wins", ctr(RuntimeDocker)},
		{1020, "v1 with pids at the root: memory", k8s(RuntimeCRI, cid)},
		{1021, "v1 with pids and memory at the root: name=systemd", ctr(RuntimeDocker)},
		{1022, "the root cgroup", host("/", 0)},
		{1023, "CRI-O's conmon is no container", host("/system.slice/crio-conmon-"+cid+".scope", 1000)},
		{1024, "a pod's own cgroup (no container below)", k8s(RuntimeCRI, "")},
		{1025, "kubelet.slice nesting (kind without cgroupns)", k8s(RuntimeContainerd, cid)},
		{1026, "hybrid: v2 line at the runtime's service, v1 pids in the pod", k8s(RuntimeCRI, cid)},
		{1027, "v2 systemd guaranteed CRI-O", k8s(RuntimeCRIO, cid)},
		{1028, "v2 systemd burstable CRI-O", k8s(RuntimeCRIO, cid)},
		{1029, "v2 systemd besteffort containerd", k8s(RuntimeContainerd, cid)},
		{1030, "v1 cgroupfs guaranteed CRI-O", k8s(RuntimeCRIO, cid)},
		{1031, "v1 cgroupfs burstable CRI-O", k8s(RuntimeCRIO, cid)},
		{1032, "v1 cgroupfs besteffort (no runtime in the path)", k8s(RuntimeCRI, cid)},
	}
	r, err := NewReader("testdata/proc")
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
	r, err := NewReader(t.TempDir())
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
	r, err := NewReader(dir)
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
