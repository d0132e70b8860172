package main

// Who pays cannot be redirected from the node (issue 37): owners are
// believed only where the kernel and the runtime vouch for them. Real
// processes in real cgroups of this machine's hierarchies, an
// unprivileged user's own delegated groups (setpriv to another UID), a
// cgroup namespace of the agent's own (unshare -C), the real
// pod-resources and CRI gRPC APIs, and processes named as the driver's
// MPS daemons.

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	cri "k8s.io/cri-api/pkg/apis/runtime/v1"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
)

// sharedPause is the pause program where any user may run it (the
// build directory is the test's own, mode 0700).
func sharedPause(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pn-pause-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	b, err := os.ReadFile(bin.pause)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "pause")
	if err := os.WriteFile(p, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// delegate makes the user manager's group of uid in the v1 pids and
// memory hierarchies, as systemd does for user@UID.service, and hands it
// to uid (Delegate=yes): the user may create groups of any name below.
// It returns the group's path.
func delegate(t *testing.T, uid int) string {
	t.Helper()
	rel := fmt.Sprintf("user.slice/user-%d.slice/user@%d.service", uid, uid)
	for _, root := range []string{v1Pids, v1Memory} {
		dir := filepath.Join(root, rel)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { removeTree(root, dir) })
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		os.Chown(dir, uid, uid)
		for _, e := range entries {
			if !e.IsDir() {
				os.Chown(filepath.Join(dir, e.Name()), uid, uid)
			}
		}
	}
	return "/" + rel
}

// removeTree removes the cgroup dir with every group below it, deepest
// first, then its empty parents below root.
func removeTree(root, dir string) {
	var dirs []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
	for _, d := range dirs {
		os.Remove(d)
	}
	removeCgroup(root, filepath.Dir(dir))
}

// startAs starts, as the unprivileged uid, a shell that creates the group
// rel (below its delegated subtree) in the v1 pids and memory
// hierarchies, moves itself there and becomes the pause program. It
// returns the PID, killed at the end of the test.
func startAs(t *testing.T, uid int, pause, rel string) int {
	t.Helper()
	script := fmt.Sprintf(`set -e
for h in %s %s; do mkdir -p "$h%s"; echo $$ > "$h%s/cgroup.procs"; done
exec %s`, v1Pids, v1Memory, rel, rel, pause)
	id := strconv.Itoa(uid)
	cmd := exec.Command("setpriv", "--reuid="+id, "--regid="+id, "--clear-groups", "sh", "-c", script)
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		for _, h := range []string{v1Pids, v1Memory} {
			os.WriteFile(filepath.Join(h, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644)
		}
	})
	pid := cmd.Process.Pid
	waitFor(t, 5*time.Second, "the user's process in its own group", func() bool {
		l, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		if err != nil {
			t.Fatalf("uid %d could not make %s: %s", uid, rel, stderr.String())
		}
		return filepath.Base(l) == "pause"
	})
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if !strings.Contains(string(b), "pids:"+rel+"\n") {
		t.Fatalf("uid %d's process is not in %s:\n%s", uid, rel, b)
	}
	return pid
}

func needSetpriv(t *testing.T) {
	t.Helper()
	needCgroups(t)
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("needs setpriv (util-linux)")
	}
	if _, err := os.Stat(filepath.Join(v1Memory, "cgroup.procs")); err != nil {
		t.Skip("no v1 memory hierarchy at " + v1Memory)
	}
}

// kubeletFor serves pod-resources (pods) and CRI (containers) on unix
// sockets and returns the variables naming them.
func kubeletFor(t *testing.T, pods []*podresourcesapi.PodResources, rt cri.RuntimeServiceServer) []string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pn-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	prSock, criSock := filepath.Join(dir, "kubelet.sock"), filepath.Join(dir, "containerd.sock")
	serveGRPC(t, prSock, func(s *grpc.Server) {
		podresourcesapi.RegisterPodResourcesListerServer(s, &kubeletServer{pods: pods})
	})
	serveGRPC(t, criSock, func(s *grpc.Server) { cri.RegisterRuntimeServiceServer(s, rt) })
	return []string{"PADDLE_NODE_POD_RESOURCES_SOCKET=" + prSock, "PADDLE_NODE_CRI_SOCKET=" + criSock}
}

