package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// nodeAgent is the demo's last steps: paddle-node observing the node. On
// three fake GPUs run a training container (where the demo runs as root:
// the entrypoint and a static command chrooted into a root with the image's
// link layout, so the agent reads its labels file through its own root), a
// process of nobody's task, and a Kubernetes pod of namespace team-a that
// registered nothing (the kubelet's pod-resources API and the CRI stood in
// by servers on unix sockets, its process in a kubepods-shaped cgroup);
// `paddle-node once` prints what the node saw: the GPUs, who had processes
// on each, and what each declared. nodeReports then has the agent report to
// the monitor and prints the ledger.
func (d *demo) nodeAgent(gpuEnv []string, tokenFile string) error {
	step("7. The node agent: what the node itself saw (paddle-node once)")
	node, err := filepath.Abs("bin/paddle-node")
	if err != nil {
		return err
	}
	if len(gpuEnv) == 0 {
		fmt.Println("(no stand-in NVML library: the agent would see no GPU)")
		return nil
	}
	var procs []*exec.Cmd
	var cgroups []string
	defer func() {
		for _, p := range procs {
			p.Process.Kill()
			p.Wait()
		}
		for _, cg := range cgroups {
			removeCgroup(cg)
		}
	}()
	task, err := d.containerTask(tokenFile)
	if err != nil {
		return err
	}
	procs = append(procs, task)
	if cg := containerCgroup(task.Process.Pid, filepath.Join("docker", demoContainer)); cg != "" {
		cgroups = append(cgroups, cg)
		fmt.Printf("(the container's process moved into the cgroup %s, as Docker places a container)\n", strings.TrimPrefix(cg, "/sys/fs/cgroup/pids"))
	}
	stray := exec.Command("sleep", "60")
	if err := stray.Start(); err != nil {
		return err
	}
	procs = append(procs, stray)
	// The Kubernetes pod: the kubelet's pod-resources API and the CRI,
	// stood in by servers on unix sockets, say namespace team-a's container
	// holds GPU 2; a process in its cgroup runs on it and declares nothing.
	var kube []string
	if prSock, criSock, stopKubelet, err := kubelet(d.dir); err != nil {
		fmt.Printf("(no stand-in kubelet: %v; the agent sees no pod, and GPU 2's process is a host user)\n", err)
	} else {
		defer stopKubelet()
		kube = []string{"--pod-resources-socket", prSock, "--cri-socket", criSock}
	}
	podProc := exec.Command("sleep", "60")
	if err := podProc.Start(); err != nil {
		return err
	}
	procs = append(procs, podProc)
	if cg := containerCgroup(podProc.Process.Pid, filepath.Join("kubepods", "besteffort", "pod"+demoPodUID, demoPodContainerID)); cg != "" {
		cgroups = append(cgroups, cg)
		fmt.Printf("(the pod's process moved into the cgroup %s, as the kubelet places a container)\n", strings.TrimPrefix(cg, "/sys/fs/cgroup/pids"))
	} else {
		fmt.Println("(no v1 pids cgroup here or not root: the pod's process stays on the host; the kubelet's allocation alone makes the pod GPU 2's user)")
	}
	fmt.Printf("(a training container, PID %d, on GPU 0; an undeclared host process, PID %d, on GPU 1; pod %s/%s, PID %d, on GPU 2, registered nothing)\n",
		task.Process.Pid, stray.Process.Pid, demoPodNamespace, demoPodName, podProc.Process.Pid)
	state := filepath.Join(d.dir, "nvml-state")
	podLine := fmt.Sprintf("proc 2 compute %d 8000000000 60\nutil 2 61\n", podProc.Process.Pid)
	if err := os.WriteFile(state, []byte(fmt.Sprintf("proc 0 compute %d 40000000000 85\nproc 1 compute %d 2000000000 40\nutil 0 88\nutil 1 41\n%s",
		task.Process.Pid, stray.Process.Pid, podLine)), 0o644); err != nil {
		return err
	}
	time.Sleep(500 * time.Millisecond) // the entrypoint writes the labels file, then execs the command
	fmt.Printf("$ FAKE_NVML_GPUS=3 paddle-node once --interval 3s --sample 1s --node-name demo-node %s\n", strings.Join(kube, " "))
	env := append([]string{"PATH=" + os.Getenv("PATH"), "FAKE_NVML_STATE=" + state}, gpuEnv...)
	env = append(env, "FAKE_NVML_GPUS=3")
	c := exec.Command(node, append([]string{"once", "--interval", "3s", "--sample", "1s", "--node-name", "demo-node"}, kube...)...)
	c.Env = env
	c.Stdout = os.Stdout
	var stderr strings.Builder
	c.Stderr = &stderr
	if err := c.Run(); err != nil {
		return fmt.Errorf("paddle-node once: %w\n%s", err, stderr.String())
	}
	fmt.Println("(the container's user carries what its labels file declared; the stray process is a host user and the pod a Kubernetes user, both declared null)")
	// Half-way through the reports the stray process leaves GPU 1: no user
	// there for the rest of the time, the ledger's unallocated hours.
	later := fmt.Sprintf("proc 0 compute %d 40000000000 85\nutil 0 88\nutil 1 0\n%s", task.Process.Pid, podLine)
	return d.nodeReports(node, env, kube, func() error {
		stray.Process.Kill()
		return os.WriteFile(state, []byte(later), 0o644)
	})
}

