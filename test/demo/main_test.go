package main

// The demo as `DEMO_KEEP=1 make demo` runs it: the binaries built from
// this tree, the demo itself built and run from a directory holding them
// in bin/ and the repository's testdata/. It prints the page's URL and
// credentials, the page answers with them while it waits, and Ctrl-C
// (SIGINT) ends it with status 0 and its temporary directory removed.

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestDemoKeepServing(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc not found: the demo's fake GPUs cannot be built")
	}
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
	t.Cleanup(func() { c.Process.Kill() })
	var printed strings.Builder
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var pageURL, password string
	timeout := time.After(90 * time.Second)
	for password == "" || !strings.Contains(printed.String(), "serving until Ctrl-C") {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("the demo ended before serving:\n%s", printed.String())
			}
			printed.WriteString(line + "\n")
			if m := regexp.MustCompile(`^page: +(http://127\.0\.0\.1:\d+)/$`).FindStringSubmatch(line); m != nil {
				pageURL = m[1]
			}
			if m := regexp.MustCompile(`^password: (\S+) `).FindStringSubmatch(line); m != nil {
				password = m[1]
			}
		case <-timeout:
			t.Fatalf("no page URL and password within 90s:\n%s", printed.String())
		}
	}
	if pageURL == "" || !strings.Contains(printed.String(), "user:     any name\n") {
		t.Fatalf("no page URL or user line:\n%s", printed.String())
	}
	// The page, with the credentials printed, as a browser sends them.
	req, _ := http.NewRequest("GET", pageURL+"/", nil)
	req.SetBasicAuth("someone", password)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "search_ranking") {
		t.Errorf("GET / with the printed credentials: %d\n%.400s", resp.StatusCode, body)
	}
	req, _ = http.NewRequest("GET", pageURL+"/", nil)
	req.SetBasicAuth("someone", "wrong")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 401 {
		t.Errorf("GET / with a wrong password: %v %v, want 401", resp, err)
	}
	// Ctrl-C.
	if err := c.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for line := range lines {
		printed.WriteString(line + "\n")
	}
	if err := c.Wait(); err != nil {
		t.Errorf("the demo after Ctrl-C: %v, want status 0\n%s", err, printed.String())
	}
	if !strings.Contains(printed.String(), "interrupt: stopping the monitor") {
		t.Errorf("no word of stopping:\n%s", printed.String())
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "paddle-demo-*")); len(left) != 0 {
		t.Errorf("the demo left %q behind", left)
	}
	if _, err := http.Get(pageURL + "/healthz"); err == nil {
		t.Error("the monitor still answers after Ctrl-C")
	}
}
