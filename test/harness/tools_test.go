package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// fakeTB records what Tool does to a test instead of ending it.
type fakeTB struct {
	testing.TB
	skipped, failed, logged string
}

func (f *fakeTB) Helper()                           {}
func (f *fakeTB) Name() string                      { return "TestFake/sub" }
func (f *fakeTB) Skip(args ...any)                  { f.skipped = fmt.Sprint(args...) }
func (f *fakeTB) Fatalf(format string, args ...any) { f.failed = fmt.Sprintf(format, args...) }
func (f *fakeTB) Log(args ...any)                   { f.logged = fmt.Sprint(args...) }
func (f *fakeTB) Logf(format string, args ...any)   { f.logged = fmt.Sprintf(format, args...) }

func TestTool(t *testing.T) {
	bin := t.TempDir()
	// alertmanager under its upstream name, and a promtool that is not
	// executable (not a tool).
	if err := os.WriteFile(filepath.Join(bin, "alertmanager"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "promtool"), []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, tool, require string
		path, skipped       string
		failed              string
		line                string
	}{
		{name: "found by its other name", tool: "prometheus-alertmanager", path: filepath.Join(bin, "alertmanager")},
		{name: "missing", tool: "promtool",
			skipped: "skipped: needs promtool (Debian package prometheus)",
			line:    "needs promtool (Debian package prometheus)\ttest/harness\tTestFake/sub\n"},
		{name: "missing, another package", tool: "etcd",
			skipped: "skipped: needs etcd (Debian package etcd-server)",
			line:    "needs etcd (Debian package etcd-server)\ttest/harness\tTestFake/sub\n"},
		{name: "missing under CI", tool: "chromium", require: "1",
			failed: "needs chromium (Debian package chromium), and PADDLE_TEST_REQUIRE_TOOLS=1 makes that a failure"},
		{name: "not in the table", tool: "no-such-tool",
			failed: `harness.Tool: "no-such-tool" is not in the table of tools (test/harness/tools.go): add it with its Debian package`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			skips := filepath.Join(t.TempDir(), "skips")
			t.Setenv("PATH", bin)
			t.Setenv(RequireToolsEnv, tt.require)
			t.Setenv(SkipsEnv, skips)
			f := &fakeTB{TB: t}
			p := Tool(f, tt.tool)
			if p != tt.path || f.skipped != tt.skipped || f.failed != tt.failed {
				t.Errorf("Tool(%q) = %q, skipped %q, failed %q; want %q, %q, %q", tt.tool, p, f.skipped, f.failed, tt.path, tt.skipped, tt.failed)
			}
			b, _ := os.ReadFile(skips)
			if string(b) != tt.line {
				t.Errorf("summary file %q, want %q", b, tt.line)
			}
		})
	}
}

func TestToolIfAnyAndPostgres(t *testing.T) {
	skips := filepath.Join(t.TempDir(), "skips")
	t.Setenv("PATH", t.TempDir())
	t.Setenv(RequireToolsEnv, "")
	t.Setenv(RequirePostgresEnv, "")
	t.Setenv(SkipsEnv, skips)
	f := &fakeTB{TB: t}
	if p, ok := ToolIfAny(f, "promtool"); p != "" || ok || f.skipped != "" || f.logged != "not checked: needs promtool (Debian package prometheus)" {
		t.Errorf("ToolIfAny: %q %v, skipped %q, logged %q", p, ok, f.skipped, f.logged)
	}
	Postgres(f, fmt.Errorf("no initdb anywhere"))
	if f.skipped != "skipped: needs PostgreSQL (Debian package postgresql): no initdb anywhere" {
		t.Errorf("Postgres skipped %q", f.skipped)
	}
	b, _ := os.ReadFile(skips)
	want := "needs promtool (Debian package prometheus)\ttest/harness\tTestFake/sub\n" +
		"needs PostgreSQL (Debian package postgresql)\ttest/harness\tTestFake/sub\n"
	if string(b) != want {
		t.Errorf("summary file %q, want %q", b, want)
	}

	t.Setenv(RequirePostgresEnv, "1")
	f = &fakeTB{TB: t}
	Postgres(f, fmt.Errorf("no initdb anywhere"))
	if f.skipped != "" || f.failed != "needs PostgreSQL (Debian package postgresql): no initdb anywhere, and PADDLE_TEST_REQUIRE_POSTGRES=1 makes that a failure" {
		t.Errorf("Postgres under PADDLE_TEST_REQUIRE_POSTGRES=1: skipped %q, failed %q", f.skipped, f.failed)
	}
}

func TestToolAt(t *testing.T) {
	t.Setenv(RequireToolsEnv, "")
	t.Setenv(SkipsEnv, "")
	f := &fakeTB{TB: t}
	missing := filepath.Join(t.TempDir(), "kube-apiserver")
	if p := ToolAt(f, "kube-apiserver", missing, "run scripts/kube-apiserver.sh"); p != missing || f.skipped != "skipped: needs kube-apiserver (run scripts/kube-apiserver.sh)" {
		t.Errorf("ToolAt: %q, skipped %q", p, f.skipped)
	}
}
