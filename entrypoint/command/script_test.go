package command

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestScriptFallback(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, content string
		ok            bool
	}{
		{"script", "echo hi\n", true},
		{"empty", "", true},
		{"NUL after the first line", "echo hi\n\x00\x01", true},
		{"ELF", "\x7fELF\x02\x01\x01\x00", false},
		{"NUL in the first line", "abc\x00def\n", false},
	}
	for _, tt := range tests {
		p := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "-"))
		if err := os.WriteFile(p, []byte(tt.content), 0o755); err != nil {
			t.Fatal(err)
		}
		sh, argv, ok := ScriptFallback(p, []string{"train", "--lr", "0.1"})
		if ok != tt.ok {
			t.Errorf("%s: ok = %v, want %v", tt.name, ok, tt.ok)
			continue
		}
		if ok && (sh != "/bin/sh" || strings.Join(argv, " ") != "/bin/sh "+p+" --lr 0.1") {
			t.Errorf("%s: %q %q", tt.name, sh, argv)
		}
	}
	if _, _, ok := ScriptFallback(filepath.Join(dir, "missing"), []string{"x"}); ok {
		t.Error("a missing file falls back to the shell")
	}
}