func hostUsers(in wire.NodeInstance) map[string]int64 {
	out := map[string]int64{}
	for _, u := range in.Users {
		if u.ContainerID == "" && u.PodUID == "" && u.SlurmJob == "" && u.Runtime == "" && u.UID != nil && u.Declared == nil {
			out[u.Cgroup] = *u.UID
		}
	}
	return out
}

func usersText(in wire.NodeInstance) string {
	b, _ := json.Marshal(in.Users)
	return string(b)
}

// TestHostileNeighbour (issue 37, F2): unprivileged host users (UIDs 1500
// and 2000, each with the delegated subtree systemd gives a user manager)
// create groups named like a victim pod's container (its own container
// ID, and another), like a Slurm job running on the node, and like a
// Docker container, move their own processes there and use GPUs 2 and 3.
// With CRI answering. The victims' users are the same, byte for byte, as
// before the neighbours came; each neighbour is a host user keyed by its
// own path and UID, unattributed and visible.
func TestHostileNeighbour(t *testing.T) {
	needSetpriv(t)
	const (
		podV  = "0b1c2d3e-4f50-4617-8899-aabbccddeeff"
		ctrV  = "a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7"
		fresh = "e9e9e9e9e9e9e9e9e9e9e9e9e9e9e9e9e9e9e9e9e9e9e9e9e9e9e9e9e9e9e9e9"
		ctrD  = "d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4"
		gpu0  = "GPU-a1b2c300-8f2d-4c1b-9a3e-1c2d3e4f5a00"
	)
	v := startIn(t, containerRoot(t, []byte("project=search_ranking\ntask_id=task-v\nowner=victim@example.com\n"), nil))
	inCgroup(t, v, "kubepods/burstable/pod"+podV+"/"+ctrV)
	s := startIn(t, "")
	inCgroup(t, s, "slurm/uid_2000/job_4242/step_0")
	state := filepath.Join(t.TempDir(), "state")
	env := nodeEnv(state, append(kubeletFor(t,
		[]*podresourcesapi.PodResources{pod("team-v", "train-0", ctr("paddle", "nvidia.com/gpu", gpu0))},
		&runtimeServer{containers: []*cri.Container{criContainer(ctrV, podV, "team-v", "train-0", "paddle", cri.ContainerState_CONTAINER_RUNNING)}}),
		"FAKE_NVML_GPUS=4")...)
	victims := []string{fmt.Sprintf("proc 0 compute %d 1000 40", v), fmt.Sprintf("proc 1 compute %d 2000 30", s), "util 0 40", "util 1 30"}
	writeState(t, state, victims...)
	before := once(t, env, "--interval", "0")

	pause := sharedPause(t)
	d1500, d2000 := delegate(t, 1500), delegate(t, 2000)
	neighbours := map[string]int64{
		d1500 + "/kubepods/burstable/pod" + podV + "/" + ctrV:  1500, // the victim's own container ID
		d1500 + "/kubepods/burstable/pod" + podV + "/" + fresh: 1500,
		d2000 + "/slurm/uid_2000/job_4242/step_0":              2000,
		d1500 + "/docker/" + ctrD:                              1500,
		d1500 + "/system.slice/docker-" + ctrD + ".scope":      1500,
	}
	lines := append([]string(nil), victims...)
	gpu := 2
	for rel, uid := range neighbours {
		n := startAs(t, int(uid), pause, rel)
		lines = append(lines, fmt.Sprintf("proc %d compute %d 30000 90", gpu, n))
		gpu = 5 - gpu // GPUs 2 and 3
	}
	writeState(t, state, append(lines, "util 2 90", "util 3 90")...)
	after := once(t, env, "--interval", "0")

	for i := 0; i < 2; i++ {
		if !reflect.DeepEqual(before.Instances[i].Users, after.Instances[i].Users) {
			t.Errorf("GPU %d (a victim's): users %s before the neighbours, %s after", i, usersText(before.Instances[i]), usersText(after.Instances[i]))
		}
	}
	if u := userIn(after.Instances[0], "train-0"); u == nil || u.PodUID != podV || u.ContainerID != ctrV || u.Declared == nil || u.Declared.TaskID != "task-v" || *u.SMUtilMean != 40 {
		t.Errorf("the victim pod: %s", usersText(after.Instances[0]))
	}
	if u := after.Instances[1].Users; len(u) != 1 || u[0].SlurmJob != "4242" || *u[0].SMUtilMean != 30 {
		t.Errorf("the victim Slurm job: %s", usersText(after.Instances[1]))
	}
	got := hostUsers(after.Instances[2])
	for k, v := range hostUsers(after.Instances[3]) {
		got[k] = v
	}
	if fmt.Sprint(got) != fmt.Sprint(neighbours) || len(after.Instances[2].Users)+len(after.Instances[3].Users) != len(neighbours) {
		t.Errorf("the neighbours: GPU 2 %s, GPU 3 %s; want host users %v", usersText(after.Instances[2]), usersText(after.Instances[3]), neighbours)
	}
}

