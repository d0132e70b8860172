package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
	return nil
}

// containerTask starts the demo's training container: as root, the
// entrypoint chrooted into a root of its own with the image's links
// (/var/run -> /run), registering with the team's token; otherwise the
// entrypoint on the host (the agent then sees a host user).
func (d *demo) containerTask(tokenFile string) (*exec.Cmd, error) {
	env := []string{"PADDLE_TASK_NAME=bert-finetune", "PADDLE_PROJECT=search_ranking", "PADDLE_OWNER=bob@example.com",
		"PADDLE_TASK_ID=bert-run-1", "PADDLE_MONITOR_URL=" + d.url, "PADDLE_REGISTER_BUDGET=2s"}
	if os.Geteuid() != 0 {
		fmt.Println("(not root: the task runs on the host, without a root of its own)")
		c := exec.Command(d.entrypoint, "sleep", "60")
		c.Env = append(env, "PATH="+os.Getenv("PATH"), "PADDLE_MONITOR_TOKEN_FILE="+tokenFile,
			"PADDLE_LABELS_FILE="+filepath.Join(d.dir, "bert.labels"), "PADDLE_SPOOL_PATH=off")
		c.Stdout, c.Stderr = os.Stdout, os.Stdout
		return c, c.Start()
	}
	root := filepath.Join(d.dir, "container")
	for _, dir := range []string{"run", "var", "bin", "etc", "tmp"} {
		if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
			return nil, err
		}
	}
	if err := os.Symlink("/run", filepath.Join(root, "var/run")); err != nil {
		return nil, err
	}
	for _, f := range [][2]string{{d.entrypoint, "bin/paddle-entrypoint"}, {tokenFile, "etc/monitor-token"}} {
		b, err := os.ReadFile(f[0])
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(root, f[1]), b, 0o755); err != nil {
			return nil, err
		}
	}
	// The command: a static program that waits (the demo's "training").
	src := filepath.Join(d.dir, "pause.c")
	os.WriteFile(src, []byte("#include <unistd.h>\nint main(void){for(;;)pause();}\n"), 0o644)
	if out, err := exec.Command("gcc", "-static", "-O2", "-o", filepath.Join(root, "bin/train"), src).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building the container's command: %v\n%s", err, out)
	}
	fmt.Printf("$ chroot %s /bin/paddle-entrypoint /bin/train   # the container\n", root)
	c := exec.Command("chroot", root, "/bin/paddle-entrypoint", "/bin/train")
	c.Env = append(env, "PATH=/bin", "PADDLE_MONITOR_TOKEN_FILE=/etc/monitor-token", "PADDLE_SPOOL_PATH=off")
	c.Stdout, c.Stderr = os.Stdout, os.Stdout
	return c, c.Start()
}

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
	dir := filepath.Join(v1, "docker", strings.Repeat("d3", 32))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return ""
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(fmt.Sprint(pid)), 0o644); err != nil {
		os.Remove(dir)
		return ""
	}
	return dir
}
