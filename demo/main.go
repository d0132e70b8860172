// Command demo shows paddle-entrypoint's main job end to end on this
// machine, with nothing but the built binaries: `make demo` runs it.
//
// It starts a stand-in monitor API on 127.0.0.1 (and, where gcc is, a
// stand-in NVML library with two GPUs), then runs the entrypoint
// three times with sample PADDLE_* labels, a labels file and a spool under a
// temporary directory: with the monitor up, with the monitor down (the
// registration is spooled and the command still starts within the budget),
// and finally `spool flush` delivering the spooled registration.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run() error {
	bin, err := filepath.Abs("bin/paddle-entrypoint")
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "paddle-entrypoint-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	mon := &monitor{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mon}
	go srv.Serve(ln)
	url := "http://" + ln.Addr().String()

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
		"PADDLE_LABELS_FILE=" + filepath.Join(dir, "paddle-task.labels"),
		"PADDLE_SPOOL_PATH=" + filepath.Join(dir, "spool.db"),
		"PADDLE_MONITOR_URL=" + url,
		"PADDLE_REGISTER_BUDGET=2s",
	}
	train := []string{"sh", "-c", `echo "training: PID $$, task $PADDLE_TASK_ID, args: $*"`, "train.py", "--lr", "0.1"}

	step("1. Monitor up: labels, GPUs, labels file, registration, exec")
	gpuEnv, err := fakeGPUs(dir)
	if err != nil {
		fmt.Printf("(no GPUs in this step: %v)\n", err)
	}
	if err := entrypoint(bin, append(env, gpuEnv...), train...); err != nil {
		return err
	}
	show("labels file "+filepath.Join(dir, "paddle-task.labels"), filepath.Join(dir, "paddle-task.labels"))
	mon.show()

	step("2. Monitor down: the command still starts within the budget; the registration is spooled")
	srv.Close()
	start := time.Now()
	if err := entrypoint(bin, append(env, "PADDLE_TASK_NAME=bert-finetune"), train...); err != nil {
		return err
	}
	fmt.Printf("(time to exec with the monitor down: %v, budget 2s)\n", time.Since(start).Round(time.Millisecond))
	if err := entrypoint(bin, env, "spool", "stats"); err != nil {
		return err
	}

	step("3. Monitor back: `paddle-entrypoint spool flush` delivers the spooled registration")
	ln, err = net.Listen("tcp", ln.Addr().String())
	if err != nil {
		return err
	}
	srv = &http.Server{Handler: mon}
	go srv.Serve(ln)
	defer srv.Close()
	if err := entrypoint(bin, env, "spool", "flush"); err != nil {
		return err
	}
	mon.show()
	return entrypoint(bin, env, "spool", "stats")
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
	return []string{"LD_LIBRARY_PATH=" + lib, "FAKE_NVML_GPUS=2"}, nil
}

func entrypoint(bin string, env []string, args ...string) error {
	fmt.Printf("$ paddle-entrypoint %s\n", strings.Join(args, " "))
	c := exec.Command(bin, args...)
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
	fmt.Printf("--- %s\n%s", title, b)
}

// monitor is a stand-in monitor API that accepts every registration.
type monitor struct {
	mu   sync.Mutex
	seen []string
}

func (m *monitor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var pretty bytes.Buffer
	json.Indent(&pretty, body, "    ", "  ")
	m.mu.Lock()
	m.seen = append(m.seen, fmt.Sprintf("%s %s  Idempotency-Key: %s\n    %s", r.Method, r.URL.Path, r.Header.Get("Idempotency-Key"), pretty.String()))
	m.mu.Unlock()
	w.WriteHeader(http.StatusCreated)
}

func (m *monitor) show() {
	m.mu.Lock()
	defer m.mu.Unlock()
	fmt.Printf("--- the monitor has received %d registration(s); the latest:\n", len(m.seen))
	if n := len(m.seen); n > 0 {
		fmt.Println(m.seen[n-1])
	}
}