// nodeReports runs the agent as it runs on a node, with a node token of
// its own, for a few seconds: its reports reach the monitor, whose ledger
// then accounts for the node's GPU-hours.
func (d *demo) nodeReports(node string, env, kube []string, strayGone func() error) error {
	step("8. The node agent reporting to the monitor, and the monitor's ledger")
	tok, entry, err := d.mint("demo-node-agent", "--node", "demo-node")
	if err != nil {
		return err
	}
	b, err := os.ReadFile(d.tokens)
	if err != nil {
		return err
	}
	i := strings.LastIndex(string(b), "]")
	if i < 0 {
		return fmt.Errorf("%s: no token list", d.tokens)
	}
	if err := os.WriteFile(d.tokens, []byte(string(b[:i])+", "+entry+string(b[i:])), 0o600); err != nil {
		return err
	}
	fmt.Println("$ kill -HUP <paddle-monitor>   # re-read the tokens file")
	d.server.Signal(syscall.SIGHUP)
	time.Sleep(300 * time.Millisecond)
	tokFile := filepath.Join(d.dir, "node-token")
	if err := os.WriteFile(tokFile, []byte(tok+"\n"), 0o600); err != nil {
		return err
	}
	from := time.Now().UTC().Truncate(time.Hour)
	fmt.Printf("$ paddle-node --monitor-url %s --token-file %s --node-name demo-node --interval 5s --sample 1s %s &   # then SIGTERM after 7 s\n", d.url, tokFile, strings.Join(kube, " "))
	c := exec.Command(node, append([]string{"--monitor-url", d.url, "--token-file", tokFile, "--node-name", "demo-node",
		"--interval", "5s", "--sample", "1s", "--report-spool", filepath.Join(d.dir, "node", "reports.db")}, kube...)...)
	c.Env = env
	c.Stdout, c.Stderr = os.Stdout, os.Stdout
	if err := c.Start(); err != nil {
		return err
	}
	time.Sleep(3500 * time.Millisecond)
	fmt.Println("$ kill <the stray process>   # GPU 1 has no user from now on")
	if err := strayGone(); err != nil {
		c.Process.Kill()
		c.Wait()
		return err
	}
	time.Sleep(3500 * time.Millisecond)
	c.Process.Signal(syscall.SIGTERM)
	if err := c.Wait(); err != nil {
		return fmt.Errorf("paddle-node: %w", err)
	}
	namespaces := filepath.Join(d.dir, "namespace-projects.json")
	if err := os.WriteFile(namespaces, []byte(`{"`+demoPodNamespace+`": "search_default"}`+"\n"), 0o644); err != nil {
		return err
	}
	show("namespace-projects file (a pod that registered nothing is charged to its namespace's project)", namespaces)
	// The window ends when the agent stopped (ledger windows have
	// one-second resolution): every ledger call below reads the same
	// seconds. An open end at the hour's end grew with the clock between
	// the calls, so the by-node and by-state tables disagreed on unobserved.
	to := time.Now().UTC().Truncate(time.Second).Add(time.Second)
	// And it is past before the first call: every read stops at now, so
	// a call inside that last second counted up to its own instant (3
	// GPUs × under a second of unobserved less than the next call).
	time.Sleep(time.Until(to))
	window := []string{"--db", d.db, "--from", from.Format(time.RFC3339), "--to", to.Format(time.RFC3339), "--namespace-projects", namespaces}
	args := append(append([]string{"ledger"}, window...), "--by", "node")
	// A table wider than the terminal's 120 columns leaves unobserved and
	// check to --wide, where the monitor has it.
	if help, _ := exec.Command(d.monitor, "ledger", "--help").CombinedOutput(); strings.Contains(string(help), "--wide") {
		args = append(args, "--wide")
	}
	fmt.Printf("$ paddle-monitor %s\n", strings.Join(args, " "))
	lc := exec.Command(d.monitor, args...)
	lc.Stdout, lc.Stderr = os.Stdout, os.Stdout
	if err := lc.Run(); err != nil {
		return fmt.Errorf("paddle-monitor ledger --by node: %w", err)
	}
	// Seconds of three GPUs are thousandths of a GPU-hour, which the table
	// rounds away: --format json has them whole, shown in GPU-seconds.
	for _, by := range []string{"node", "state"} {
		if err := d.ledgerSeconds(window, by); err != nil {
			return err
		}
	}
	fmt.Println(`(capacity = attributed + undeclared + unattributed + unallocated + unobserved; check = what is left, ≈ 0.
 capacity:     the node's 3 GPUs from its first report on;
 attributed:   the container on GPU 0, tied to its registration by the task it declared and its host name;
 undeclared:   the pod of team-a on GPU 2, which registered nothing, charged to search_default by --namespace-projects;
 unattributed: the stray host process on GPU 1, which nobody declared;
 unallocated:  GPU 1 once the stray process left it, no user;
 unobserved:   the GPUs' time no report covers)`)
	return nil
}