// TestHybridLines (issue 37, F2; docs/node.md): on this hybrid machine
// (the unified v2 hierarchy beside v1 controllers) a v2 line that names a
// container wins; otherwise the v1 lines must agree, and where pids names
// a pod while memory names a login session, the process is a host user. A
// line at "/" or at the agent's own group never disagrees.
func TestHybridLines(t *testing.T) {
	needSetpriv(t)
	const v2 = "/sys/fs/cgroup/unified"
	if _, err := os.Stat(filepath.Join(v2, "cgroup.procs")); err != nil {
		t.Skip("no unified v2 hierarchy at " + v2)
	}
	const (
		pod  = "5a5a5a5a-1b1b-4c2c-8d3d-4e4e4e4e4e4e"
		ctrA = "aa11aa11aa11aa11aa11aa11aa11aa11aa11aa11aa11aa11aa11aa11aa11aa11"
		ctrB = "bb22bb22bb22bb22bb22bb22bb22bb22bb22bb22bb22bb22bb22bb22bb22bb22"
	)
	a := startIn(t, "") // v2 in a Docker scope, v1 in a pod: the v2 line wins
	inHierarchy(t, v2, a, "system.slice/docker-"+ctrA+".scope")
	inCgroup(t, a, "kubepods/burstable/pod"+pod+"/"+ctrB)
	b := startIn(t, "") // v2 at the runtime's service, v1 pids in the pod, memory in a session
	inHierarchy(t, v2, b, "system.slice/containerd.service")
	inHierarchy(t, v1Pids, b, "kubepods/burstable/pod"+pod+"/"+ctrB)
	inHierarchy(t, v1Memory, b, "user.slice/user-1500.slice/session-9.scope")
	c := startIn(t, "") // v2 at the runtime's service, every v1 line in the pod: agreed
	inHierarchy(t, v2, c, "system.slice/containerd.service")
	inCgroup(t, c, "kubepods/burstable/pod"+pod+"/"+ctrB)
	d := startIn(t, "") // v1 pids in the pod; memory where the agent itself is: no disagreement
	inHierarchy(t, v1Pids, d, "kubepods/burstable/pod"+pod+"/"+ctrB)
	state := filepath.Join(t.TempDir(), "state")
	writeState(t, state, fmt.Sprintf("proc 0 compute %d 100 10", a), fmt.Sprintf("proc 1 compute %d 100 20", b), fmt.Sprintf("proc 2 compute %d 100 30", c), fmt.Sprintf("proc 3 compute %d 100 40", d))
	r := once(t, nodeEnv(state, "FAKE_NVML_GPUS=4"), "--interval", "0")
	if u := r.Instances[0].Users; len(u) != 1 || u[0].Runtime != "docker" || u[0].ContainerID != ctrA || u[0].PodUID != "" {
		t.Errorf("v2 names a Docker container, v1 a pod: %s, want the Docker container", usersText(r.Instances[0]))
	}
	if got := hostUsers(r.Instances[1]); len(r.Instances[1].Users) != 1 || got["/system.slice/containerd.service"] != 0 || len(got) != 1 {
		t.Errorf("v1 pids in a pod, memory in a session: %s, want a host user keyed by the v2 path", usersText(r.Instances[1]))
	}
	if u := r.Instances[2].Users; len(u) != 1 || u[0].PodUID != pod || u[0].ContainerID != ctrB {
		t.Errorf("v1 lines agreeing on a pod: %s, want the pod's container", usersText(r.Instances[2]))
	}
	if u := r.Instances[3].Users; len(u) != 1 || u[0].PodUID != pod || u[0].ContainerID != ctrB {
		t.Errorf("v1 pids in a pod, memory at the agent's own group: %s, want the pod's container", usersText(r.Instances[3]))
	}
}

