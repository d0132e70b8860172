package gpu

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// touch creates the files, and their directories, under root.
func touch(t *testing.T, root string, names ...string) {
	t.Helper()
	for _, n := range names {
		p := filepath.Join(root, n)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestDeviceNodes(t *testing.T) {
	root := t.TempDir()
	touch(t, root, "dev/nvidia10", "dev/nvidia2", "dev/nvidia0", "dev/nvidiactl", "dev/nvidia-uvm",
		"dev/nvidia-uvm-tools", "dev/nvidia-modeset", "dev/nvidia-caps/nvidia-cap1", "dev/nvidia1x", "dev/null")
	got := deviceNodes(root)
	var names []string
	for _, p := range got {
		names = append(names, filepath.Base(p))
	}
	// Ordered by minor number, not by name; control and UVM nodes are not GPUs.
	if want := "nvidia0,nvidia2,nvidia10"; strings.Join(names, ",") != want {
		t.Errorf("deviceNodes = %v, want %s", names, want)
	}
	if n := deviceNodes(t.TempDir()); n != nil {
		t.Errorf("no /dev: deviceNodes = %v", n)
	}
}

func TestFindLibrary(t *testing.T) {
	tests := []struct {
		name   string
		files  []string // under root
		cache  string   // contents of root/etc/ld.so.cache; "" for none
		ldPath []string // directories under root put in LD_LIBRARY_PATH
		found  bool
	}{
		{name: "nothing", found: false},
		{name: "LD_LIBRARY_PATH", files: []string{"opt/nv/" + LibraryName}, ldPath: []string{"opt/other", "opt/nv"}, found: true},
		{name: "LD_LIBRARY_PATH without it", files: []string{"opt/nv/libnvidia-ml.so"}, ldPath: []string{"opt/nv"}, found: false},
		{name: "loader cache", cache: "ld.so-1.7.0\x00glibc-ld.so.cache1.1\x00" + LibraryName + "\x00/usr/lib/x86_64-linux-gnu/" + LibraryName, found: true},
		{name: "loader cache without it", cache: "glibc-ld.so.cache1.1\x00libc.so.6\x00", found: false},
		{name: "/usr/lib/x86_64-linux-gnu", files: []string{"usr/lib/x86_64-linux-gnu/" + LibraryName}, found: true},
		{name: "/usr/lib64", files: []string{"usr/lib64/" + LibraryName}, found: true},
		{name: "/lib/aarch64-linux-gnu", files: []string{"lib/aarch64-linux-gnu/" + LibraryName}, found: true},
		{name: "a non-standard directory", files: []string{"usr/local/nvidia/lib64/" + LibraryName}, found: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			touch(t, root, tt.files...)
			if tt.cache != "" {
				touch(t, root, "etc/ld.so.cache")
				if err := os.WriteFile(filepath.Join(root, "etc/ld.so.cache"), []byte(tt.cache), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var dirs []string
			for _, d := range tt.ldPath {
				dirs = append(dirs, filepath.Join(root, d))
			}
			got := findLibrary(root, strings.Join(dirs, ":"))
			if (got != "") != tt.found {
				t.Errorf("findLibrary = %q, want found=%v", got, tt.found)
			}
		})
	}
}
