// Command demo runs the whole system on this machine with nothing but the
// built binaries: `make demo` runs it.
//
// It starts paddle-monitor on its embedded SQLite database (with a tokens
// file and a prices file) and, where gcc is, a stand-in NVML library with two
// GPUs, then runs tasks through paddle-entrypoint in supervise mode (the
// image's default) with sample PADDLE_* labels, a labels file and a spool
// under a temporary directory:
//
//  1. the monitor up: labels, GPUs, labels file, the command, registration
//     alongside it, GPU sampling, and the completion when it ends;
//  2. a task forging project=admin: refused by the monitor (403), kept in
//     the spool's dead letters;
//  3. the monitor down: the command starts at once all the same; its
//     registration and completion are spooled;
//  4. the monitor back: `spool flush` delivers the registration, then the
//     completion;
//  5. the monitor's own view: its task list and the month's GPU-hours and
//     cost per project;
//  6. an idle task and a budget's forecast;
//
// and last the page's URL and credentials; with DEMO_KEEP=1 the monitor
// keeps serving until Ctrl-C.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/monitorproc"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

type demo struct {
	entrypoint, monitor string
	dir                 string
	db                  string
	tokens              string
	prices, budgets     string
	admin               string // the admin token, for reads
	url                 string
	server              *monitorproc.Proc
}