// ledgerFigures is a row or the total of `paddle-monitor ledger --format
// json`: the five states, with capacity and check for --by node, or
// gpu_hours for --by state.
type ledgerFigures struct {
	Key          map[string]*string `json:"key"`
	Capacity     *float64           `json:"capacity_gpu_hours"`
	Attributed   float64            `json:"attributed_gpu_hours"`
	Undeclared   float64            `json:"undeclared_gpu_hours"`
	Unattributed float64            `json:"unattributed_gpu_hours"`
	Unallocated  float64            `json:"unallocated_gpu_hours"`
	Unobserved   float64            `json:"unobserved_gpu_hours"`
	Check        *float64           `json:"check_gpu_hours"`
	GPUHours     float64            `json:"gpu_hours"`
}

// ledgerSeconds runs `paddle-monitor ledger --by by --format json` on
// window and prints its rows and total in GPU-seconds.
func (d *demo) ledgerSeconds(window []string, by string) error {
	args := append(append([]string{"ledger"}, window...), "--by", by, "--format", "json")
	// Not the command's own output (JSON): the demo's table of it, so the
	// line says so rather than show it as a command run.
	fmt.Printf("(the rows of `paddle-monitor %s`, in GPU-seconds:)\n", strings.Join(args, " "))
	out, err := exec.Command(d.monitor, args...).Output()
	if err != nil {
		return fmt.Errorf("paddle-monitor ledger --by %s --format json: %w", by, err)
	}
	var l struct {
		Rows  []ledgerFigures `json:"rows"`
		Total ledgerFigures   `json:"total"`
	}
	if err := json.Unmarshal(out, &l); err != nil {
		return fmt.Errorf("paddle-monitor ledger --by %s --format json: %w\n%s", by, err, out)
	}
	key := func(f ledgerFigures) string {
		if v := f.Key[by]; v != nil {
			return *v
		}
		return "TOTAL"
	}
	if by == "state" {
		fmt.Printf("%14s %12s\n", "STATE", "GPU-SECONDS")
		for _, r := range append(l.Rows, l.Total) {
			fmt.Printf("%14s %12.1f\n", key(r), r.GPUHours*3600)
		}
		return nil
	}
	fmt.Printf("%10s %9s %11s %11s %13s %12s %11s %6s\n", "NODE", "CAPACITY", "ATTRIBUTED", "UNDECLARED", "UNATTRIBUTED", "UNALLOCATED", "UNOBSERVED", "CHECK")
	for _, r := range append(l.Rows, l.Total) {
		var capacity, check float64
		if r.Capacity != nil {
			capacity = *r.Capacity
		}
		if r.Check != nil {
			check = *r.Check
		}
		fmt.Printf("%10s %9.1f %11.1f %11.1f %13.1f %12.1f %11.1f %6.1f\n", key(r), capacity*3600, r.Attributed*3600, r.Undeclared*3600,
			r.Unattributed*3600, r.Unallocated*3600, r.Unobserved*3600, check*3600)
	}
	return nil
}

