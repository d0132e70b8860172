package main

import (
	"fmt"
	"path/filepath"
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
	// GPU 2: a host login session; GPU 3: Docker, podman and CRI-O.
	writeState(t, state,
		"proc 0 compute 1002 100 10", "proc 1 compute 1015 100 20", "proc 2 compute 1017 100 30",
		"proc 3 compute 1009 100 1", "proc 3 compute 1011 100 2", "proc 3 compute 1003 100 3")
	r := once(t, nodeEnv(state, "FAKE_NVML_GPUS=4", "PADDLE_NODE_PROC=node/cgroupowner/testdata/proc"), "--interval", "0")
	if len(r.Instances) != 4 {
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
}
