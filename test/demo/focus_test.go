package main

// The FOCUS export of the demo's fleet (MONITOR.md 20.15): the demo as
// `DEMO_KEEP=1 make demo` runs it — its supervised tasks, the node agent's
// reports of demo-node's three GPUs, the pod and the stray process — then,
// while it serves, one task declaring demo-node's three GPUs for 20 s after
// the agent stopped (instants the ledger counts unobserved). The month's
// Σ BilledCost equals the ledger's capacity cost plus the declared-basis
// cost on GPUs and instants outside the ledger, computed here by hand from
// the tasks' own times: the demo's tasks ran before demo-node's first
// report, and the late task's 60 GPU-seconds are absorbed by the
// platform's unobserved row (x_DeclaredOffsetGpuHours), not billed twice.

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/test/harness"
)

// buildDemo builds the binaries from this tree and the demo into a
// directory holding them in bin/ and the repository's testdata/, as `make
// demo` runs it.
func buildDemo(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	repo, _ := filepath.Abs("../..")
	if err := os.Symlink(filepath.Join(repo, "testdata"), filepath.Join(root, "testdata")); err != nil {
		t.Fatal(err)
	}
	for _, b := range []struct{ out, pkg, cgo string }{
		{"bin/paddle-entrypoint", ".", "0"}, {"bin/paddle-gpu-probe", "./cmd/paddle-gpu-probe", "1"},
		{"bin/paddle-monitor", "./cmd/paddle-monitor", "0"}, {"bin/paddle-node", "./cmd/paddle-node", "0"}, {"demo", "./test/demo", "0"},
	} {
		c := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(root, b.out), b.pkg)
		c.Dir, c.Env = repo, append(os.Environ(), "CGO_ENABLED="+b.cgo)
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", b.pkg, err, out)
		}
	}
	return root
}

// demoGPUs are the stand-in NVML library's UUIDs of GPUs 0, 1 and 2
// (testdata/fakenvml: GPU-a1b2c3NN-8f2d-4c1b-9a3e-1c2d3e4f5aNN).
var demoGPUs = []string{
	"GPU-a1b2c300-8f2d-4c1b-9a3e-1c2d3e4f5a00", "GPU-a1b2c301-8f2d-4c1b-9a3e-1c2d3e4f5a01", "GPU-a1b2c302-8f2d-4c1b-9a3e-1c2d3e4f5a02",
}

