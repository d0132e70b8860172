package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestOnceFixtureProc: with --proc at a fixture tree of real nodes' cgroup
// layouts (node/cgroupowner/testdata/proc), the fake NVML listing those PIDs,
// the report's users are the containers, Slurm jobs and host users the
// layouts name.
func TestOnceFixtureProc(t *testing.T) {
	const (
		cid = "3f2a9c41d8e07b5a6c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f2a3b"
		pod = "7c1e5d2a-4b3f-4e6d-9a8b-1c2d3e4f5a6b"
	)
	state := filepath.Join(t.TempDir(), "state")
	// GPU 0: the systemd-driver containerd container; GPU 1: a Slurm job;
	// GPU 2: a host login session; GPU 3: Docker, podman and CRI-O; GPU 4:
	// the impersonations of issue 37 (an unprivileged user's groups below
	// its delegated subtree named like the pod, the Slurm job and Docker
	// containers above, a delegated service's docker scope, groups where
	// no runtime makes them, v1 lines that disagree).
	lines := []string{
		"proc 0 compute 1002 100 10", "proc 1 compute 1015 100 20", "proc 2 compute 1017 100 30",
		"proc 3 compute 1009 100 1", "proc 3 compute 1011 100 2", "proc 3 compute 1003 100 3"}
	impersonations := map[int]struct {
		cgroup string
		uid    int64
	}{
		1033: {"/user.slice/user-1500.slice/user@1500.service/kubepods/burstable/pod" + pod + "/" + cid, 1500},
		1034: {"/user.slice/user-1500.slice/user@1500.service/kubepods/burstable/pod" + pod + "/" + cid, 1500},
		1035: {"/user.slice/user-2000.slice/user@2000.service/slurm/uid_2000/job_4242/step_0", 2000},
		1036: {"/user.slice/user-1500.slice/user@1500.service/docker/" + cid, 1500},
		1037: {"/user.slice/user-1500.slice/user@1500.service/app.slice/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod7c1e5d2a_4b3f_4e6d_9a8b_1c2d3e4f5a6b.slice/cri-containerd-" + cid + ".scope", 1500},
		1038: {"/system.slice/build.service/docker-" + cid + ".scope", 1500},
		1039: {"/user.slice/user-1500.slice/user@1500.service/system.slice/slurmstepd.scope/job_4242/step_0", 1500},
		1040: {"/user.slice/user-1500.slice/session-4.scope", 0},
		1043: {"/system.slice/kubepods/burstable/pod" + pod + "/" + cid, 0},
		1045: {"/user.slice/user-1500.slice/user@1500.service/user.slice/podman-1234.scope/libpod-payload-" + cid, 1500},
	}
	for pid := range impersonations {
		lines = append(lines, fmt.Sprintf("proc 4 compute %d 100 5", pid))
	}
	writeState(t, state, lines...)
	r := once(t, nodeEnv(state, "FAKE_NVML_GPUS=5", "PADDLE_NODE_PROC=node/cgroupowner/testdata/proc"), "--interval", "0")
	if len(r.Instances) != 5 {
		t.Fatalf("instances %+v", r.Instances)
	}
	type who struct{ runtime, container, pod, slurm, cgroup string }
	got := func(i int) []who {
		var out []who
		for _, u := range r.Instances[i].Users {
			out = append(out, who{u.Runtime, u.ContainerID, u.PodUID, u.SlurmJob, u.Cgroup})
		}
		return out
	}
	want := [][]who{
		{{"containerd", cid, pod, "", ""}},
		{{"slurm", "", "", "4242", ""}},
		{{"", "", "", "", "/user.slice/user-1000.slice/session-3.scope"}},
		{{"cri-o", cid, pod, "", ""}, {"docker", cid, "", "", ""}, {"podman", cid, "", "", ""}},
	}
	for i := range want {
		if fmt.Sprint(got(i)) != fmt.Sprint(want[i]) {
			t.Errorf("GPU %d users %v, want %v", i, got(i), want[i])
		}
	}
	if u := r.Instances[2].Users[0]; u.UID == nil || *u.UID != 1000 {
		t.Errorf("host user's uid %v", u.UID)
	}
	// Each impersonation is a host user of its own (1033 and 1034 share a
	// path and a UID: one user), keyed by its path and UID, never the pod,
	// job or container it is named after.
	got4 := map[string]int64{}
	for _, u := range r.Instances[4].Users {
		if u.ContainerID != "" || u.PodUID != "" || u.SlurmJob != "" || u.Runtime != "" || u.UID == nil || u.Declared != nil {
			t.Errorf("GPU 4: an impersonation attributed: %+v", u)
			continue
		}
		got4[u.Cgroup] = *u.UID
	}
	want4 := map[string]int64{}
	for _, w := range impersonations {
		want4[w.cgroup] = w.uid
	}
	if fmt.Sprint(got4) != fmt.Sprint(want4) {
		t.Errorf("GPU 4's host users %v, want %v", got4, want4)
	}
}

// TestKubeletCgroupRootFlag: --kubelet-cgroup-root /kubelet (kind's
// kubelet) anchors the kubepods groups below /kubelet and kubelet.slice;
// without it they are a host user's; a root that could climb is a usage
// error naming the flag.
func TestKubeletCgroupRootFlag(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	writeState(t, state, "proc 0 compute 1025 100 10", "proc 1 compute 1044 100 10")
	env := nodeEnv(state, "FAKE_NVML_GPUS=2", "PADDLE_NODE_PROC=node/cgroupowner/testdata/proc")
	for _, c := range []struct {
		args []string
		pod  bool
	}{{nil, false}, {[]string{"--kubelet-cgroup-root", "/kubelet"}, true}} {
		r := once(t, env, append([]string{"--interval", "0"}, c.args...)...)
		for i, in := range r.Instances {
			if len(in.Users) != 1 || (in.Users[0].PodUID == "7c1e5d2a-4b3f-4e6d-9a8b-1c2d3e4f5a6b") != c.pod || !c.pod && in.Users[0].UID == nil {
				t.Errorf("%v: GPU %d users %+v, want the pod: %v", c.args, i, in.Users, c.pod)
			}
		}
	}
	code, _, errs := runNode(t, env, "once", "--interval", "0", "--kubelet-cgroup-root", "/kubelet/../..")
	if code != 64 || !strings.Contains(errs, "--kubelet-cgroup-root") {
		t.Errorf("a root with ..: exit %d\n%s", code, errs)
	}
}