// containerTask starts the demo's training container: as root, the
// entrypoint chrooted into a root of its own with the image's links
// (/var/run -> /run), registering with the team's token; otherwise the
// entrypoint on the host (the agent then sees a host user).
func (d *demo) containerTask(tokenFile string) (*exec.Cmd, error) {
	env := []string{"PADDLE_TASK_NAME=llm-finetune", "PADDLE_PROJECT=search_ranking", "PADDLE_OWNER=bob@example.com",
		"PADDLE_TASK_ID=llm-run-1", "PADDLE_MONITOR_URL=" + d.url, "PADDLE_REGISTER_BUDGET=2s"}
	root := filepath.Join(d.dir, "container")
	why := ""
	switch {
	case os.Geteuid() != 0:
		why = "not root"
	default:
		for _, tool := range []string{"unshare", "chroot"} {
			if _, err := exec.LookPath(tool); err != nil {
				why = fmt.Sprintf("no %s in PATH", tool)
			}
		}
		if why != "" {
			break
		}
		if err := d.makeRoot(root, tokenFile); err != nil {
			why = err.Error()
		}
	}
	if why != "" {
		fmt.Printf("(%s: the task runs on the host, without a root of its own, and declares nothing the agent can read)\n", why)
		c := exec.Command(d.entrypoint, "sleep", "60")
		c.Env = append(env, "PATH="+os.Getenv("PATH"), "PADDLE_MONITOR_TOKEN_FILE="+tokenFile,
			"PADDLE_LABELS_FILE="+filepath.Join(d.dir, "bert.labels"), "PADDLE_SPOOL_PATH=off")
		c.Stdout, c.Stderr = os.Stdout, os.Stdout
		return c, c.Start()
	}
	// The container's host name, as Docker and podman give it: the first
	// 12 characters of its ID, in a UTS namespace of its own; with it the
	// monitor ties the container to its registration.
	fmt.Printf("$ unshare --uts sh -c 'hostname %s && exec chroot %s /bin/paddle-entrypoint /bin/train'   # the container\n", demoContainer[:12], root)
	chroot, err := exec.LookPath("chroot")
	if err != nil {
		return nil, err
	}
	c := exec.Command("unshare", "--uts", "sh", "-c", `hostname "$0" && exec "$2" "$1" /bin/paddle-entrypoint /bin/train`, demoContainer[:12], root, chroot)
	c.Env = append(env, "PATH=/bin:"+os.Getenv("PATH"), "PADDLE_MONITOR_TOKEN_FILE=/etc/monitor-token", "PADDLE_SPOOL_PATH=off")
	c.Stdout, c.Stderr = os.Stdout, os.Stdout
	return c, c.Start()
}

