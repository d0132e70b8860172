package entrypoint

// Black-box tests of the labels file on a node shared by several users
// (docs/security.md, Teams sharing one node): the entrypoint, often root, never writes
// through a link another user could have planted, whatever links, races
// and renames are tried; the image's own root-owned link keeps working;
// a refused link costs the labels file, never the task.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// nodeDirs is a node's shared directories in miniature, below one root:
// shm (root, 1777: /dev/shm), run (root, 0755: /var/run), att (a directory
// the other user made, 1777), own (the other user's, 0755), and secret
// (root, 0700) holding secret.conf (root, 0600), the file to protect.
type nodeDirs struct {
	root, shm, run, att, own, secret, secretFile string
}

const secretBytes = "password=hunter2\n"

func newNodeDirs(t *testing.T) nodeDirs {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: files of several users")
	}
	root := t.TempDir()
	os.Chmod(root, 0o755)
	for _, d := range []string{bin.dir, filepath.Dir(root)} {
		os.Chmod(d, 0o755) // let nobody run the binaries and reach root
	}
	d := nodeDirs{root: root}
	mk := func(name string, mode os.FileMode, uid int) string {
		p := filepath.Join(root, name)
		if err := os.Mkdir(p, mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode)
		os.Chown(p, uid, uid)
		return p
	}
	d.shm = mk("shm", 0o777|os.ModeSticky, 0)
	d.run = mk("run", 0o755, 0)
	d.att = mk("att", 0o777|os.ModeSticky, nobody)
	d.own = mk("own", 0o755, nobody)
	d.secret = mk("secret", 0o700, 0)
	d.secretFile = filepath.Join(d.secret, "secret.conf")
	if err := os.WriteFile(d.secretFile, []byte(secretBytes), 0o600); err != nil {
		t.Fatal(err)
	}
	return d
}

// plantLink makes a symbolic link at path to target, owned by uid, as that
// user's ln -s would.
func plantLink(t *testing.T, target, path string, uid int) {
	t.Helper()
	os.Remove(path)
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(path, uid, uid); err != nil {
		t.Fatal(err)
	}
}

// secretUnchanged checks the protected file's bytes and mode, and that
// nothing was added beside it.
func (d nodeDirs) secretUnchanged(t *testing.T, what string) {
	t.Helper()
	b, err := os.ReadFile(d.secretFile)
	fi, serr := os.Stat(d.secretFile)
	if err != nil || serr != nil || string(b) != secretBytes || fi.Mode().Perm() != 0o600 || fi.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Fatalf("%s: secret.conf changed: %q mode %v (%v %v)", what, b, fi.Mode(), err, serr)
	}
	if ents, _ := os.ReadDir(d.secret); len(ents) != 1 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Fatalf("%s: the protected directory now holds %v", what, names)
	}
}

// nodeTask is a start of marker-writing /bin/sh with its labels file at
// path, as uid.
func nodeTask(t *testing.T, path string, uid int, args ...string) (*task, string) {
	t.Helper()
	k := newTask(t)
	os.Chmod(k.Dir, 0o777)
	marker := filepath.Join(k.Dir, "ran")
	if len(args) == 0 {
		args = []string{"/bin/sh", "-c", "echo ran > " + marker}
	}
	k.Args = args
	k.Setenv("PADDLE_LABELS_FILE", path)
	k.Setenv("PADDLE_SPOOL_PATH", "off")
	k.Setenv("PADDLE_TASK_NAME", "node")
	if uid != 0 {
		k.Setup = func(c *exec.Cmd) {
			c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
		}
	}
	return k, marker
}

