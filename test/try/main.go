// Command try is `make try`: the whole path of a GPU node on one machine,
// left running for you to add a task of your own (docs/node.md, first
// section). It needs root (it makes cgroups, as slurmd does) and gcc (the
// fake NVML).
//
// It starts paddle-monitor on SQLite, paddle-node on the fake NVML
// (testdata/fakenvml, four GPUs) reporting to it with a node token, and two
// supervised tasks of two teams, each a Slurm job: paddle-entrypoint with
// SLURM_JOB_ID set, in a cgroup shaped as slurmd makes one
// (/slurm/uid_0/job_N/step_0). The agent sees the job's processes on a GPU
// and ties them to the registration of the same node and job, as on a real
// Slurm node. Then it prints how to start one more task of your own the
// same way (job 103, its cgroup made for you) and where to see it: the page
// and `paddle-monitor ledger`. Ctrl-C ends everything and removes what it
// made.
//
// The fake GPUs see a process when it is in a job's cgroup: this program
// writes the fake NVML's state file from the jobs' cgroup.procs every half
// second (job 101 on GPU 0, 102 on GPU 1, 103 on GPU 2), as a real GPU sees
// the processes that use it.
//
// TRY_OWN_TASK=1: run the printed command for your own task itself, wait
// until it shows in the ledger, print the ledger and exit (the test).
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/monitorproc"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "try:", err)
		os.Exit(1)
	}
}

// job is one Slurm job of the try: its id, GPU, labels and token.
type job struct {
	id, gpu              int
	project, owner, name string
	token                string // the token's name
	cgroup               string // its step's cgroup directory
	cmd                  *exec.Cmd
	tokenPattern         string
}

type try struct {
	repo, dir, bin string
	host           string
	cgroupRoot     string // the cgroup hierarchy jobs are made in
	monitor        *monitorproc.Proc
	agent          *exec.Cmd
	jobs           []*job
	tokens         map[string]string // name -> token
}

func run() error {
	t := &try{tokens: map[string]string{}}
	var err error
	if t.repo, err = os.Getwd(); err != nil {
		return err
	}
	t.bin = filepath.Join(t.repo, "bin")
	if os.Geteuid() != 0 {
		return errors.New("make try needs root: it makes Slurm-shaped cgroups for the tasks, as slurmd does (the container image and CI run as root)")
	}
	if t.cgroupRoot, err = cgroupRoot(); err != nil {
		return err
	}
	if t.host, err = os.Hostname(); err != nil {
		return err
	}
	if t.dir, err = os.MkdirTemp("", "paddle-try-"); err != nil {
		return err
	}
	defer os.RemoveAll(t.dir)
	defer t.stop()
	t.jobs = []*job{
		{id: 101, gpu: 0, project: "vision_detect", owner: "ann@example.com", name: "detr-train", token: "team-vision", tokenPattern: "vision_*"},
		{id: 102, gpu: 1, project: "search_ranking", owner: "bob@example.com", name: "ranker", token: "team-search", tokenPattern: "search_*"},
		{id: 103, gpu: 2, project: "my_project", owner: "you@example.com", name: "mine", token: "mine", tokenPattern: "my_*"},
	}

	for _, j := range t.jobs {
		j.cgroup = filepath.Join(t.cgroupRoot, "slurm", "uid_0", fmt.Sprintf("job_%d", j.id), "step_0")
	}

	step("1. paddle-monitor on SQLite, with a token per team, the node's and finance's")
	if err := t.startMonitor(); err != nil {
		return err
	}
	step("2. paddle-node on four fake GPUs (testdata/fakenvml), reporting every 5 s with its node token")
	if err := t.startAgent(); err != nil {
		return err
	}
	go t.feedGPUs()
	step("3. two supervised tasks of two teams, each a Slurm job in a cgroup as slurmd makes one")
	for _, j := range t.jobs[:2] {
		line := t.taskLine(j, "sleep 3600")
		fmt.Printf("$ %s\n", line)
		if j.cmd, err = t.startLine(line); err != nil {
			return err
		}
	}
	fmt.Println("(waiting for the agent's reports to tie both jobs to their registrations)")
	if err := t.waitLedger(30*time.Second, "vision_detect", "search_ranking"); err != nil {
		return err
	}
	if err := t.printLedger(); err != nil {
		return err
	}
	mine := t.jobs[2]
	own := t.taskLine(mine, "sleep 600")
	step("4. your own task")
	fmt.Printf(`Start one more task of your own, as Slurm job %d (its cgroup %s is made for you;
the line joins it, as slurmd puts a job's steps in theirs, then runs the
entrypoint; the fake GPU %d sees what runs there):

  %s

Then see it
  on the page:   %s/   (user: empty, password: %s), under Running tasks, and its project in the month's costs
  in the ledger: %s/paddle-monitor ledger --db %s --by project   (attributed GPU-hours, a few seconds after it starts)
  the tasks:     curl -s -u ':%s' %s/v1/tasks
Ctrl-C ends the monitor, the agent and the tasks, and removes %s.
`, mine.id, mine.cgroup, mine.gpu, own, t.monitor.URL, t.tokens["finance"], t.bin, filepath.Join(t.dir, "paddle-monitor.db"),
		t.tokens["finance"], t.monitor.URL, t.dir)

	if os.Getenv("TRY_OWN_TASK") == "1" {
		fmt.Printf("(TRY_OWN_TASK=1: running it)\n$ %s\n", own)
		if mine.cmd, err = t.startLine(own); err != nil {
			return err
		}
		if err := t.waitLedger(30*time.Second, mine.project); err != nil {
			return err
		}
		fmt.Println("Your task is in the ledger:")
		return t.printLedger()
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	fmt.Println("\n(stopping)")
	return nil
}

func step(s string) { fmt.Printf("\n== %s\n", s) }

// shellJoin writes args as a shell reads them back: a glob in quotes.
func shellJoin(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if strings.ContainsAny(a, "*?[ $'\"") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		out[i] = a
	}
	return strings.Join(out, " ")
}

