// Package containerroot reads what a container declared — its labels file
// — through the container's own root as the kernel shows it at
// /proc/PID/root, without ever leaving that root.
//
// Guarantees:
//   - The file is opened with openat2 relative to /proc/PID/root with
//     RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS and O_NONBLOCK | O_NOCTTY:
//     links resolve as they would inside the container (the image's
//     /var/run → /run and /var/run/paddle-task.labels → /dev/shm/… work),
//     "..", absolute links and /proc magic links never reach the host.
//     On a kernel without openat2 a walk does the same by hand: one
//     component at a time with O_NOFOLLOW, links read and resolved against
//     the container's root, at most 40 of them.
//   - Only a regular file (checked on the open descriptor, so a FIFO or a
//     device never blocks or is read) of at most 64 KiB is read.
//   - Reading never writes, never blocks on the file, and every failure is
//     an error wrapping one of the package's Err values.
package containerroot

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// MaxFileBytes is the most of a labels file read.
const MaxFileBytes = 64 << 10

// MaxValueBytes bounds a declared value (the report's bound on its text
// fields).
const MaxValueBytes = 1024

// maxLinks bounds the links the fallback walk follows, as the kernel does.
const maxLinks = 40

var (
	ErrAbsent     = errors.New("no labels file")
	ErrNotRegular = errors.New("labels file is not a regular file")
	ErrTooBig     = fmt.Errorf("labels file is over %d bytes", MaxFileBytes)
	ErrMalformed  = errors.New("labels file is malformed")
	ErrEscape     = errors.New("labels file path leaves the container's root or crosses a magic link")
	ErrUnreadable = errors.New("labels file cannot be read")
)

// Declaration is who a container says pays.
type Declaration struct {
	TaskID, Project, Owner string
}

// Roots reads under a proc file system.
type Roots struct {
	Proc string // the host's /proc
	// noOpenat2 forces the fallback walk (tests; kernels before 5.6).
	noOpenat2 bool
}

// OwnRoot reports whether pid's root differs from the host's (PID 1's,
// or this process's own "/" where PID 1's cannot be read, as in a sandbox
// whose PID 1 belongs to another user namespace): only such a process is
// in a container with files of its own.
func (r Roots) OwnRoot(pid int) (bool, error) {
	var host, its unix.Stat_t
	if err := unix.Stat(filepath.Join(r.Proc, "1", "root"), &host); err != nil {
		if err := unix.Stat("/", &host); err != nil {
			return false, fmt.Errorf("/: %w", err)
		}
	}
	if err := unix.Stat(filepath.Join(r.Proc, strconv.Itoa(pid), "root"), &its); err != nil {
		return false, fmt.Errorf("%s/%d/root: %w", r.Proc, pid, err)
	}
	return host.Dev != its.Dev || host.Ino != its.Ino, nil
}

// FirstProcess returns the container's first process for pid: its
// topmost ancestor with the same root.
func (r Roots) FirstProcess(pid int) int {
	var mine unix.Stat_t
	if unix.Stat(filepath.Join(r.Proc, strconv.Itoa(pid), "root"), &mine) != nil {
		return pid
	}
	for range 64 {
		ppid := r.parent(pid)
		if ppid <= 1 {
			return pid
		}
		var st unix.Stat_t
		if unix.Stat(filepath.Join(r.Proc, strconv.Itoa(ppid), "root"), &st) != nil || st.Dev != mine.Dev || st.Ino != mine.Ino {
			return pid
		}
		pid = ppid
	}
	return pid
}

func (r Roots) parent(pid int) int {
	b, err := os.ReadFile(filepath.Join(r.Proc, strconv.Itoa(pid), "status"))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "PPid:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}

// LabelsPathEnv returns PADDLE_LABELS_FILE from pid's environment ("" when
// unset or unreadable).
func (r Roots) LabelsPathEnv(pid int) string {
	f, err := os.Open(filepath.Join(r.Proc, strconv.Itoa(pid), "environ"))
	if err != nil {
		return ""
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, 1<<20))
	for _, kv := range bytes.Split(b, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("PADDLE_LABELS_FILE=")); ok {
			return string(v)
		}
	}
	return ""
}

// Read reads and parses the labels file at path inside pid's root.
func (r Roots) Read(pid int, path string) (Declaration, error) {
	b, err := r.ReadFile(pid, path)
	if err != nil {
		return Declaration{}, err
	}
	return Parse(b)
}

