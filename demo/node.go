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

// nodeAgent is the demo's last step: paddle-node observing the node. A
// training container (where the demo runs as root: the entrypoint and a
// static command chrooted into a root with the image's link layout, so the
// agent reads its labels file through its own root) and a process of
// nobody's task run on the two fake GPUs; `paddle-node once` prints what
// the node saw: the GPUs, who had processes on each, and what the
// container declared. The process that declared nothing is what the
// monitor's ledger counts as undeclared.
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
	defer func() {
		for _, p := range procs {
			p.Process.Kill()
			p.Wait()
		}
	}()
	task, err := d.containerTask(tokenFile)
	if err != nil {
		return err
	}
	procs = append(procs, task)
	if cg := containerCgroup(task.Process.Pid); cg != "" {
		defer func() {
			task.Process.Kill()
			task.Wait()
			os.Remove(cg)
		}()
		fmt.Printf("(the container's process moved into the cgroup %s, as Docker places a container)\n", strings.TrimPrefix(cg, "/sys/fs/cgroup/pids"))
	}
	stray := exec.Command("sleep", "60")
	if err := stray.Start(); err != nil {
		return err
	}
	procs = append(procs, stray)
	fmt.Printf("(a training container, PID %d, on GPU 0; an undeclared process, PID %d, on GPU 1)\n", task.Process.Pid, stray.Process.Pid)
	state := filepath.Join(d.dir, "nvml-state")
	if err := os.WriteFile(state, []byte(fmt.Sprintf("proc 0 compute %d 40000000000 85\nproc 1 compute %d 2000000000 40\nutil 0 88\nutil 1 41\n",
		task.Process.Pid, stray.Process.Pid)), 0o644); err != nil {
		return err
	}
	time.Sleep(500 * time.Millisecond) // the entrypoint writes the labels file, then execs the command
	fmt.Println("$ paddle-node once --interval 3s --sample 1s --node-name demo-node")
	c := exec.Command(node, "once", "--interval", "3s", "--sample", "1s", "--node-name", "demo-node")
	c.Env = append([]string{"PATH=" + os.Getenv("PATH"), "FAKE_NVML_STATE=" + state}, gpuEnv...)
	c.Stdout = os.Stdout
	var stderr strings.Builder
	c.Stderr = &stderr
	if err := c.Run(); err != nil {
		return fmt.Errorf("paddle-node once: %w\n%s", err, stderr.String())
	}
	fmt.Println("(the container's user carries what its labels file declared; the stray process is a host user, declared null: the ledger's undeclared hours)")
	return d.nodeReports(node, append([]string{"PATH=" + os.Getenv("PATH"), "FAKE_NVML_STATE=" + state}, gpuEnv...))
}

// nodeReports runs the agent as it runs on a node, with a node token of
// its own, for a few seconds: its reports reach the monitor, whose ledger
// then accounts for the node's GPU-hours.
func (d *demo) nodeReports(node string, env []string) error {
	step("8. The node agent reporting to the monitor, and the monitor's ledger")
	tok, entry, err := d.mint("demo-node-agent", "--node", "demo-*")
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
	fmt.Printf("$ paddle-node --monitor-url %s --token-file %s --node-name demo-node --interval 5s --sample 1s &   # then SIGTERM after 7 s\n", d.url, tokFile)
	c := exec.Command(node, "--monitor-url", d.url, "--token-file", tokFile, "--node-name", "demo-node",
		"--interval", "5s", "--sample", "1s", "--report-spool", filepath.Join(d.dir, "node", "reports.db"))
	c.Env = env
	c.Stdout, c.Stderr = os.Stdout, os.Stdout
	if err := c.Start(); err != nil {
		return err
	}
	time.Sleep(7 * time.Second)
	c.Process.Signal(syscall.SIGTERM)
	if err := c.Wait(); err != nil {
		return fmt.Errorf("paddle-node: %w", err)
	}
	to := from.Add(time.Hour)
	fmt.Printf("$ paddle-monitor ledger --db %s --from %s --to %s --by state --format json\n", d.db, from.Format(time.RFC3339), to.Format(time.RFC3339))
	out, err := exec.Command(d.monitor, "ledger", "--db", d.db, "--from", from.Format(time.RFC3339), "--to", to.Format(time.RFC3339),
		"--by", "state", "--format", "json").Output()
	if err != nil {
		return fmt.Errorf("paddle-monitor ledger: %w", err)
	}
	// Seconds of two GPUs are thousandths of a GPU-hour: shown in GPU-seconds.
	var ledger struct {
		Rows []struct {
			Key      map[string]string `json:"key"`
			GPUHours float64           `json:"gpu_hours"`
		} `json:"rows"`
	}
	if err := json.Unmarshal(out, &ledger); err != nil {
		return fmt.Errorf("paddle-monitor ledger: %w\n%s", err, out)
	}
	fmt.Printf("%-14s %s\n", "state", "GPU-seconds")
	for _, r := range ledger.Rows {
		fmt.Printf("%-14s %.1f\n", r.Key["state"], r.GPUHours*3600)
	}
	fmt.Println("(attributed: the container, tied to its registration by the task it declared and its host name; unattributed: the stray process, a host user nobody declared; the fleet's capacity starts at the node's first report)")
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

// containerCgroup moves pid into a v1 pids cgroup shaped as Docker's
// (/docker/<id>) where this machine has that hierarchy and the demo runs
// as root, and returns its directory ("" otherwise).
func containerCgroup(pid int) string {
	const v1 = "/sys/fs/cgroup/pids"
	if os.Geteuid() != 0 {
		return ""
	}
	if _, err := os.Stat(filepath.Join(v1, "cgroup.procs")); err != nil {
		return ""
	}
	dir := filepath.Join(v1, "docker", demoContainer)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return ""
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(fmt.Sprint(pid)), 0o644); err != nil {
		os.Remove(dir)
		return ""
	}
	return dir
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