// cgroupRoot is where the jobs' cgroups go: the v1 pids hierarchy where
// the machine has one (the agent reads that line first), else the unified
// hierarchy.
func cgroupRoot() (string, error) {
	if _, err := os.Stat("/sys/fs/cgroup/pids/cgroup.procs"); err == nil {
		return "/sys/fs/cgroup/pids", nil
	}
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return "/sys/fs/cgroup", nil
	}
	return "", errors.New("no cgroup hierarchy to make a Slurm job's cgroup in (/sys/fs/cgroup/pids or a cgroup v2 /sys/fs/cgroup)")
}

// token mints a token with paddle-monitor token into the tokens file and
// writes it to DIR/token-NAME.
func (t *try) token(name string, args ...string) error {
	all := append([]string{"token", name}, args...)
	all = append(all, "--add-to", filepath.Join(t.dir, "tokens.json"))
	fmt.Printf("$ paddle-monitor %s\n", shellJoin(all))
	out, err := exec.Command(filepath.Join(t.bin, "paddle-monitor"), all...).Output()
	if err != nil {
		return fmt.Errorf("paddle-monitor token %s: %w", name, err)
	}
	tok := strings.SplitN(strings.TrimSpace(string(out)), "\n", 2)[0]
	t.tokens[name] = tok
	return os.WriteFile(filepath.Join(t.dir, "token-"+name), []byte(tok+"\n"), 0o600)
}

func (t *try) startMonitor() error {
	for _, j := range t.jobs {
		if err := t.token(j.token, "--project", j.tokenPattern); err != nil {
			return err
		}
	}
	if err := t.token("node", "--node", t.host); err != nil {
		return err
	}
	if err := t.token("finance", "--admin"); err != nil {
		return err
	}
	prices := filepath.Join(t.dir, "prices.json")
	if err := os.WriteFile(prices, []byte(`{"currency": "CNY", "default": 12.0}`+"\n"), 0o644); err != nil {
		return err
	}
	args := []string{"--listen", "127.0.0.1:0", "--db", filepath.Join(t.dir, "paddle-monitor.db"),
		"--tokens", filepath.Join(t.dir, "tokens.json"), "--prices", prices}
	fmt.Printf("$ paddle-monitor serve %s &\n", strings.Join(args, " "))
	log, err := os.Create(filepath.Join(t.dir, "paddle-monitor.log"))
	if err != nil {
		return err
	}
	t.monitor, err = monitorproc.Start(filepath.Join(t.bin, "paddle-monitor"), args, monitorproc.Options{Env: []string{"PATH=" + os.Getenv("PATH")}, Echo: log})
	if err != nil {
		return fmt.Errorf("paddle-monitor serve: %w", err)
	}
	fmt.Printf("(listening on %s; its log: %s)\n", t.monitor.URL, log.Name())
	return nil
}

