package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
)

const v1Pids = "/sys/fs/cgroup/pids"

// needCgroups skips where this machine has no v1 pids hierarchy or the
// test is not root.
func needCgroups(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	if _, err := os.Stat(filepath.Join(v1Pids, "cgroup.procs")); err != nil {
		t.Skip("no v1 pids hierarchy at " + v1Pids)
	}
}

// v1Memory is this machine's v1 memory hierarchy: a process's v1 lines
// must agree (docs/node.md), so the tests place it in memory as well as in
// pids, as the kubelet and the runtimes do.
const v1Memory = "/sys/fs/cgroup/memory"

// inCgroup moves pid into the v1 pids and memory cgroups rel (created),
// removed at the end of the test.
func inCgroup(t *testing.T, pid int, rel string) {
	t.Helper()
	inHierarchy(t, v1Pids, pid, rel)
	if _, err := os.Stat(filepath.Join(v1Memory, "cgroup.procs")); err == nil {
		inHierarchy(t, v1Memory, pid, rel)
	}
}

// inHierarchy moves pid into the cgroup rel (created) of the hierarchy
// mounted at root, removed at the end of the test.
func inHierarchy(t *testing.T, root string, pid int, rel string) {
	t.Helper()
	dir := filepath.Join(root, rel)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Back to the root cgroup (the process is killed by a cleanup that
		// runs after this one), then remove the leaf and the parents the
		// test made, deepest first.
		os.WriteFile(filepath.Join(root, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644)
		removeCgroup(root, dir)
	})
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// removeCgroup removes dir and its parents below root while they are
// empty, deepest first.
func removeCgroup(root, dir string) {
	for d := dir; d != root && len(d) > len(root); d = filepath.Dir(d) {
		if os.Remove(d) != nil {
			break
		}
	}
}

// containerRoot makes a container root with the image's link layout
// (/var/run -> /run, /run/paddle-task.labels -> /dev/shm/paddle-task.labels)
// and the pause program; labels (nil: none) is what the file holds, or
// make builds something else at /dev/shm/paddle-task.labels.
func containerRoot(t *testing.T, labels []byte, make func(path string) error) string {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{"run", "dev/shm", "var", "bin"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink("/run", filepath.Join(root, "var/run")))
	must(os.Symlink("/dev/shm/paddle-task.labels", filepath.Join(root, "run/paddle-task.labels")))
	b, err := os.ReadFile(bin.pause)
	must(err)
	must(os.WriteFile(filepath.Join(root, "bin/pause"), b, 0o755))
	target := filepath.Join(root, "dev/shm/paddle-task.labels")
	switch {
	case make != nil:
		must(make(target))
	case labels != nil:
		must(os.WriteFile(target, labels, 0o644))
	}
	return root
}

// startIn starts the pause program chrooted into root (empty: on the
// host) and returns its PID, killed at the end of the test.
func startIn(t *testing.T, root string, env ...string) int {
	t.Helper()
	var cmd *exec.Cmd
	if root == "" {
		cmd = exec.Command(bin.pause)
	} else {
		cmd = exec.Command("chroot", root, "/bin/pause")
	}
	cmd.Env = env
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	// chroot execs the pause program: same PID. Wait until it has.
	waitFor(t, 5e9, "the chrooted process", func() bool {
		l, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", cmd.Process.Pid))
		return err == nil && filepath.Base(l) == "pause"
	})
	return cmd.Process.Pid
}

func userByContainer(in wire.NodeInstance, id string) *wire.NodeUser {
	for i := range in.Users {
		if in.Users[i].ContainerID == id {
			return &in.Users[i]
		}
	}
	return nil
}

// TestOnceOwnersAndDeclarations: real processes in real v1 cgroups shaped
// as the kubelet (cgroupfs driver) and Docker make them, chrooted into
// container roots with the image's link layout and hostile labels files;
// the fake NVML lists them on a whole GPU and a MIG instance.
func TestOnceOwnersAndDeclarations(t *testing.T) {
	needCgroups(t)
	const (
		podA = "7c1e5d2a-4b3f-4e6d-9a8b-1c2d3e4f5a6b"
		ctrA = "3f2a9c41d8e07b5a6c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f2a3b"
		ctrB = "b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0"
		podC = "9d8c7b6a-5f4e-4d3c-8b2a-0f1e2d3c4b5a"
		ctrC = "c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0"
		ctrD = "d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0"
		ctrE = "e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0"
	)
	host := filepath.Join(t.TempDir(), "host.labels")
	os.WriteFile(host, []byte("task_id=stolen\nproject=host\n"), 0o644)
	// A: a Kubernetes container declaring its task through the image's links.
	a := startIn(t, containerRoot(t, []byte("task_name=train\nproject=search_ranking\nowner=alice@example.com\ntask_id=task-a\n"), nil))
	inCgroup(t, a, "kubepods/burstable/pod"+podA+"/"+ctrA)
	// B: Docker, its labels link out of its root to a host file.
	b := startIn(t, containerRoot(t, nil, func(p string) error { return os.Symlink(host, p) }))
	inCgroup(t, b, "docker/"+ctrB)
	// C: a FIFO where the labels file should be (never blocks the agent).
	c := startIn(t, containerRoot(t, nil, func(p string) error { return unix.Mkfifo(p, 0o644) }))
	inCgroup(t, c, "kubepods/besteffort/pod"+podC+"/"+ctrC)
	// D: 10 MiB of labels; E: binary.
	d := startIn(t, containerRoot(t, bytes.Repeat([]byte("project=x\n"), 1<<20), nil))
	inCgroup(t, d, "docker/"+ctrD)
	e := startIn(t, containerRoot(t, []byte{0x7f, 'E', 'L', 'F', 0, 0, '=', 0xff, '\n'}, nil))
	inCgroup(t, e, "docker/"+ctrE)
	// F: a process of the host (this machine's root, the test's cgroup).
	f := startIn(t, "")
	// G: a container declaring through PADDLE_LABELS_FILE in its first
	// process's environment.
	groot := containerRoot(t, nil, nil)
	os.MkdirAll(filepath.Join(groot, "elsewhere"), 0o755)
	os.WriteFile(filepath.Join(groot, "elsewhere/my.labels"), []byte("project=env_project\ntask_id=task-g\n"), 0o644)
	g := startIn(t, groot, "PADDLE_LABELS_FILE=/elsewhere/my.labels")
	ctrG := "f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0"
	inCgroup(t, g, "docker/"+ctrG)

	state := filepath.Join(t.TempDir(), "state")
	writeState(t, state,
		fmt.Sprintf("proc 0 compute %d 1000 40", a),
		fmt.Sprintf("proc 0 graphics %d 3000 40", a), // the same process in two lists: once
		fmt.Sprintf("proc 0 compute %d 2000 5", f),
		fmt.Sprintf("proc 0 compute %d 100 0", b),
		fmt.Sprintf("proc 0 compute %d 100 0", c),
		fmt.Sprintf("proc 0 compute %d 100 0", d),
		fmt.Sprintf("proc 0 compute %d 100 0", e),
		fmt.Sprintf("proc 0 compute %d 100 0", g),
		fmt.Sprintf("proc 1/2 compute %d 4096", a),
		"proc 0 compute 999999999 100 90", // gone: not a user
		"util 0 80",
	)
	r := once(t, nodeEnv(state, "FAKE_NVML_GPUS=2", "FAKE_NVML_MIG_1=2:0:3:72192,9:0:1:17920"), "--interval", "0")
	if r.Samples != 1 || r.Node != "gpu-node-17" || r.SchemaVersion != 1 || len(r.GPUs) != 2 {
		t.Fatalf("report header: %+v", r)
	}
	if len(r.Instances) != 3 {
		t.Fatalf("instances: %+v", r.Instances)
	}
	whole := r.Instances[0]
	if whole.UUID != "GPU-a1b2c300-8f2d-4c1b-9a3e-1c2d3e4f5a00" || whole.GPUInstanceID != nil || *whole.UtilMean != 80 || whole.BusyShare != 1 {
		t.Fatalf("whole GPU: %+v", whole)
	}
	ua := userByContainer(whole, ctrA)
	if ua == nil || ua.Runtime != "cri" || ua.PodUID != podA || ua.SeenShare != 1 || *ua.SMUtilMean != 40 || ua.UsedMemoryPeakBytes != 3000 ||
		ua.Declared == nil || *ua.Declared != (wire.Declaration{TaskID: "task-a", Project: "search_ranking", Owner: "alice@example.com"}) {
		t.Errorf("container A: %+v", ua)
	}
	for _, id := range []string{ctrB, ctrC, ctrD, ctrE} {
		u := userByContainer(whole, id)
		if u == nil || u.Declared != nil || u.SeenShare != 1 {
			t.Errorf("container %s: %+v, want seen and nothing declared", id[:4], u)
		}
	}
	if u := userByContainer(whole, ctrB); u != nil && u.Runtime != "docker" {
		t.Errorf("container B runtime %q", u.Runtime)
	}
	if u := userByContainer(whole, ctrC); u != nil && u.PodUID != podC {
		t.Errorf("container C pod %q", u.PodUID)
	}
	ug := userByContainer(whole, ctrG)
	if ug == nil || ug.Declared == nil || ug.Declared.TaskID != "task-g" || ug.Declared.Project != "env_project" {
		t.Errorf("container G (PADDLE_LABELS_FILE): %+v", ug)
	}
	var hostUser *wire.NodeUser
	for i, u := range whole.Users {
		if u.ContainerID == "" {
			hostUser = &whole.Users[i]
		}
	}
	if hostUser == nil || hostUser.UID == nil || *hostUser.UID != 0 || hostUser.Cgroup == "" || *hostUser.SMUtilMean != 5 || hostUser.Declared != nil {
		t.Errorf("host user: %+v", hostUser)
	}
	if len(whole.Users) != 7 {
		t.Errorf("%d users on the whole GPU, want 7 (A..G; the gone PID dropped)", len(whole.Users))
	}
	// MIG: GPU 1's instances 2 (3 slices) and 9 (1 slice); A on 2.
	m2, m9 := r.Instances[1], r.Instances[2]
	if *m2.GPUInstanceID != 2 || m2.Profile != "3g.71gb" || m2.Slices != 3 || m2.TotalSlices != 7 || len(m2.MIGUUIDs) != 1 || m2.BusyBasis != "processes" || m2.BusyShare != 1 {
		t.Errorf("MIG instance 2: %+v", m2)
	}
	if u := userByContainer(m2, ctrA); u == nil || u.SMUtilMean != nil || u.SeenShare != 1 || u.BusyShare != 1 || u.UsedMemoryPeakBytes != 4096 {
		t.Errorf("A on MIG instance 2: %+v", u)
	}
	if *m9.GPUInstanceID != 9 || len(m9.Users) != 0 || m9.OccupiedShare != 0 || m9.BusyShare != 0 {
		t.Errorf("MIG instance 9: %+v", m9)
	}
}
