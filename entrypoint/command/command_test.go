package command

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestResolve(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "train")
	os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755)
	plain := filepath.Join(dir, "data")
	os.WriteFile(plain, []byte("x"), 0o644)
	other := t.TempDir()
	os.WriteFile(filepath.Join(other, "data"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(other, "train"), []byte("#!/bin/sh\n"), 0o755)

	tests := []struct {
		name, cmd, path string
		want            string
		status          int
	}{
		{"absolute", exe, "", exe, 0},
		{"in PATH", "train", dir, exe, 0},
		{"first match in PATH wins", "train", dir + ":" + other, exe, 0},
		{"skips non-executable match", "data", dir + ":" + other, "", ExitNotExecutable},
		{"not found", "nope", dir, "", ExitNotFound},
		{"absolute not found", filepath.Join(dir, "nope"), "", "", ExitNotFound},
		{"not executable", plain, "", "", ExitNotExecutable},
		{"directory", dir, "", "", ExitNotExecutable},
		{"under a file", filepath.Join(plain, "x"), "", "", ExitNotFound},
		{"empty", "", dir, "", ExitNotFound},
		{"default PATH", "sh", "", "", -1},
	}
	for _, tt := range tests {
		got, err := Resolve(tt.cmd, tt.path)
		switch {
		case tt.status == -1:
			if err != nil {
				t.Errorf("%s: %v", tt.name, err)
			}
		case tt.status == 0:
			if err != nil || got != tt.want {
				t.Errorf("%s: Resolve = %q, %v; want %q", tt.name, got, err, tt.want)
			}
		default:
			var ce *Error
			if !errors.As(err, &ce) || ce.Status != tt.status {
				t.Errorf("%s: Resolve = %q, %v; want status %d", tt.name, got, err, tt.status)
			}
		}
	}
}

func TestResolveNotFoundIsErrNotExist(t *testing.T) {
	_, err := Resolve("/nonexistent/x", "")
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("error %v is not fs.ErrNotExist", err)
	}
}

func TestEnv(t *testing.T) {
	tests := []struct {
		in   []string
		want []string
	}{
		{[]string{"A=1", "B=2"}, []string{"A=1", "B=2", "PADDLE_TASK_ID=t"}},
		{[]string{"PADDLE_TASK_ID=bad id", "A=1"}, []string{"PADDLE_TASK_ID=t", "A=1"}},
		{[]string{"PADDLE_TASK_ID=x", "PADDLE_TASK_ID=y"}, []string{"PADDLE_TASK_ID=t"}},
		{nil, []string{"PADDLE_TASK_ID=t"}},
		{[]string{"PADDLE_TASK_IDX=1"}, []string{"PADDLE_TASK_IDX=1", "PADDLE_TASK_ID=t"}},
	}
	for _, tt := range tests {
		got := Env(tt.in, "t")
		if len(got) != len(tt.want) {
			t.Errorf("Env(%q) = %q, want %q", tt.in, got, tt.want)
			continue
		}
		for i := range got {
			if got[i] != tt.want[i] {
				t.Errorf("Env(%q) = %q, want %q", tt.in, got, tt.want)
			}
		}
	}
}