// Attacks by another user on a root entrypoint's labels file: each is
// refused with a warning, the task runs, and secret.conf is unchanged.
func TestLabelsFileRefusesPlantedLinks(t *testing.T) {
	for _, mode := range []string{"exec", "supervise"} {
		tests := []struct {
			name  string
			setup func(t *testing.T, d nodeDirs) string // returns PADDLE_LABELS_FILE
		}{
			{"another user's link at the final name, in a root sticky directory", func(t *testing.T, d nodeDirs) string {
				p := filepath.Join(d.shm, "paddle-task.labels")
				plantLink(t, d.secretFile, p, nobody)
				return p
			}},
			{"the link in the other user's own sticky directory", func(t *testing.T, d nodeDirs) string {
				p := filepath.Join(d.att, "paddle-task.labels")
				plantLink(t, d.secretFile, p, nobody)
				return p
			}},
			{"the link in the other user's own private directory", func(t *testing.T, d nodeDirs) string {
				p := filepath.Join(d.own, "paddle-task.labels")
				plantLink(t, d.secretFile, p, nobody)
				return p
			}},
			{"a relative link", func(t *testing.T, d nodeDirs) string {
				p := filepath.Join(d.shm, "paddle-task.labels")
				plantLink(t, "../secret/secret.conf", p, nobody)
				return p
			}},
			{"a link on a directory of the way", func(t *testing.T, d nodeDirs) string {
				plantLink(t, d.secret, filepath.Join(d.shm, "d"), nobody)
				return filepath.Join(d.shm, "d", "secret.conf")
			}},
			{"a link on a directory of the way, in the user's own directory", func(t *testing.T, d nodeDirs) string {
				plantLink(t, d.secret, filepath.Join(d.own, "d"), nobody)
				return filepath.Join(d.own, "d", "secret.conf")
			}},
			{"root's link to the other user's link", func(t *testing.T, d nodeDirs) string {
				plantLink(t, d.secretFile, filepath.Join(d.own, "l2"), nobody)
				p := filepath.Join(d.run, "paddle-task.labels")
				plantLink(t, filepath.Join(d.own, "l2"), p, 0)
				return p
			}},
			{"a chain of the user's links", func(t *testing.T, d nodeDirs) string {
				plantLink(t, d.secretFile, filepath.Join(d.own, "l3"), nobody)
				plantLink(t, filepath.Join(d.own, "l3"), filepath.Join(d.own, "l2"), nobody)
				p := filepath.Join(d.att, "paddle-task.labels")
				plantLink(t, filepath.Join(d.own, "l2"), p, nobody)
				return p
			}},
		}
		for _, tc := range tests {
			t.Run(mode+"/"+tc.name, func(t *testing.T) {
				d := newNodeDirs(t)
				path := tc.setup(t, d)
				k, marker := nodeTask(t, path, 0)
				k.Setenv("PADDLE_ENTRYPOINT_MODE", mode)
				r := k.Run()
				if r.Code != 0 {
					t.Fatalf("exit %d, want 0 (the task runs)\n%s", r.Code, r.Stderr)
				}
				if _, err := os.Stat(marker); err != nil {
					t.Fatalf("the command did not run\n%s", r.Stderr)
				}
				if logLine(r.Stderr, "WARN", "labels file not written", "symbolic link not followed") == "" {
					t.Errorf("no warning naming the refused link:\n%s", r.Stderr)
				}
				d.secretUnchanged(t, tc.name)
			})
		}
	}
}

// The image's own layout: a root-owned link at /var/run/paddle-task.labels
// to /dev/shm, followed by root and by any user; the user's own link, and
// a link of the sticky directory's owner, are followed too.
func TestLabelsFileTrustedLinks(t *testing.T) {
	tests := []struct {
		name  string
		uid   int
		setup func(t *testing.T, d nodeDirs) (path, file string)
	}{
		{"the image's root link, as root", 0, func(t *testing.T, d nodeDirs) (string, string) {
			p := filepath.Join(d.run, "paddle-task.labels")
			plantLink(t, filepath.Join(d.shm, "paddle-task.labels"), p, 0)
			return p, filepath.Join(d.shm, "paddle-task.labels")
		}},
		{"the image's root link, as another user", nobody, func(t *testing.T, d nodeDirs) (string, string) {
			p := filepath.Join(d.run, "paddle-task.labels")
			plantLink(t, "../shm/paddle-task.labels", p, 0)
			return p, filepath.Join(d.shm, "paddle-task.labels")
		}},
		{"the user's own link in a sticky directory", nobody, func(t *testing.T, d nodeDirs) (string, string) {
			p := filepath.Join(d.shm, "paddle-task.labels")
			plantLink(t, filepath.Join(d.own, "mine.labels"), p, nobody)
			return p, filepath.Join(d.own, "mine.labels")
		}},
		{"a link of the sticky directory's owner, to a directory it may write", 0, func(t *testing.T, d nodeDirs) (string, string) {
			p := filepath.Join(d.att, "paddle-task.labels")
			plantLink(t, filepath.Join(d.own, "theirs.labels"), p, nobody)
			return p, filepath.Join(d.own, "theirs.labels")
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := newNodeDirs(t)
			path, file := tc.setup(t, d)
			for i := range 2 { // the second start replaces the first's file through the same link
				k, _ := nodeTask(t, path, tc.uid)
				r := k.Run()
				if r.Code != 0 || strings.Contains(r.Stderr, "labels file not written") {
					t.Fatalf("start %d: exit %d\n%s", i, r.Code, r.Stderr)
				}
			}
			b, err := os.ReadFile(file)
			if err != nil || !strings.HasPrefix(string(b), "task_name=node\n") {
				t.Fatalf("labels file %s: %q %v", file, b, err)
			}
			if fi, _ := os.Lstat(path); fi.Mode()&os.ModeSymlink == 0 {
				t.Error("the link was replaced")
			}
			if fi, _ := os.Stat(file); fi.Mode().Perm() != 0o644 || fi.Sys().(*syscall.Stat_t).Uid != uint32(tc.uid) {
				t.Errorf("labels file mode %v owner %d", fi.Mode(), fi.Sys().(*syscall.Stat_t).Uid)
			}
			d.secretUnchanged(t, tc.name)
		})
	}
}

