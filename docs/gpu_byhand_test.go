package docs

// The first screen of gpu.md, "Everything by hand, on the fake NVML", run
// as a reader would run it: the block's commands in bash, against the
// binaries built from this tree and the fake NVML compiled from
// testdata/fakenvml, in a temporary directory and on a free port instead
// of /tmp/paddle and 8080.

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/paddle-entrypoint/paddle-entrypoint/test/harness"
)

func TestDocsGPUByHand(t *testing.T) {
	harness.Tool(t, "gcc")
	harness.Tool(t, "curl")
	doc, err := os.ReadFile("gpu.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)## Everything by hand, on the fake NVML\n.*?```sh\n(.*?)```").FindSubmatch(doc)
	if m == nil {
		t.Fatal("gpu.md has no sh block under \"Everything by hand, on the fake NVML\"")
	}
	script := string(m[1])
	if !strings.HasPrefix(script, "make build\n") {
		t.Fatalf("the block does not start with make build:\n%s", script)
	}
	if i := strings.Index(string(doc), "## Everything by hand"); strings.Count(string(doc[:i]), "\n") > 10 {
		t.Errorf("the section starts on line %d: not in the first screen", strings.Count(string(doc[:i]), "\n")+1)
	}

	// The repository as the block sees it: bin/ built here, testdata/.
	root := t.TempDir()
	repo, _ := filepath.Abs("..")
	if err := os.Symlink(filepath.Join(repo, "testdata"), filepath.Join(root, "testdata")); err != nil {
		t.Fatal(err)
	}
	for _, b := range []struct{ out, pkg, cgo string }{
		{"paddle-entrypoint", ".", "0"}, {"paddle-gpu-probe", "./cmd/paddle-gpu-probe", "1"}, {"paddle-monitor", "./cmd/paddle-monitor", "0"},
	} {
		c := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(root, "bin", b.out), b.pkg)
		c.Dir, c.Env = repo, append(os.Environ(), "CGO_ENABLED="+b.cgo)
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", b.pkg, err, out)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	work := filepath.Join(t.TempDir(), "paddle")
	script = strings.TrimPrefix(script, "make build\n")
	script = strings.ReplaceAll(script, "/tmp/paddle", work)
	script = strings.ReplaceAll(script, "127.0.0.1:8080", "127.0.0.1:"+port)
	c := exec.Command("timeout", "60", "bash", "-e", "-c", "trap 'kill %1 2>/dev/null' EXIT\n"+script)
	c.Dir = root
	c.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + root}
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("the block failed: %v\n%s", err, out)
	}
	text := string(out)
	for _, want := range []string{
		// The probe: two fake A100s.
		`"name":"NVIDIA A100-SXM4-80GB"`, `"uuid":"GPU-a1b2c301-8f2d-4c1b-9a3e-1c2d3e4f5a01"`,
		"training\n",
		// The task list: the task, its project and owner, completed.
		`"project":"try"`, `"owner":"me@example.com"`, `"gpu_count":2`, `"exit_code":0`,
		// The report: one row, project try, one task.
		"\ntry          1 ", "\ntotal        1 ",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "level=WARN") || strings.Contains(text, "level=ERROR") {
		t.Errorf("a warning or an error while following the docs:\n%s", text)
	}
}