// TestCgroupNamespace (issue 37, F2; docs/node.md): the agent runs in a
// cgroup namespace of its own (unshare -C, two levels below the host's
// root in pids and memory), so it reads other processes' paths with "/.."
// components. A pod's process is resolved to the host's root and is the
// pod's; a process in a group named like that pod inside the agent's own
// namespace cannot be placed on the host and is a host user.
func TestCgroupNamespace(t *testing.T) {
	needSetpriv(t)
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("needs unshare (util-linux)")
	}
	const (
		pod = "6c6c6c6c-2d2d-4e3e-8f4f-505050505050"
		ctr = "cc33cc33cc33cc33cc33cc33cc33cc33cc33cc33cc33cc33cc33cc33cc33cc33"
		ns  = "paddle-agent-ns/agent"
	)
	v := startIn(t, "")
	inCgroup(t, v, "kubepods/burstable/pod"+pod+"/"+ctr)
	inner := startIn(t, "")
	inCgroup(t, inner, ns+"/kubepods/burstable/pod"+pod+"/"+ctr)
	state := filepath.Join(t.TempDir(), "state")
	writeState(t, state, fmt.Sprintf("proc 0 compute %d 100 10", v), fmt.Sprintf("proc 1 compute %d 100 20", inner))
	for _, h := range []string{v1Pids, v1Memory} {
		os.MkdirAll(filepath.Join(h, ns), 0o755)
		t.Cleanup(func() { removeTree(h, filepath.Join(h, ns)) })
	}
	// The shell joins the agent's groups, then unshare gives the agent a
	// cgroup namespace rooted there.
	script := fmt.Sprintf(`echo $$ > %s/%s/cgroup.procs && echo $$ > %s/%s/cgroup.procs && exec unshare -C %s once --interval 0`, v1Pids, ns, v1Memory, ns, bin.node)
	cmd := exec.Command("sh", "-c", script)
	cmd.Env = nodeEnv(state, "FAKE_NVML_GPUS=2")
	out, err := cmd.Output()
	var errs []byte
	if ee, ok := err.(*exec.ExitError); ok {
		errs = ee.Stderr
	}
	var r wire.NodeReport
	if err != nil || json.Unmarshal(out, &r) != nil || len(r.Instances) != 2 {
		t.Fatalf("once in a cgroup namespace: %v\n%s\n%s", err, out, errs)
	}
	if u := r.Instances[0].Users; len(u) != 1 || u[0].PodUID != pod || u[0].ContainerID != ctr {
		t.Errorf("the pod's process seen from the namespace: %s, want the pod's container", usersText(r.Instances[0]))
	}
	inPath := "/kubepods/burstable/pod" + pod + "/" + ctr // as the agent reads it: inside its namespace
	if got := hostUsers(r.Instances[1]); len(r.Instances[1].Users) != 1 || len(got) != 1 || got[inPath] != 0 {
		t.Errorf("a group named like the pod inside the agent's namespace: %s, want a host user keyed by %s", usersText(r.Instances[1]), inPath)
	}
}

