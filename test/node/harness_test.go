package main

// Black-box tests of the built paddle-node (docs/node.md). TestMain builds
// it as `make build` does (static, cgo-free), the GPU probe (cgo) beside
// it, the entrypoint, the fake NVML library (testdata/fakenvml) and a
// static pause program for container roots, from the repository root
// (test/harness), which stays the working directory. The tests run the
// binary with the fake NVML reporting real processes of this machine,
// placed in real cgroups.

import (
	"bufio"
	"bytes"
	"compress/gzip"
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
	"syscall"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
	"github.com/paddle-entrypoint/paddle-entrypoint/test/harness"
)

var bin struct {
	dir, node, probe, nvml, pause string
}

func TestMain(m *testing.M) {
	code := 1
	err := harness.ChdirRoot()
	var dir string
	if err == nil {
		dir, err = os.MkdirTemp("", "paddle-node-test-")
	}
	if err == nil {
		err = build(dir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "building:", err)
	} else {
		code = m.Run()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

func build(dir string) error {
	bin.dir = dir
	bin.node = filepath.Join(dir, "paddle-node")
	bin.probe = filepath.Join(dir, "paddle-gpu-probe")
	bin.nvml = filepath.Join(dir, "nvml")
	bin.pause = filepath.Join(dir, "pause")
	if err := os.MkdirAll(bin.nvml, 0o755); err != nil {
		return err
	}
	probe := harness.GoBuild(bin.probe, "./cmd/paddle-gpu-probe", true)
	probe.Env = append(probe.Env, "CGO_CFLAGS=-O2 -g -Wno-deprecated-declarations")
	return harness.Run(
		harness.GoBuild(bin.node, "./cmd/paddle-node", false, "-ldflags", "-X main.version=test-1"),
		probe,
		harness.GoBuild(filepath.Join(dir, "paddle-entrypoint"), ".", false),
		harness.CC(filepath.Join(bin.nvml, "libnvidia-ml.so.1"), "testdata/fakenvml/fakenvml.c", "-shared", "-fPIC"),
		harness.CC(bin.pause, "test/node/testdata/pause.c", "-static"),
	)
}

// nodeEnv is the environment of a paddle-node run: the fake NVML with the
// state file, the probe, and extra variables.
func nodeEnv(state string, extra ...string) []string {
	env := []string{
		"PATH=/usr/bin:/bin:/usr/sbin:/sbin",
		"LD_LIBRARY_PATH=" + bin.nvml,
		"FAKE_NVML_STATE=" + state,
		"PADDLE_NODE_PROBE=" + bin.probe,
		"PADDLE_NODE_NAME=gpu-node-17",
		// No kubelet or runtime here unless a test says so.
		"PADDLE_NODE_POD_RESOURCES_SOCKET=/nonexistent/kubelet.sock",
		"PADDLE_NODE_CRI_SOCKET=/nonexistent/cri.sock",
		"PADDLE_NODE_DOCKER_SOCKET=/nonexistent/docker.sock",
	}
	return append(env, extra...)
}

// lockedBuffer is an output collected while the process runs.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// nodeProc is one running paddle-node.
type nodeProc struct {
	cmd            *exec.Cmd
	stdout, stderr lockedBuffer
	done           chan struct{}
	code           int
}

func startNode(t *testing.T, env []string, args ...string) *nodeProc {
	t.Helper()
	p := &nodeProc{cmd: exec.Command(bin.node, args...), done: make(chan struct{})}
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.cmd.Wait()
		p.code = p.cmd.ProcessState.ExitCode()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

// wait waits for the exit (at most limit) and returns the exit code.
func (p *nodeProc) wait(t *testing.T, limit time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.code
	case <-time.After(limit):
		t.Fatalf("paddle-node did not exit within %v\nstderr:\n%s", limit, p.stderr.String())
		return -1
	}
}

// runNode runs paddle-node to its end.
func runNode(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	p := startNode(t, env, args...)
	code := p.wait(t, 60*time.Second)
	return code, p.stdout.String(), p.stderr.String()
}

// once runs `paddle-node once` and decodes its report.
func once(t *testing.T, env []string, args ...string) wire.NodeReport {
	t.Helper()
	code, out, errs := runNode(t, env, append([]string{"once"}, args...)...)
	if code != 0 {
		t.Fatalf("once: exit %d\n%s", code, errs)
	}
	var r wire.NodeReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("once printed no report: %v\n%s\nstderr:\n%s", err, out, errs)
	}
	// The monitor's own rules for a report (what it answers 400).
	if err := r.Validate(time.Now()); err != nil {
		t.Errorf("the report breaks the monitor's rules: %v\n%s", err, out)
	}
	return r
}

// writeState writes the fake NVML's state file.
func writeState(t *testing.T, path string, lines ...string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// receiver is a monitor's node report endpoint for tests of delivery: it
// decodes each report and answers with status(report).
type receiver struct {
	URL     string
	mu      sync.Mutex
	got     []wire.NodeReport
	refused []wire.NodeReport // answered 4xx
	auth    []string
	status  func(wire.NodeReport) int
	srv     *http.Server
}

func newReceiver(t *testing.T, status func(wire.NodeReport) int) *receiver {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &receiver{URL: "http://" + ln.Addr().String(), status: status}
	r.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/v1/nodes/report" || req.Method != http.MethodPost {
			http.NotFound(w, req)
			return
		}
		// The agent sends its reports gzip-encoded, always.
		if enc := req.Header.Get("Content-Encoding"); enc != "gzip" {
			t.Errorf("a report arrived with Content-Encoding %q, want gzip", enc)
			http.Error(w, "not gzip", http.StatusUnsupportedMediaType)
			return
		}
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		var body io.Reader = zr
		b, err := io.ReadAll(io.LimitReader(body, wire.MaxNodeReportBytes+1))
		var rep wire.NodeReport
		if err == nil {
			err = json.Unmarshal(b, &rep)
		}
		if err != nil || len(b) > wire.MaxNodeReportBytes {
			http.Error(w, fmt.Sprint("bad body: ", err), 400)
			return
		}
		if err := rep.Validate(time.Now()); err != nil {
			t.Errorf("a report breaks the monitor's rules: %v\n%s", err, b)
			http.Error(w, err.Error(), 400)
			return
		}
		r.mu.Lock()
		st := 201
		if r.status != nil {
			st = r.status(rep)
		}
		switch {
		case st/100 == 2:
			r.got = append(r.got, rep)
			r.auth = append(r.auth, req.Header.Get("Authorization"))
		case st/100 == 4:
			r.refused = append(r.refused, rep)
		}
		r.mu.Unlock()
		w.WriteHeader(st)
	})}
	go r.srv.Serve(ln)
	t.Cleanup(func() { r.srv.Close() })
	return r
}

func (r *receiver) reports() []wire.NodeReport {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]wire.NodeReport(nil), r.got...)
}

// waitFor polls cond every 100 ms until it holds (at most limit).
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", limit, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// metricsText fetches /metrics.
func metricsText(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// metricValue is the value of the series whose line starts with name
// (with its labels), or -1.
func metricValue(text, name string) float64 {
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			var v float64
			fmt.Sscan(rest, &v)
			return v
		}
	}
	return -1
}

// freeAddr is a 127.0.0.1 port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// signal sends sig to the node.
func (p *nodeProc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

func httpGet(url string) (string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}