// ReadFile returns the bytes of the regular file at path inside pid's
// root (at most MaxFileBytes).
func (r Roots) ReadFile(pid int, path string) ([]byte, error) {
	root, err := unix.Open(filepath.Join(r.Proc, strconv.Itoa(pid), "root"), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: %s/%d/root: %v", ErrUnreadable, r.Proc, pid, err)
	}
	defer unix.Close(root)
	var fd int
	if !r.noOpenat2 {
		fd, err = unix.Openat2(root, path, &unix.OpenHow{
			Flags:   unix.O_RDONLY | unix.O_NONBLOCK | unix.O_NOCTTY | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS,
		})
	}
	if r.noOpenat2 || errors.Is(err, unix.ENOSYS) {
		fd, err = walk(root, path)
	}
	if err != nil {
		return nil, classify(path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrUnreadable, path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("%w: %s (mode %o)", ErrNotRegular, path, st.Mode&unix.S_IFMT)
	}
	if st.Size > MaxFileBytes {
		return nil, fmt.Errorf("%w: %s has %d", ErrTooBig, path, st.Size)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrUnreadable, path, err)
	}
	if len(b) > MaxFileBytes {
		return nil, fmt.Errorf("%w: %s", ErrTooBig, path)
	}
	return b, nil
}

func classify(path string, err error) error {
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR):
		return fmt.Errorf("%w: %s", ErrAbsent, path)
	case errors.Is(err, unix.EXDEV), errors.Is(err, unix.ELOOP):
		return fmt.Errorf("%w: %s: %v", ErrEscape, path, err)
	case errors.Is(err, ErrEscape):
		return err
	}
	return fmt.Errorf("%w: %s: %v", ErrUnreadable, path, err)
}

// walk opens path under root one component at a time, links resolved
// against root (the fallback for kernels without openat2). ".." never goes
// above root.
func walk(root int, path string) (int, error) {
	stack := []int{} // directories below root, opened O_PATH
	defer func() {
		for _, fd := range stack {
			unix.Close(fd)
		}
	}()
	cur := func() int {
		if len(stack) == 0 {
			return root
		}
		return stack[len(stack)-1]
	}
	parts := strings.Split(path, "/")
	links := 0
	for len(parts) > 0 {
		name := parts[0]
		parts = parts[1:]
		switch name {
		case "", ".":
			continue
		case "..":
			if len(stack) > 0 {
				unix.Close(stack[len(stack)-1])
				stack = stack[:len(stack)-1]
			}
			continue
		}
		last := true // nothing but "" and "." follows
		for _, p := range parts {
			if p != "" && p != "." {
				last = false
			}
		}
		var st unix.Stat_t
		if err := unix.Fstatat(cur(), name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return -1, err
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			links++
			if links > maxLinks {
				return -1, unix.ELOOP
			}
			buf := make([]byte, 4096)
			n, err := unix.Readlinkat(cur(), name, buf)
			if err != nil {
				return -1, err
			}
			target := string(buf[:n])
			if strings.HasPrefix(target, "/") {
				for _, fd := range stack {
					unix.Close(fd)
				}
				stack = stack[:0]
			}
			parts = append(strings.Split(target, "/"), parts...)
			continue
		}
		if last {
			return unix.Openat(cur(), name, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		}
		fd, err := unix.Openat(cur(), name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, err
		}
		stack = append(stack, fd)
	}
	// The path named a directory (or root itself).
	return unix.Openat(cur(), ".", unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
}

// Parse reads task_id, project and owner from a labels file's key=value
// lines. A file that is not UTF-8 text of such lines, names neither a
// task_id nor a project, or has one of the three over MaxValueBytes or
// with a control character, declares nothing (ErrMalformed).
func Parse(b []byte) (Declaration, error) {
	if !utf8.Valid(b) || bytes.IndexByte(b, 0) >= 0 {
		return Declaration{}, fmt.Errorf("%w: not UTF-8 text", ErrMalformed)
	}
	var d Declaration
	for i, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		line = strings.TrimSuffix(line, "\r")
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || k == "" {
			return Declaration{}, fmt.Errorf("%w: line %d is not key=value", ErrMalformed, i+1)
		}
		switch k {
		case "task_id", "project", "owner":
			// A value the monitor would refuse would cost the node its
			// whole report: such a file declares nothing.
			if len(v) > MaxValueBytes {
				return Declaration{}, fmt.Errorf("%w: %s is over %d bytes", ErrMalformed, k, MaxValueBytes)
			}
			if strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
				return Declaration{}, fmt.Errorf("%w: %s holds a control character", ErrMalformed, k)
			}
		}
		switch k {
		case "task_id":
			d.TaskID = v
		case "project":
			d.Project = v
		case "owner":
			d.Owner = v
		}
	}
	if d.TaskID == "" && d.Project == "" {
		return Declaration{}, fmt.Errorf("%w: neither task_id nor project", ErrMalformed)
	}
	return d, nil
}