// TestCRIVouches (issue 37, F2; docs/node.md): where CRI answers, a pod
// UID read from a kubepods path stands only if CRI lists that container
// ID for that pod: a group made under the pod with a container ID CRI does
// not know, and one naming the pod with a container CRI lists for another
// pod, are host users.
func TestCRIVouches(t *testing.T) {
	needCgroups(t)
	const (
		podV = "7d7d7d7d-3e3e-4f4f-8a5a-616161616161"
		podQ = "8e8e8e8e-4f4f-4a5a-9b6b-727272727272"
		ctrV = "dd44dd44dd44dd44dd44dd44dd44dd44dd44dd44dd44dd44dd44dd44dd44dd44"
		ctrX = "ee55ee55ee55ee55ee55ee55ee55ee55ee55ee55ee55ee55ee55ee55ee55ee55"
		ctrQ = "ff66ff66ff66ff66ff66ff66ff66ff66ff66ff66ff66ff66ff66ff66ff66ff66"
	)
	v := startIn(t, "")
	inCgroup(t, v, "kubepods/burstable/pod"+podV+"/"+ctrV)
	x := startIn(t, "")
	inCgroup(t, x, "kubepods/burstable/pod"+podV+"/"+ctrX)
	y := startIn(t, "")
	inCgroup(t, y, "kubepods/besteffort/pod"+podV+"/"+ctrQ)
	env := kubeletFor(t, nil, &runtimeServer{containers: []*cri.Container{
		criContainer(ctrV, podV, "team-v", "train-0", "paddle", cri.ContainerState_CONTAINER_RUNNING),
		criContainer(ctrQ, podQ, "team-q", "other-0", "paddle", cri.ContainerState_CONTAINER_RUNNING),
	}})
	state := filepath.Join(t.TempDir(), "state")
	writeState(t, state, fmt.Sprintf("proc 0 compute %d 100 10", v), fmt.Sprintf("proc 1 compute %d 100 20", x), fmt.Sprintf("proc 2 compute %d 100 30", y))
	code, out, errs := runNode(t, nodeEnv(state, append(env, "FAKE_NVML_GPUS=3")...), "once", "--interval", "0")
	var r wire.NodeReport
	if code != 0 || json.Unmarshal([]byte(out), &r) != nil || len(r.Instances) != 3 {
		t.Fatalf("once: exit %d\n%s\n%s", code, out, errs)
	}
	if u := r.Instances[0].Users; len(u) != 1 || u[0].PodUID != podV || u[0].ContainerID != ctrV || u[0].Pod != "train-0" {
		t.Errorf("the container CRI lists for its pod: %s", usersText(r.Instances[0]))
	}
	for i, c := range []struct{ path, ctr string }{{"/kubepods/burstable/pod" + podV + "/" + ctrX, ctrX}, {"/kubepods/besteffort/pod" + podV + "/" + ctrQ, ctrQ}} {
		if got := hostUsers(r.Instances[i+1]); len(r.Instances[i+1].Users) != 1 || len(got) != 1 || got[c.path] != 0 {
			t.Errorf("GPU %d: %s, want a host user keyed by %s", i+1, usersText(r.Instances[i+1]), c.path)
		}
		if !strings.Contains(errs, "not vouched for") || !strings.Contains(errs, c.ctr) {
			t.Errorf("the log does not name the refused path of %s:\n%s", c.ctr[:8], errs)
		}
	}
}

// failingRuntime is a CRI that answers nothing.
type failingRuntime struct {
	cri.UnimplementedRuntimeServiceServer
}

// TestCRIFailing (issue 37, F2; docs/node.md): while CRI fails, kubepods
// paths are trusted for at most 3 samples in a row, counted in
// paddle_node_cri_unverified_samples_total; after those the pod's process
// is a host user until CRI answers again.
func TestCRIFailing(t *testing.T) {
	needCgroups(t)
	const (
		pod = "9f9f9f9f-5a5a-4b6b-8c7c-838383838383"
		ctr = "ab77ab77ab77ab77ab77ab77ab77ab77ab77ab77ab77ab77ab77ab77ab77ab77"
	)
	v := startIn(t, "")
	inCgroup(t, v, "kubepods/burstable/pod"+pod+"/"+ctr)
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	writeState(t, state, fmt.Sprintf("proc 0 compute %d 100 10", v))
	rcv := newReceiver(t, nil)
	listen := freeAddr(t)
	env := nodeEnv(state, append(kubeletFor(t, nil, &failingRuntime{}),
		"PADDLE_MONITOR_URL="+rcv.URL, "PADDLE_NODE_REPORT_SPOOL="+filepath.Join(dir, "r.db"),
		"PADDLE_NODE_INTERVAL=5s", "PADDLE_NODE_SAMPLE=1s", "PADDLE_NODE_LISTEN="+listen)...)
	p := startNode(t, env)
	waitFor(t, 30*time.Second, "a full report", func() bool {
		return slices.ContainsFunc(rcv.reports(), func(r wire.NodeReport) bool { return r.Samples >= 5 })
	})
	m := metricsText(t, listen)
	if n := metricValue(m, "paddle_node_cri_unverified_samples_total"); n != 3 {
		t.Errorf("paddle_node_cri_unverified_samples_total %v, want 3", n)
	}
	var full wire.NodeReport
	for _, r := range rcv.reports() {
		if r.Samples >= 5 {
			full = r
			break
		}
	}
	// After the first 3 samples no sample trusts the path: whatever the
	// report's window, the pod is seen in at most 3 of its samples.
	in := full.Instances[0]
	for _, u := range in.Users {
		if u.PodUID == pod && u.SeenShare*float64(in.Samples) > 3.01 {
			t.Errorf("the pod seen in %.1f of %d samples with CRI failing: %s", u.SeenShare*float64(in.Samples), in.Samples, usersText(in))
		}
	}
	if got := hostUsers(in); got["/kubepods/burstable/pod"+pod+"/"+ctr] != 0 || len(got) != 1 {
		t.Errorf("no host user for the unvouched path after 3 samples: %s", usersText(in))
	}
	if !strings.Contains(p.stderr.String(), "CRI has not answered for more than 3 samples") {
		t.Errorf("the log does not say why:\n%s", p.stderr.String())
	}
}