func TestDemoFocusReconciles(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole demo")
	}
	harness.Tool(t, "gcc")
	root := buildDemo(t)
	tmp := t.TempDir()
	c := exec.Command(filepath.Join(root, "demo"))
	c.Dir = root
	c.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "TMPDIR=" + tmp, "DEMO_KEEP=1"}
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c.Stderr = c.Stdout.(io.Writer)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	t.Cleanup(func() {
		c.Process.Signal(syscall.SIGINT)
		for range lines {
		}
		c.Wait()
	})
	var printed strings.Builder
	var url, admin string
	timeout := time.After(120 * time.Second)
	for !strings.Contains(printed.String(), "serving until Ctrl-C") {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("the demo ended before serving:\n%s", printed.String())
			}
			printed.WriteString(line + "\n")
			if m := regexp.MustCompile(`^page: +(http://127\.0\.0\.1:\d+)/$`).FindStringSubmatch(line); m != nil {
				url = m[1]
			}
			if m := regexp.MustCompile(`^password: (\S+) `).FindStringSubmatch(line); m != nil {
				admin = m[1]
			}
		case <-timeout:
			t.Fatalf("the demo did not serve within 120 s:\n%s", printed.String())
		}
	}
	go func() {
		for range lines {
		}
	}()
	dirs, _ := filepath.Glob(filepath.Join(tmp, "paddle-demo-*"))
	if len(dirs) != 1 || url == "" || admin == "" {
		t.Fatalf("no demo directory, page or token (%q):\n%s", dirs, printed.String())
	}
	dir := dirs[0]
	if b, _ := os.ReadFile(filepath.Join(dir, "prices.json")); !strings.Contains(string(b), `"NVIDIA A100*": 12.0`) {
		t.Fatalf("the demo's prices are not A100 at 12 an hour: %s", b)
	}
	call := func(method, path, body string) []byte {
		t.Helper()
		req, _ := http.NewRequest(method, url+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+admin)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "late-probe"+path)
		req.Header.Set("User-Agent", "paddle-entrypoint/test")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode >= 300 {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
		}
		return b
	}

	// By hand: every GPU-second the demo's tasks declared is outside the
	// ledger (they ended before demo-node's first report; the container's
	// task lists no GPU), billed as declared at 12 an hour (the stand-in
	// GPUs are NVIDIA A100-SXM4-80GB).
	var list struct {
		Tasks []struct {
			TaskID     string                    `json:"task_id"`
			Start      int64                     `json:"start_time"`
			LastSeen   *int64                    `json:"last_seen"`
			GPUs       []struct{ Share float64 } `json:"gpus"`
			Completion *struct {
				End int64 `json:"end_time"`
			} `json:"completion"`
		} `json:"tasks"`
	}
	if err := json.Unmarshal(call("GET", "/v1/tasks", ""), &list); err != nil {
		t.Fatal(err)
	}
	declaredGPUSeconds := 0.0
	for _, tk := range list.Tasks {
		end := tk.Start
		if tk.Completion != nil {
			end = tk.Completion.End
		}
		if tk.LastSeen != nil && *tk.LastSeen > end {
			end = *tk.LastSeen
		}
		for _, g := range tk.GPUs {
			declaredGPUSeconds += g.Share * float64(end-tk.Start)
		}
	}
	if declaredGPUSeconds <= 0 {
		t.Fatalf("the demo's tasks declared no GPU-seconds: %+v", list)
	}
	outside := declaredGPUSeconds * 12 / 3600

	// A task declaring demo-node's three GPUs from elsewhere for 20 s
	// after the agent stopped: 60 GPU-seconds the ledger counts
	// unobserved (its capacity runs to the clock), 0.2 billed as declared
	// and absorbed by the platform's unobserved row. It is registered
	// once the 20 s are past (the monitor counts no end after its clock).
	from := time.Now().Unix()
	time.Sleep(time.Until(time.Unix(from+21, 0)))
	var gpus []string
	for i, u := range demoGPUs {
		gpus = append(gpus, fmt.Sprintf(`{"index":%d,"uuid":%q,"name":"NVIDIA A100-SXM4-80GB","memory_total_bytes":1,"share":1}`, i, u))
	}
	call("POST", "/v1/task/register", fmt.Sprintf(`{"schema_version":1,"task_id":"late-probe","task_name":"probe","project":"search_probe",
		"owner":"carol@example.com","start_time":%d,"hostname":"elsewhere","labels":{},"gpu_count":3,"gpus":[%s]}`, from, strings.Join(gpus, ",")))
	call("POST", "/v1/task/complete", fmt.Sprintf(`{"schema_version":1,"task_id":"late-probe","start_time":%d,"end_time":%d,
		"duration_seconds":20,"exit_code":0,"gpu_count":3}`, from, from+20))

	month := time.Unix(from, 0).UTC().Format("2006-01")
	monitor := filepath.Join(root, "bin", "paddle-monitor")
	flags := []string{"--db", filepath.Join(dir, "paddle-monitor.db"), "--month", month, "--prices", filepath.Join(dir, "prices.json"),
		"--namespace-projects", filepath.Join(dir, "namespace-projects.json")}
	// The ledger's capacity grows with the clock (3 GPUs at 12 an hour:
	// 0.01 a second): read before and after the export.
	capacity := func() float64 {
		t.Helper()
		b, err := exec.Command(monitor, append([]string{"ledger", "--by", "model", "--format", "json"}, flags...)...).Output()
		if err != nil {
			t.Fatalf("ledger: %v", err)
		}
		var l struct {
			Total struct {
				CapacityCost float64 `json:"capacity_cost"`
			} `json:"total"`
		}
		if err := json.Unmarshal(b, &l); err != nil || l.Total.CapacityCost <= 0 {
			t.Fatalf("ledger: %v %s", err, b)
		}
		return l.Total.CapacityCost
	}
	before := capacity()
	body, err := exec.Command(monitor, append([]string{"export", "focus"}, flags...)...).Output()
	if err != nil {
		t.Fatalf("export focus: %v", err)
	}
	after := capacity()
	recs, err := csv.NewReader(strings.NewReader(string(body))).ReadAll()
	if err != nil || len(recs) < 2 {
		t.Fatalf("export: %v\n%s", err, body)
	}
	col := map[string]int{}
	for i, h := range recs[0] {
		col[h] = i
	}
	num := func(r []string, name string) float64 {
		v, _ := strconv.ParseFloat(r[col[name]], 64)
		return v
	}
	var sum, declared, absorbed float64
	for _, r := range recs[1:] {
		if r[col["ChargeClass"]] != "" {
			continue
		}
		sum += num(r, "BilledCost")
		if r[col["x_BillingBasis"]] == "declared" {
			declared += num(r, "BilledCost")
		}
		absorbed += num(r, "x_DeclaredOffsetGpuHours")
	}
	// The declared rows: the demo's tasks and the late one's 0.2.
	if math.Abs(declared-(outside+0.2)) > 2e-6 {
		t.Errorf("declared-basis rows %v, want %v (by hand) + 0.2", declared, outside)
	}
	if math.Abs(absorbed-60.0/3600) > 2e-6 {
		t.Errorf("x_DeclaredOffsetGpuHours %v, want 60 GPU-seconds = %v", absorbed, 60.0/3600)
	}
	// Σ BilledCost = capacity cost + the declared cost outside the ledger
	// (the ledger prints money to the cent).
	if sum < before+outside-0.005 || sum > after+outside+0.005 {
		t.Errorf("Σ BilledCost %v, want the ledger's capacity cost (%v to %v) + %v declared outside the ledger\n%s",
			sum, before, after, outside, body)
	}
}
