package containerroot

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

const labels = "task_name=train\nproject=search_ranking\nowner=alice@example.com\ngpu_count=1\nstart_time=1796132700\ntask_id=7c1e5d2a\n"

// fixture makes a proc tree whose PID 42 has the directory root as its
// root (the kernel's /proc/PID/root opens the same way), and PID 1 the
// host's.
func fixture(t *testing.T) (Roots, string, string) {
	t.Helper()
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	for _, d := range []string{"run", "dev/shm", "etc", "proc"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// The image's layout: /var/run -> /run, labels -> /dev/shm/...
	must(os.MkdirAll(filepath.Join(root, "var"), 0o755))
	must(os.Symlink("/run", filepath.Join(root, "var/run")))
	must(os.Symlink("/dev/shm/paddle-task.labels", filepath.Join(root, "run/paddle-task.labels")))
	must(os.WriteFile(filepath.Join(root, "dev/shm/paddle-task.labels"), []byte(labels), 0o644))
	// A host file with labels of its own, outside the root.
	host := filepath.Join(dir, "host.labels")
	must(os.WriteFile(host, []byte("project=stolen\ntask_id=host\n"), 0o644))
	proc := filepath.Join(dir, "proc")
	must(os.MkdirAll(filepath.Join(proc, "42"), 0o755))
	must(os.MkdirAll(filepath.Join(proc, "1"), 0o755))
	must(os.Symlink(root, filepath.Join(proc, "42", "root")))
	must(os.Symlink("/", filepath.Join(proc, "1", "root")))
	return Roots{Proc: proc}, root, host
}

func TestReadHostile(t *testing.T) {
	for _, fallback := range []bool{false, true} {
		name := "openat2"
		if fallback {
			name = "walk"
		}
		t.Run(name, func(t *testing.T) {
			r, root, host := fixture(t)
			r.noOpenat2 = fallback
			put := func(name string, make func(string) error) string {
				t.Helper()
				p := filepath.Join(root, name)
				if err := make(p); err != nil {
					t.Fatal(err)
				}
				return "/" + name
			}
			link := func(target string) func(string) error {
				return func(p string) error { return os.Symlink(target, p) }
			}
			file := func(b []byte) func(string) error {
				return func(p string) error { return os.WriteFile(p, b, 0o644) }
			}
			cases := []struct {
				name, path string
				want       Declaration
				err        error
			}{
				{"image layout", "/var/run/paddle-task.labels", Declaration{"7c1e5d2a", "search_ranking", "alice@example.com"}, nil},
				{"absent", "/nowhere.labels", Declaration{}, ErrAbsent},
				{"absolute link out", put("out-abs", link(host)), Declaration{}, ErrAbsent},
				{"dot-dot link out", put("out-rel", link("../../../../../../../../"+host)), Declaration{}, ErrAbsent},
				{"dot-dot path out", "/../../../../../../../" + host, Declaration{}, ErrAbsent},
				{"link loop", put("loop", link("/loop")), Declaration{}, ErrEscape},
				{"fifo", put("fifo", func(p string) error { return unix.Mkfifo(p, 0o644) }), Declaration{}, ErrNotRegular},
				{"directory", "/etc", Declaration{}, ErrNotRegular},
				{"10 MiB", put("big", file(bytes.Repeat([]byte("project=x\n"), 1<<20))), Declaration{}, ErrTooBig},
				{"binary", put("bin", file([]byte{0x7f, 'E', 'L', 'F', 0, 1, 2, '=', 0xff})), Declaration{}, ErrMalformed},
				{"no keys", put("nokeys", file([]byte("task_name=x\n"))), Declaration{}, ErrMalformed},
				{"not key=value", put("junk", file([]byte("project=x\nhello\n"))), Declaration{}, ErrMalformed},
				{"control character", put("ctl", file([]byte("project=a\tb\ntask_id=t\n"))), Declaration{}, ErrMalformed},
				{"value over 1 KiB", put("long", file([]byte("task_id=t\nproject="+strings.Repeat("x", 1025)+"\n"))), Declaration{}, ErrMalformed},
			}
			for _, c := range cases {
				got, err := r.Read(42, c.path)
				if !errors.Is(err, c.err) || got != c.want {
					t.Errorf("%s: Read(%q) = %+v, %v; want %+v, %v", c.name, c.path, got, err, c.want, c.err)
				}
			}
		})
	}
}

// TestReadMagicLink: a link through /proc's magic links (a container's
// /proc/1/root, its own /proc/self/root) never reaches the host's files.
func TestReadMagicLink(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount /proc in the container root")
	}
	for _, fallback := range []bool{false, true} {
		r, root, host := fixture(t)
		r.noOpenat2 = fallback
		if err := unix.Mount("/proc", filepath.Join(root, "proc"), "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			t.Skipf("bind mount of /proc: %v", err)
		}
		t.Cleanup(func() { unix.Unmount(filepath.Join(root, "proc"), unix.MNT_DETACH) })
		for _, target := range []string{"/proc/1/root" + host, "/proc/self/root" + host} {
			p := filepath.Join(root, "magic")
			os.Remove(p)
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
			d, err := r.Read(42, "/magic")
			if err == nil || strings.Contains(d.Project, "stolen") {
				t.Errorf("fallback=%v: a link to %s read %+v, %v; want an error", fallback, target, d, err)
			}
		}
	}
}

func TestOwnRoot(t *testing.T) {
	r, _, _ := fixture(t)
	if own, err := r.OwnRoot(42); err != nil || !own {
		t.Errorf("OwnRoot(42) = %v, %v; want true", own, err)
	}
	if err := os.MkdirAll(filepath.Join(r.Proc, "43"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/", filepath.Join(r.Proc, "43", "root")); err != nil {
		t.Fatal(err)
	}
	if own, err := r.OwnRoot(43); err != nil || own {
		t.Errorf("OwnRoot(43) = %v, %v; want false (the host's root)", own, err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(labels))
	f.Add([]byte("project=\x00"))
	f.Add([]byte("=x\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := Parse(b)
		if err == nil && d.TaskID == "" && d.Project == "" {
			t.Fatalf("Parse(%q) declared nothing without an error", b)
		}
		if err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatalf("Parse(%q): %v, not ErrMalformed", b, err)
		}
	})
}