// TestMPSServer (issue 37, F6): the driver's MPS daemons as real
// processes (the pause program copied to nvidia-cuda-mps-control, which
// starts a copy named nvidia-cuda-mps-server, as the driver's control
// daemon starts its server). The server is left out: its client, busy the
// whole time, is the GPU's only user and pays all of it, not half. A
// process that only takes the server's name is a user like any other.
func TestMPSServer(t *testing.T) {
	needCgroups(t)
	dir := t.TempDir()
	b, err := os.ReadFile(bin.pause)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"nvidia-cuda-mps-control", "nvidia-cuda-mps-server"} {
		os.WriteFile(filepath.Join(dir, n), b, 0o755)
	}
	ctl := exec.Command(filepath.Join(dir, "nvidia-cuda-mps-control"), filepath.Join(dir, "nvidia-cuda-mps-server"))
	outp, _ := ctl.StdoutPipe()
	if err := ctl.Start(); err != nil {
		t.Fatal(err)
	}
	var server int
	fmt.Fscan(outp, &server)
	t.Cleanup(func() { syscallKill(server); ctl.Process.Kill(); ctl.Wait() })
	if server <= 0 {
		t.Fatal("the control daemon started no server")
	}
	waitFor(t, 5*time.Second, "the server's exec", func() bool {
		l, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", server))
		return filepath.Base(l) == "nvidia-cuda-mps-server"
	})
	fake := exec.Command(filepath.Join(dir, "nvidia-cuda-mps-server")) // the name, no control daemon
	if err := fake.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fake.Process.Kill(); fake.Wait() })
	// The client and the other user in Docker containers of their own, so
	// that every process here is a user apart.
	client, other := startIn(t, ""), startIn(t, "")
	inCgroup(t, client, "docker/c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1")
	inCgroup(t, other, "docker/c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2")
	state := filepath.Join(dir, "state")
	// GPU 0: the server (compute list) and its client (MPS list), busy
	// throughout; GPU 1: a process named as the server, and another.
	writeState(t, state,
		fmt.Sprintf("proc 0 compute %d 500 0", server), fmt.Sprintf("proc 0 mps %d 4000 100", client), "util 0 100",
		fmt.Sprintf("proc 1 compute %d 3000 60", fake.Process.Pid), fmt.Sprintf("proc 1 compute %d 1000 40", other), "util 1 100")
	r := once(t, nodeEnv(state, "FAKE_NVML_GPUS=2"), "--interval", "0")
	in := r.Instances[0]
	if len(in.Users) != 1 || in.Users[0].Runtime != "docker" || in.Users[0].UsedMemoryPeakBytes != 4000 || in.Users[0].BusyShare != 1 || in.Users[0].SeenShare != 1 {
		t.Errorf("GPU 0: %s, want only the MPS client, busy_share 1", usersText(in))
	}
	if n := len(r.Instances[1].Users); n != 2 {
		t.Errorf("GPU 1: %d users (%s), want 2: a process that only takes the server's name is a user", n, usersText(r.Instances[1]))
	}
}

func syscallKill(pid int) {
	if p, err := os.FindProcess(pid); err == nil && pid > 0 {
		p.Kill()
	}
}