func run() error {
	d := &demo{}
	var err error
	if d.entrypoint, err = filepath.Abs("bin/paddle-entrypoint"); err != nil {
		return err
	}
	if d.monitor, err = filepath.Abs("bin/paddle-monitor"); err != nil {
		return err
	}
	if d.dir, err = os.MkdirTemp("", "paddle-demo-"); err != nil {
		return err
	}
	defer os.RemoveAll(d.dir)
	d.db = filepath.Join(d.dir, "paddle-monitor.db")
	d.tokens = filepath.Join(d.dir, "tokens.json")
	prices := filepath.Join(d.dir, "prices.json")
	if err := os.WriteFile(prices, []byte(`{"currency": "CNY", "default": 2.0, "models": {"NVIDIA A100*": 12.0}}`+"\n"), 0o644); err != nil {
		return err
	}
	d.prices, d.budgets = prices, filepath.Join(d.dir, "budgets.json")
	if err := os.WriteFile(d.budgets, []byte(`{"currency": "CNY", "budgets": [{"project": "search_*", "monthly_cost": 500}]}`+"\n"), 0o644); err != nil {
		return err
	}

	step("0. paddle-monitor: two tokens, then serve on its embedded SQLite database")
	teamToken, teamEntry, err := d.mint("search-team", "--project", "search_*", "--owner", "*@example.com")
	if err != nil {
		return err
	}
	admin, adminEntry, err := d.mint("finance", "--admin")
	if err != nil {
		return err
	}
	d.admin = admin
	if err := os.WriteFile(d.tokens, []byte(`{"tokens": [`+teamEntry+`, `+adminEntry+`]}`), 0o600); err != nil {
		return err
	}
	show("tokens file (SHA-256 of each token, never the token)", d.tokens)
	if err := d.startServer("127.0.0.1:0"); err != nil {
		return err
	}
	defer d.stopServer()
	tokenFile := filepath.Join(d.dir, "monitor-token")
	if err := os.WriteFile(tokenFile, []byte(teamToken+"\n"), 0o600); err != nil {
		return err
	}

	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"PADDLE_TASK_NAME=resnet50-imagenet",
		"PADDLE_PROJECT=search_ranking",
		"PADDLE_OWNER=alice@example.com",
		"PADDLE_PRIORITY=high",
		"PADDLE_ENV=prod",
		"PADDLE_DURATION_EST=2h",
		"PADDLE_LABEL_COST_CENTER=cc-1024",
		"PADDLE_LABEL_TEAM=bad value", // dropped with a warning
		"PADDLE_LABELS_FILE=" + filepath.Join(d.dir, "paddle-task.labels"),
		"PADDLE_SPOOL_PATH=" + filepath.Join(d.dir, "spool.db"),
		"PADDLE_MONITOR_URL=" + d.url,
		"PADDLE_MONITOR_TOKEN_FILE=" + tokenFile,
		"PADDLE_REGISTER_BUDGET=2s",
	}
	// Supervise mode, as the image sets it; GPU samples every 100ms so that a
	// one-second task has some (the default is 10s).
	env = append(env, "PADDLE_ENTRYPOINT_MODE=supervise", "PADDLE_GPU_SAMPLE=100ms")
	train := []string{"sh", "-c", `echo "training: PID $$, task $PADDLE_TASK_ID, args: $*"; sleep 1`, "train.py", "--lr", "0.1"}

	step("1. Monitor up: a supervised start (labels, GPUs, labels file, the command, registration, completion)")
	gpuEnv, err := fakeGPUs(d.dir)
	if err != nil {
		fmt.Printf("(no GPUs in this demo: %v)\n", err)
	}
	env = append(env, gpuEnv...)
	if err := d.run(append(env, "PADDLE_TASK_ID=resnet50-run-1"), train...); err != nil {
		return err
	}
	show("labels file "+filepath.Join(d.dir, "paddle-task.labels"), filepath.Join(d.dir, "paddle-task.labels"))
	if err := d.get("/v1/tasks/resnet50-run-1"); err != nil {
		return err
	}

	step("2. A task forging project=admin: the monitor answers 403, the registration is a dead letter")
	if err := d.run(append(env, "PADDLE_PROJECT=admin", "PADDLE_TASK_ID=forged-1"), "true"); err != nil {
		return err
	}
	if err := d.run(env, "spool", "list", "--dead"); err != nil {
		return err
	}

	step("3. Monitor down: the command starts at once all the same; registration and completion are spooled")
	addr := strings.TrimPrefix(d.url, "http://")
	d.stopServer()
	start := time.Now()
	if err := d.run(append(env, "PADDLE_TASK_NAME=bert-finetune", "PADDLE_TASK_ID=bert-run-1"), train...); err != nil {
		return err
	}
	fmt.Printf("(the whole supervised run with the monitor down: %v — the command's 1s, then at most PADDLE_COMPLETE_BUDGET)\n", time.Since(start).Round(time.Millisecond))
	if err := d.run(env, "spool", "stats"); err != nil {
		return err
	}

	step("4. Monitor back: `paddle-entrypoint spool flush` delivers the registration, then the completion")
	if err := d.startServer(addr); err != nil {
		return err
	}
	if err := d.run(env, "spool", "flush"); err != nil {
		return err
	}
	if err := d.run(env, "spool", "stats"); err != nil {
		return err
	}

	step("5. What the monitor holds (GET /v1/tasks with the admin token, one line per task)")
	if err := d.list(); err != nil {
		return err
	}
	now := time.Now().UTC()
	from := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC).Format("2006-01-02")
	to := time.Date(now.Year(), now.Month()+1, 1, 0, 0, 0, 0, time.UTC).Format("2006-01-02")
	fmt.Printf("$ paddle-monitor report --db %s --prices %s --from %s --to %s --by project\n", d.db, prices, from, to)
	c := exec.Command(d.monitor, "report", "--db", d.db, "--prices", prices, "--from", from, "--to", to, "--by", "project")
	c.Stdout, c.Stderr = os.Stdout, os.Stdout
	if err := c.Run(); err != nil {
		return fmt.Errorf("paddle-monitor report: %w", err)
	}

	step("6. Acting before the month ends: an idle task seen while it is idle, and a budget with its forecast")
	show("budgets file", d.budgets)
	// Both fake GPUs at 0 %, a heartbeat with their samples every second
	// (the image sends one a minute).
	idle := append(env, "PADDLE_TASK_NAME=stuck-dataloader", "PADDLE_TASK_ID=stuck-run-1", "PADDLE_HEARTBEAT=1s", "FAKE_NVML_UTIL=0")
	fmt.Printf("$ PADDLE_HEARTBEAT=1s paddle-entrypoint sh -c 'sleep 5' &   # GPUs at 0 %%\n")
	bg := exec.Command(d.entrypoint, "sh", "-c", "sleep 5")
	bg.Env = idle
	bg.Stdout, bg.Stderr = os.Stdout, os.Stdout
	if err := bg.Start(); err != nil {
		return err
	}
	time.Sleep(3500 * time.Millisecond)
	// The list's default is 30 minutes idle; the demo has seconds.
	if err := d.get("/v1/tasks?state=idle&idle_for=1s"); err != nil {
		return err
	}
	fmt.Println("(the page lists it under \"Idle now\"; /metrics has paddle_task_idle_seconds, which PaddleTaskGPUIdle of deploy/prometheus/paddle-alerts.yml fires on after 30 minutes)")
	// The report while it runs: the forecast counts it to the month's end.
	fmt.Printf("$ paddle-monitor report --db %s --prices %s --budgets %s --from %s --to %s --by project\n", d.db, prices, d.budgets, from, to)
	c = exec.Command(d.monitor, "report", "--db", d.db, "--prices", prices, "--budgets", d.budgets, "--from", from, "--to", to, "--by", "project")
	c.Stdout, c.Stderr = os.Stdout, os.Stdout
	if err := c.Run(); err != nil {
		return fmt.Errorf("paddle-monitor report: %w", err)
	}
	fmt.Println("(forecast: what the month will have cost if the idle task keeps its 2 GPUs until the 1st)")
	if err := bg.Wait(); err != nil {
		return err
	}
	if err := d.nodeAgent(gpuEnv, tokenFile); err != nil {
		return err
	}
	return d.page()
}