// A link or a second name of the protected file at the final name, put
// there by someone the rule trusts or in a race: the new file replaces the
// name, and the file it pointed to is unchanged.
func TestLabelsFileFinalNameReplaced(t *testing.T) {
	d := newNodeDirs(t)
	p := filepath.Join(d.shm, "paddle-task.labels")
	if err := os.Link(d.secretFile, p); err != nil {
		t.Fatal(err)
	}
	k, _ := nodeTask(t, p, 0)
	if r := k.Run(); r.Code != 0 {
		t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
	}
	if b, _ := os.ReadFile(p); !strings.HasPrefix(string(b), "task_name=node\n") {
		t.Errorf("labels file: %q", b)
	}
	if b, _ := os.ReadFile(d.secretFile); string(b) != secretBytes {
		t.Fatalf("a hard link to secret.conf was written through: %q", b)
	}
	fi, _ := os.Stat(d.secretFile)
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("secret.conf mode %v", fi.Mode())
	}
}

// Rename races: the other user swaps, as fast as it goes, the final name
// between a file and a link to secret.conf, and a directory of the way
// between a directory and a link to the protected directory, while root's
// entrypoint starts again and again. secret.conf never changes.
func TestLabelsFileRenameRaces(t *testing.T) {
	d := newNodeDirs(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	swap := func(dir, name string, a, b func(tmp string)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				tmp := filepath.Join(dir, fmt.Sprintf(".swap-%s-%d", name, i))
				if i%2 == 0 {
					a(tmp)
				} else {
					b(tmp)
				}
				os.Rename(tmp, filepath.Join(dir, name))
				os.RemoveAll(tmp)
			}
		}()
	}
	link := func(target string) func(string) {
		return func(tmp string) { os.Symlink(target, tmp); os.Lchown(tmp, nobody, nobody) }
	}
	file := func(tmp string) { os.WriteFile(tmp, []byte("x"), 0o644); os.Chown(tmp, nobody, nobody) }
	dir := func(tmp string) { os.Mkdir(tmp, 0o777); os.Chown(tmp, nobody, nobody) }
	swap(d.att, "paddle-task.labels", file, link(d.secretFile))
	swap(d.own, "paddle-task.labels", file, link(d.secretFile))
	swap(d.own, "d", dir, link(d.secret))
	swap(d.att, "d", dir, link(d.secret))
	defer func() { cancel(); wg.Wait() }()
	paths := []string{
		filepath.Join(d.att, "paddle-task.labels"),
		filepath.Join(d.own, "paddle-task.labels"),
		filepath.Join(d.own, "d", "secret.conf"),
		filepath.Join(d.att, "d", "secret.conf"),
	}
	for i := range 40 {
		for _, mode := range []string{"exec", "supervise"} {
			k, marker := nodeTask(t, paths[i%len(paths)], 0)
			k.Setenv("PADDLE_ENTRYPOINT_MODE", mode)
			r := k.Run()
			if r.Code != 0 {
				t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
			}
			if _, err := os.Stat(marker); err != nil {
				t.Fatalf("the command did not run")
			}
			d.secretUnchanged(t, fmt.Sprintf("start %d (%s, %s)", i, mode, paths[i%len(paths)]))
		}
	}
}

// Supervise mode's end-of-run rewrite is held to the same rule: a chain
// that led to a file at the start, repointed by the other user while the
// command runs, is refused at the end; the task's exit status stands.
func TestLabelsFileEndRewriteRepointed(t *testing.T) {
	for _, repoint := range []string{"the file replaced by a link", "its directory replaced by a link"} {
		t.Run(repoint, func(t *testing.T) {
			d := newNodeDirs(t)
			sub := filepath.Join(d.own, "x")
			os.Mkdir(sub, 0o755)
			os.Chown(sub, nobody, nobody)
			path := filepath.Join(d.run, "paddle-task.labels")
			plantLink(t, filepath.Join(sub, "paddle-task.labels"), path, 0) // the image's link, to a directory of the user's
			gofile := filepath.Join(d.root, "go")
			k, _ := nodeTask(t, path, 0, "/bin/sh", "-c", "while [ ! -e "+gofile+" ]; do sleep 0.02; done; exit 7")
			k.Setenv("PADDLE_ENTRYPOINT_MODE", "supervise")
			done := make(chan result, 1)
			go func() { done <- k.Run() }()
			written := filepath.Join(sub, "paddle-task.labels")
			deadline := time.Now().Add(20 * time.Second)
			for {
				if b, err := os.ReadFile(written); err == nil && bytes.HasPrefix(b, []byte("task_name=node\n")) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("no labels file at the start")
				}
				time.Sleep(10 * time.Millisecond)
			}
			if repoint == "the file replaced by a link" {
				plantLink(t, d.secretFile, written, nobody)
			} else {
				os.RemoveAll(sub)
				plantLink(t, d.secret, sub, nobody)
			}
			os.WriteFile(gofile, nil, 0o644)
			r := <-done
			if r.Code != 7 {
				t.Fatalf("exit %d, want the command's 7\n%s", r.Code, r.Stderr)
			}
			if logLine(r.Stderr, "WARN", "symbolic link not followed") == "" {
				t.Errorf("no warning about the refused link:\n%s", r.Stderr)
			}
			d.secretUnchanged(t, repoint)
		})
	}
}
