package docs

// Every command the docs mark runnable, run as written.
//
// The marker: a line `<!-- runnable -->` (invisible once rendered)
// directly before a ```sh block in README.md or docs/*.md. Such a block
// must run on one machine as a reader would paste it, and this test runs
// it: `bash -e -o pipefail`, in a fresh directory that holds bin/ (every
// shipped executable built from this tree, bin/ on PATH) and testdata/,
// with the fake NVML (testdata/fakenvml, two GPUs: LD_LIBRARY_PATH and
// FAKE_NVML_GPUS=2, as docs/gpu.md's first block sets them), curl, HOME that
// directory. So that a block written for a real machine touches none of
// this one, /etc/, /var/lib/ and /var/run/ are rewritten to a root under
// the directory, and 127.0.0.1:8080 to a free port. Jobs the block left in
// the background are killed at its end; it must exit 0 within 60 s.
//
// Mark a block when it needs nothing but this repository (the monitor's
// token, report and ledger; the node agent's once and final; the
// entrypoint's labels and spool); leave unmarked what needs a cluster,
// Docker, a registry or a server elsewhere.

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

// RunnableMarker is the line that marks the next ```sh block runnable.
const RunnableMarker = "<!-- runnable -->"

// runnableBlock is one marked block: where it is and its text.
type runnableBlock struct {
	file string
	line int
	text string
}

// runnableBlocks returns the marked blocks of doc, or an error naming a
// marker that is not directly followed by a ```sh block.
func runnableBlocks(file, doc string) ([]runnableBlock, []string) {
	var blocks []runnableBlock
	var problems []string
	lines := strings.Split(doc, "\n")
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != RunnableMarker {
			continue
		}
		if i+1 >= len(lines) || lines[i+1] != "```sh" {
			problems = append(problems, file+":"+strconv.Itoa(i+1)+": "+RunnableMarker+" is not followed by a ```sh block")
			continue
		}
		var body []string
		j := i + 2
		for ; j < len(lines) && lines[j] != "```"; j++ {
			body = append(body, lines[j])
		}
		if j == len(lines) {
			problems = append(problems, file+":"+strconv.Itoa(i+2)+": the block never ends")
			break
		}
		blocks = append(blocks, runnableBlock{file: file, line: i + 3, text: strings.Join(body, "\n") + "\n"})
		i = j
	}
	return blocks, problems
}

func TestRunnableBlocksAreFound(t *testing.T) {
	for _, tt := range []struct {
		name, doc string
		blocks    []string
		problems  int
	}{
		{"none", "text\n```sh\nls\n```\n", nil, 0},
		{"one", "a\n<!-- runnable -->\n```sh\necho hi\necho there\n```\nb\n", []string{"echo hi\necho there\n"}, 0},
		{"two", "<!-- runnable -->\n```sh\nx\n```\n<!-- runnable -->\n```sh\ny\n```\n", []string{"x\n", "y\n"}, 0},
		{"not sh", "<!-- runnable -->\n```yaml\nx: 1\n```\n", nil, 1},
		{"a gap", "<!-- runnable -->\n\n```sh\nx\n```\n", nil, 1},
		{"unterminated", "<!-- runnable -->\n```sh\nx\n", nil, 1},
	} {
		blocks, problems := runnableBlocks("d.md", tt.doc)
		var got []string
		for _, b := range blocks {
			got = append(got, b.text)
		}
		if strings.Join(got, "|") != strings.Join(tt.blocks, "|") || len(problems) != tt.problems {
			t.Errorf("%s: blocks %q problems %q, want %q and %d", tt.name, got, problems, tt.blocks, tt.problems)
		}
	}
}

// machinePath is an absolute path of the machine a block may name.
var machinePath = regexp.MustCompile(`(^|[\s=:'"(])/(etc|var/lib|var/run)/`)

func TestDocsRunnableBlocks(t *testing.T) {
	harness.Tool(t, "gcc")
	harness.Tool(t, "curl") // the blocks wait for a server as docs/gpu.md does
	files, _ := filepath.Glob("*.md")
	files = append([]string{"../README.md"}, files...)
	var blocks []runnableBlock
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		found, problems := runnableBlocks(strings.TrimPrefix(f, "../"), string(b))
		for _, p := range problems {
			t.Error(p)
		}
		blocks = append(blocks, found...)
	}
	if len(blocks) < 1 {
		t.Fatalf("%d runnable blocks, want node.md's at least", len(blocks))
	}

	bin := buildForDocs(t)
	for _, b := range blocks {
		t.Run(b.file+":"+strconv.Itoa(b.line), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			if err := os.Symlink(bin, filepath.Join(dir, "bin")); err != nil {
				t.Fatal(err)
			}
			repo, _ := filepath.Abs("..")
			if err := os.Symlink(filepath.Join(repo, "testdata"), filepath.Join(dir, "testdata")); err != nil {
				t.Fatal(err)
			}
			root := filepath.Join(dir, "root")
			script := machinePath.ReplaceAllString(b.text, "${1}"+root+"/${2}/")
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
			l.Close()
			script = strings.ReplaceAll(script, "127.0.0.1:8080", "127.0.0.1:"+port)
			c := exec.Command("timeout", "60", "bash", "-e", "-o", "pipefail", "-c", "trap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n"+script)
			c.Dir = dir
			c.Env = []string{"PATH=" + filepath.Join(dir, "bin") + ":/usr/local/bin:/usr/bin:/bin", "HOME=" + dir,
				"LD_LIBRARY_PATH=" + filepath.Join(bin, "nvidia"), "FAKE_NVML_GPUS=2"}
			out, err := c.CombinedOutput()
			if err != nil {
				t.Fatalf("%s line %d, as written, fails: %v\n%s\n--- the block as run:\n%s", b.file, b.line, err, out, script)
			}
			if strings.Contains(string(out), "level=ERROR") {
				t.Errorf("an error while running %s line %d:\n%s", b.file, b.line, out)
			}
		})
	}
}

// buildForDocs builds what `make build` builds, and the fake NVML (under
// nvidia/), into a directory of the test.
func buildForDocs(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	repo, _ := filepath.Abs("..")
	var cmds []*exec.Cmd
	for _, b := range []struct {
		out, pkg string
		cgo      bool
	}{
		{"paddle-entrypoint", ".", false}, {"paddle-gpu-probe", "./cmd/paddle-gpu-probe", true},
		{"paddle-monitor", "./cmd/paddle-monitor", false}, {"paddle-node", "./cmd/paddle-node", false},
	} {
		c := harness.GoBuild(filepath.Join(dir, b.out), b.pkg, b.cgo)
		c.Dir = repo
		cmds = append(cmds, c)
	}
	if err := os.MkdirAll(filepath.Join(dir, "nvidia"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmds = append(cmds, harness.CC(filepath.Join(dir, "nvidia", "libnvidia-ml.so.1"), filepath.Join(repo, "testdata/fakenvml/fakenvml.c"), "-shared", "-fPIC"))
	if err := harness.Run(cmds...); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestDocsNoSudo: the docs' commands assume root where they need it (the
// image and the nodes have no sudo): none runs `sudo`.
func TestDocsNoSudo(t *testing.T) {
	files, _ := filepath.Glob("*.md")
	sudo := regexp.MustCompile(`(^|[\s;&|(` + "`" + `])sudo\s`)
	for _, f := range append([]string{"../README.md"}, files...) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if sudo.MatchString(line) {
				t.Errorf("%s:%d runs sudo: %s", f, i+1, strings.TrimSpace(line))
			}
		}
	}
}