// mint runs `paddle-monitor token` and returns the token and its entry.
func (d *demo) mint(name string, args ...string) (token, entry string, err error) {
	fmt.Printf("$ paddle-monitor token %s %s\n", name, strings.Join(args, " "))
	out, err := exec.Command(d.monitor, append([]string{"token", name}, args...)...).Output()
	if err != nil {
		return "", "", fmt.Errorf("paddle-monitor token: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 {
		return "", "", fmt.Errorf("paddle-monitor token printed %q", out)
	}
	fmt.Printf("%s…  (the token: shown once)\n%s\n", lines[0][:12], lines[1])
	return lines[0], lines[1], nil
}

// startServer runs `paddle-monitor serve` on addr and waits until it
// listens; its log lines are shown with a prefix.
func (d *demo) startServer(addr string) error {
	fmt.Printf("$ paddle-monitor serve --listen %s --db %s --tokens %s --prices %s --budgets %s\n", addr, d.db, d.tokens, d.prices, d.budgets)
	p, err := monitorproc.Start(d.monitor, []string{"--listen", addr, "--db", d.db, "--tokens", d.tokens, "--prices", d.prices, "--budgets", d.budgets},
		monitorproc.Options{Env: []string{"PATH=" + os.Getenv("PATH")}, Echo: os.Stdout, Prefix: "  [monitor] "})
	if err != nil {
		return err
	}
	d.server, d.url = p, p.URL
	return nil
}

func (d *demo) stopServer() {
	if d.server == nil {
		return
	}
	fmt.Println("$ kill -TERM <paddle-monitor>")
	d.server.Stop()
	d.server = nil
}

// request prints the curl line of a GET of path and sends it with the
// admin token.
func (d *demo) request(path string) (*http.Response, error) {
	fmt.Printf("$ curl -H 'Authorization: Bearer <finance>' %s%s\n", d.url, path)
	req, err := http.NewRequest("GET", d.url+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+d.admin)
	return http.DefaultClient.Do(req)
}

// get shows an API answer, read with the admin token.
func (d *demo) get(path string) error {
	resp, err := d.request(path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var pretty bytes.Buffer
	if json.Indent(&pretty, b, "", "  ") != nil {
		pretty.Write(b)
	}
	fmt.Printf("%d %s\n%s\n", resp.StatusCode, http.StatusText(resp.StatusCode), pretty.String())
	return nil
}

// list shows GET /v1/tasks as one line per task.
func (d *demo) list() error {
	resp, err := d.request("/v1/tasks")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var page struct {
		Tasks []struct {
			TaskID   string `json:"task_id"`
			Project  string `json:"project"`
			Owner    string `json:"owner"`
			State    string `json:"state"`
			GPUCount int    `json:"gpu_count"`
		} `json:"tasks"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
		return err
	}
	fmt.Printf("%-16s %-16s %-20s %-10s %s\n", "task_id", "project", "owner", "state", "gpu_count")
	for _, t := range page.Tasks {
		fmt.Printf("%-16s %-16s %-20s %-10s %d\n", t.TaskID, t.Project, t.Owner, t.State, t.GPUCount)
	}
	return nil
}

// fakeGPUs builds the stand-in NVML library from testdata (this machine has
// no GPU) and returns the environment that makes it the task's driver, with
// two GPUs: the probe loads it from LD_LIBRARY_PATH as it would the real one.
func fakeGPUs(dir string) ([]string, error) {
	lib := filepath.Join(dir, "nvidia")
	if err := os.MkdirAll(lib, 0o755); err != nil {
		return nil, err
	}
	out, err := exec.Command("gcc", "-O2", "-shared", "-fPIC", "-o", filepath.Join(lib, "libnvidia-ml.so.1"),
		"testdata/fakenvml/fakenvml.c").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("building the stand-in NVML library: %v: %s", err, out)
	}
	fmt.Println("(a stand-in libnvidia-ml.so.1 from testdata/fakenvml with two GPUs: this machine has none)")
	// Utilisation cycles through these values, one per sample: busy, with an
	// idle moment.
	return []string{"LD_LIBRARY_PATH=" + lib, "FAKE_NVML_GPUS=2", "FAKE_NVML_UTIL=92,88,0,95"}, nil
}

func (d *demo) run(env []string, args ...string) error {
	fmt.Printf("$ paddle-entrypoint %s\n", strings.Join(args, " "))
	c := exec.Command(d.entrypoint, args...)
	c.Env = env
	c.Stdout, c.Stderr = os.Stdout, os.Stdout
	err := c.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		fmt.Printf("(exit status %d)\n", ee.ExitCode())
		return nil
	}
	return err
}

func step(title string) { fmt.Printf("\n=== %s\n", title) }

func show(title, path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		fmt.Printf("--- %s: %v\n", title, err)
		return
	}
	fmt.Printf("--- %s\n%s\n", title, b)
}