// gpuEnv is the fake NVML's environment, for the agent and the tasks.
func (t *try) gpuEnv() []string {
	return []string{"LD_LIBRARY_PATH=" + t.dir, "FAKE_NVML_GPUS=4", "FAKE_NVML_STATE=" + filepath.Join(t.dir, "nvml-state")}
}

func (t *try) startAgent() error {
	if out, err := exec.Command("gcc", "-O2", "-shared", "-fPIC", "-o", filepath.Join(t.dir, "libnvidia-ml.so.1"),
		filepath.Join(t.repo, "testdata/fakenvml/fakenvml.c")).CombinedOutput(); err != nil {
		return fmt.Errorf("gcc testdata/fakenvml/fakenvml.c (make try needs gcc): %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(t.dir, "nvml-state"), nil, 0o644); err != nil {
		return err
	}
	args := []string{"--monitor-url", t.monitor.URL, "--token-file", filepath.Join(t.dir, "token-node"), "--node-name", t.host,
		"--interval", "5s", "--sample", "1s", "--report-spool", filepath.Join(t.dir, "node", "reports.db")}
	fmt.Printf("$ %s paddle-node %s &\n", strings.Join(t.gpuEnv(), " "), strings.Join(args, " "))
	log, err := os.Create(filepath.Join(t.dir, "paddle-node.log"))
	if err != nil {
		return err
	}
	t.agent = exec.Command(filepath.Join(t.bin, "paddle-node"), args...)
	t.agent.Env = append([]string{"PATH=" + os.Getenv("PATH")}, t.gpuEnv()...)
	t.agent.Stdout, t.agent.Stderr = log, log
	if err := t.agent.Start(); err != nil {
		return err
	}
	fmt.Printf("(its log: %s)\n", log.Name())
	return nil
}

// taskLine is the shell line that starts job j's task: the job's
// environment as Slurm gives it (SLURM_JOB_ID), the task's labels, and the
// entrypoint run from inside the job's cgroup.
func (t *try) taskLine(j *job, command string) string {
	return fmt.Sprintf(". %s && SLURM_JOB_ID=%d PADDLE_PROJECT=%s PADDLE_OWNER=%s PADDLE_TASK_NAME=%s PADDLE_MONITOR_TOKEN_FILE=%s "+
		"PADDLE_LABELS_FILE=%s PADDLE_SPOOL_PATH=%s sh -c 'echo $$ > %s/cgroup.procs && exec paddle-entrypoint %s'",
		filepath.Join(t.dir, "try.env"), j.id, j.project, j.owner, j.name, filepath.Join(t.dir, "token-"+j.token),
		filepath.Join(t.dir, fmt.Sprintf("job-%d.labels", j.id)), filepath.Join(t.dir, fmt.Sprintf("job-%d.spool", j.id)), j.cgroup, command)
}

// startLine makes the job cgroups and the environment file (once), then
// runs line in bash, its output in the try's directory.
func (t *try) startLine(line string) (*exec.Cmd, error) {
	env := filepath.Join(t.dir, "try.env")
	if _, err := os.Stat(env); err != nil {
		for _, j := range t.jobs {
			if err := os.MkdirAll(j.cgroup, 0o755); err != nil {
				return nil, fmt.Errorf("making the job's cgroup: %w", err)
			}
		}
		var b strings.Builder
		fmt.Fprintf(&b, "# make try's environment: the fake GPUs, the monitor, supervise mode (as the image)\n")
		fmt.Fprintf(&b, "export PATH=%s:$PATH\n", t.bin)
		for _, kv := range t.gpuEnv() {
			fmt.Fprintf(&b, "export %s\n", kv)
		}
		fmt.Fprintf(&b, "export PADDLE_MONITOR_URL=%s PADDLE_ENTRYPOINT_MODE=supervise PADDLE_HEARTBEAT=5s\n", t.monitor.URL)
		if err := os.WriteFile(env, []byte(b.String()), 0o644); err != nil {
			return nil, err
		}
	}
	log, err := os.Create(filepath.Join(t.dir, fmt.Sprintf("task-%d.log", time.Now().UnixNano())))
	if err != nil {
		return nil, err
	}
	c := exec.Command("bash", "-c", line)
	c.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.dir}
	c.Stdout, c.Stderr = log, log
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return c, c.Start()
}

