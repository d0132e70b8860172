package labels

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "paddle-task.labels")
	if err := os.WriteFile(path, []byte("old=1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	old := syscall.Umask(0o077) // the mode must not depend on the umask
	defer syscall.Umask(old)
	s, _ := parse("PADDLE_PROJECT=p1")
	if err := WriteFile(path, s); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil || string(got) != string(s.Format()) {
		t.Fatalf("file = %q, %v; want %q", got, err, s.Format())
	}
	fi, _ := os.Stat(path)
	if fi.Mode().Perm() != FileMode {
		t.Errorf("mode = %v, want %v", fi.Mode().Perm(), fs.FileMode(FileMode))
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only the labels file: %v", len(entries), entries)
	}
}

func TestWriteFileErrors(t *testing.T) {
	dir := t.TempDir()
	notDir := filepath.Join(dir, "file")
	os.WriteFile(notDir, nil, 0o644)
	s, _ := parse()
	tests := []struct {
		name string
		path string
		want error
	}{
		{"missing directory", filepath.Join(dir, "missing", "l"), fs.ErrNotExist},
		{"parent is a file", filepath.Join(notDir, "l"), syscall.ENOTDIR},
		{"target is a directory", dir, nil},
	}
	for _, tt := range tests {
		err := WriteFile(tt.path, s)
		if err == nil {
			t.Errorf("%s: no error", tt.name)
			continue
		}
		if tt.want != nil && !errors.Is(err, tt.want) {
			t.Errorf("%s: error %v is not %v", tt.name, err, tt.want)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("temporary files left behind: %v", entries)
	}
}

func ExampleSet_Format() {
	s, _ := Parse([]string{"PADDLE_TASK_NAME=resnet50", "PADDLE_PROJECT=search_ranking", "PADDLE_LABEL_COST_CENTER=cc-1024"},
		Options{Hostname: "node-1", Now: now, NewID: func() string { return "3f1c" }})
	s.SetGPUs(1, []string{"GPU-8a1f"})
	os.Stdout.Write(s.Format())
	// Output:
	// task_name=resnet50
	// project=search_ranking
	// owner=anonymous
	// gpu_count=1
	// start_time=1732950000
	// task_id=3f1c
	// gpu_uuids=GPU-8a1f
	// hostname=node-1
	// cost_center=cc-1024
}

// A link at the labels path (the image's /var/run/paddle-task.labels, into
// a directory writable by every user) is followed, and stays a link.
func TestWriteFileFollowsLink(t *testing.T) {
	root := t.TempDir()
	shared := filepath.Join(root, "dev", "shm")
	if err := os.MkdirAll(filepath.Join(root, "run"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../dev/shm/paddle-task.labels", filepath.Join(root, "run", "paddle-task.labels")); err != nil {
		t.Fatal(err)
	}
	// Reached through a linked directory, as /var/run -> /run: the relative
	// link resolves from where it really is.
	if err := os.MkdirAll(filepath.Join(root, "var"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../run", filepath.Join(root, "var", "run")); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(root, "var", "run", "paddle-task.labels")
	s, _ := Parse([]string{"PADDLE_TASK_NAME=linked"}, Options{Hostname: "h", Now: time.Unix(1700000000, 0)})
	for i := 0; i < 2; i++ { // the second write replaces the first through the same link
		if err := WriteFile(link, s); err != nil {
			t.Fatal(err)
		}
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the link was replaced: %v %v", fi, err)
	}
	b, err := os.ReadFile(link)
	if err != nil || !strings.HasPrefix(string(b), "task_name=linked\n") {
		t.Fatalf("through the link: %q, %v", b, err)
	}
	ents, _ := os.ReadDir(shared)
	if len(ents) != 1 || ents[0].Name() != "paddle-task.labels" {
		t.Errorf("target directory holds %v, want only paddle-task.labels", ents)
	}
}

func TestWriteFileLinkLoop(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	os.Symlink(b, a)
	os.Symlink(a, b)
	s, _ := Parse(nil, Options{Hostname: "h", Now: time.Unix(1700000000, 0)})
	if err := WriteFile(a, s); err == nil || !strings.Contains(err.Error(), "too many levels") {
		t.Errorf("WriteFile through a loop: %v, want ELOOP", err)
	}
	for _, p := range []string{a, b} {
		if fi, err := os.Lstat(p); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("%s is no longer the link: %v", p, err)
		}
	}
}

// The walk judges links the same with openat2 and with the per-name
// O_NOFOLLOW walk of kernels without it.
func TestResolveWithAndWithoutOpenat2(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: links of another user")
	}
	root := t.TempDir()
	shm := filepath.Join(root, "shm")
	secret := filepath.Join(root, "secret")
	os.Mkdir(shm, 0o777|os.ModeSticky)
	os.Chmod(shm, 0o777|os.ModeSticky)
	os.Mkdir(secret, 0o700)
	os.Symlink(filepath.Join(secret, "f"), filepath.Join(shm, "theirs"))
	os.Lchown(filepath.Join(shm, "theirs"), 65534, 65534)
	os.Symlink(filepath.Join(secret, "f"), filepath.Join(shm, "mine"))
	os.Symlink("./shm/../shm/x", filepath.Join(root, "rel"))
	for _, openat2 := range []bool{true, false} {
		for _, tc := range []struct {
			path, dir, name string
			refused         bool
		}{
			{filepath.Join(shm, "theirs"), "", "", true},
			{filepath.Join(shm, "mine"), secret, "f", false},
			{filepath.Join(root, "rel"), shm, "x", false},
			{filepath.Join(shm, "new"), shm, "new", false},
			{filepath.Join(root, "shm", "..", "shm", "new"), shm, "new", false},
		} {
			dir, name, err := resolve(tc.path, &walk{euid: 0, openat2: openat2})
			if tc.refused {
				if !errors.Is(err, ErrUntrustedLink) {
					t.Errorf("openat2 %v, %s: %v, want ErrUntrustedLink", openat2, tc.path, err)
				}
				continue
			}
			if err != nil {
				t.Errorf("openat2 %v, %s: %v", openat2, tc.path, err)
				continue
			}
			got, _ := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", dir))
			unix.Close(dir)
			if got != tc.dir || name != tc.name {
				t.Errorf("openat2 %v, %s: resolved to %s / %s, want %s / %s", openat2, tc.path, got, name, tc.dir, tc.name)
			}
		}
	}
}