// demoContainer is the demo container's ID.
var demoContainer = strings.Repeat("d3", 32)

// containerCgroup moves pid into the v1 pids cgroup rel, shaped as Docker's
// (docker/<id>) or the kubelet's (kubepods/<class>/pod<uid>/<id>), where
// this machine has that hierarchy and the demo runs as root, and returns its
// directory ("" otherwise).
func containerCgroup(pid int, rel string) string {
	const v1 = "/sys/fs/cgroup/pids"
	if os.Geteuid() != 0 {
		return ""
	}
	if _, err := os.Stat(filepath.Join(v1, "cgroup.procs")); err != nil {
		return ""
	}
	dir := filepath.Join(v1, rel)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return ""
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(fmt.Sprint(pid)), 0o644); err != nil {
		removeCgroup(dir)
		return ""
	}
	// The v1 memory line too, where there is one: the agent believes a
	// process's v1 lines only when they agree (docs/node.md), as they do
	// where the kubelet and the runtimes place containers.
	if mem := memoryTwin(dir); mem != "" && os.MkdirAll(mem, 0o755) == nil {
		os.WriteFile(filepath.Join(mem, "cgroup.procs"), []byte(fmt.Sprint(pid)), 0o644)
	}
	return dir
}

// memoryTwin is the v1 memory hierarchy's cgroup of the same path as the
// pids cgroup dir, "" where this machine has no v1 memory hierarchy.
func memoryTwin(dir string) string {
	const v1, mem = "/sys/fs/cgroup/pids", "/sys/fs/cgroup/memory"
	if _, err := os.Stat(filepath.Join(mem, "cgroup.procs")); err != nil {
		return ""
	}
	return mem + strings.TrimPrefix(dir, v1)
}

// removeCgroup removes a cgroup containerCgroup made (its processes have
// ended) and the parents it made that are left empty, deepest first.
func removeCgroup(dir string) {
	const v1, mem = "/sys/fs/cgroup/pids", "/sys/fs/cgroup/memory"
	if twin := memoryTwin(dir); twin != "" {
		for d := twin; len(d) > len(mem) && strings.HasPrefix(d, mem+"/"); d = filepath.Dir(d) {
			if os.Remove(d) != nil {
				break
			}
		}
	}
	for d := dir; len(d) > len(v1) && strings.HasPrefix(d, v1+"/"); d = filepath.Dir(d) {
		if os.Remove(d) != nil {
			return
		}
	}
}

// makeRoot makes the container's root: the image's /var/run -> /run link,
// the static entrypoint, the team's token, and a static command that
// waits (the demo's "training").
func (d *demo) makeRoot(root, tokenFile string) error {
	for _, dir := range []string{"run", "var", "bin", "etc", "tmp"} {
		if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
			return err
		}
	}
	if err := os.Symlink("/run", filepath.Join(root, "var/run")); err != nil {
		return err
	}
	for _, f := range [][2]string{{d.entrypoint, "bin/paddle-entrypoint"}, {tokenFile, "etc/monitor-token"}} {
		b, err := os.ReadFile(f[0])
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(root, f[1]), b, 0o755); err != nil {
			return err
		}
	}
	src := filepath.Join(d.dir, "pause.c")
	if err := os.WriteFile(src, []byte("#include <unistd.h>\nint main(void){for(;;)pause();}\n"), 0o644); err != nil {
		return err
	}
	if out, err := exec.Command("gcc", "-static", "-O2", "-o", filepath.Join(root, "bin/train"), src).CombinedOutput(); err != nil {
		return fmt.Errorf("no static command for the container (gcc -static: %v: %s)", err, strings.TrimSpace(string(out)))
	}
	return nil
}