// feedGPUs writes the fake NVML's state from the jobs' cgroups: every
// process of job j's cgroup is on GPU j.gpu.
func (t *try) feedGPUs() {
	last := ""
	for {
		var b strings.Builder
		for _, j := range t.jobs {
			if j.cgroup == "" {
				continue
			}
			procs, _ := os.ReadFile(filepath.Join(j.cgroup, "cgroup.procs"))
			for _, pid := range strings.Fields(string(procs)) {
				fmt.Fprintf(&b, "proc %d compute %s 20000000000 80\n", j.gpu, pid)
			}
			if len(procs) > 0 {
				fmt.Fprintf(&b, "util %d 80\n", j.gpu)
			}
		}
		if s := b.String(); s != last {
			os.WriteFile(filepath.Join(t.dir, "nvml-state.tmp"), []byte(s), 0o644)
			os.Rename(filepath.Join(t.dir, "nvml-state.tmp"), filepath.Join(t.dir, "nvml-state"))
			last = s
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// ledger returns the attributed GPU-hours per project of this month.
func (t *try) ledger() (map[string]float64, error) {
	out, err := exec.Command(filepath.Join(t.bin, "paddle-monitor"), "ledger", "--db", filepath.Join(t.dir, "paddle-monitor.db"),
		"--by", "project", "--format", "json").Output()
	if err != nil {
		return nil, fmt.Errorf("paddle-monitor ledger: %w", err)
	}
	var l struct {
		Rows []struct {
			Key        map[string]*string `json:"key"`
			Attributed float64            `json:"attributed_gpu_hours"`
		} `json:"rows"`
	}
	if err := json.Unmarshal(out, &l); err != nil {
		return nil, fmt.Errorf("paddle-monitor ledger: %w\n%s", err, out)
	}
	m := map[string]float64{}
	for _, r := range l.Rows {
		if p := r.Key["project"]; p != nil {
			m[*p] += r.Attributed
		}
	}
	return m, nil
}

// waitLedger waits until every project has attributed hours.
func (t *try) waitLedger(limit time.Duration, projects ...string) error {
	deadline := time.Now().Add(limit)
	for {
		m, err := t.ledger()
		if err == nil && !slices.ContainsFunc(projects, func(p string) bool { return m[p] <= 0 }) {
			return nil
		}
		if time.Now().After(deadline) {
			agentLog, _ := os.ReadFile(filepath.Join(t.dir, "paddle-node.log"))
			return fmt.Errorf("after %v the ledger has no attributed hours for %v (%v, %v)\nthe agent's log:\n%s", limit, projects, m, err, agentLog)
		}
		time.Sleep(time.Second)
	}
}

func (t *try) printLedger() error {
	args := []string{"ledger", "--db", filepath.Join(t.dir, "paddle-monitor.db"), "--by", "project"}
	fmt.Printf("$ paddle-monitor %s\n", strings.Join(args, " "))
	c := exec.Command(filepath.Join(t.bin, "paddle-monitor"), args...)
	c.Stdout, c.Stderr = os.Stdout, os.Stdout
	return c.Run()
}

// stop ends the tasks, the agent and the monitor, and removes the jobs'
// cgroups (empty once their processes are gone).
func (t *try) stop() {
	for _, j := range t.jobs {
		if j.cmd != nil && j.cmd.Process != nil {
			syscall.Kill(-j.cmd.Process.Pid, syscall.SIGTERM)
			j.cmd.Wait()
		}
	}
	if t.agent != nil && t.agent.Process != nil {
		t.agent.Process.Signal(syscall.SIGTERM)
		t.agent.Wait()
	}
	if t.monitor != nil {
		t.monitor.Stop()
	}
	for _, j := range t.jobs {
		if j.cgroup == "" {
			continue
		}
		for d := j.cgroup; strings.HasPrefix(d, filepath.Join(t.cgroupRoot, "slurm")); d = filepath.Dir(d) {
			if err := removeCgroupDir(d); err != nil {
				break
			}
		}
	}
}

// removeCgroupDir removes a cgroup once its processes have left (a
// process that exits leaves it a moment later).
func removeCgroupDir(d string) error {
	var err error
	for i := 0; i < 20; i++ {
		if err = os.Remove(d); err == nil || os.IsNotExist(err) {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}
