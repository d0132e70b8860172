// Package command starts the training command in place of the entrypoint.
//
// Guarantees: Exec replaces the process image (same PID) with argv exactly
// as given, the environment given, and the working directory, umask and
// rlimits untouched (Go's raised RLIMIT_NOFILE soft limit is restored by
// syscall.Exec). The new program starts with no blocked signals; every file
// the entrypoint opened itself is close-on-exec, so only descriptors
// inherited from the caller survive. No shell is involved, except for a
// script without a "#!" line, which the kernel refuses (ENOEXEC): it runs
// through /bin/sh, as execvp(3) and the shell entrypoint ran it.
package command

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime"
	"strings"
	"syscall"
	"unsafe"
)

// Exit statuses of a command that cannot be started, as a shell reports them.
const (
	ExitNotExecutable = 126
	ExitNotFound      = 127
)

// DefaultPath is the search path when the environment has no PATH, as in
// Docker's default environment.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Error is a command that cannot be started.
type Error struct {
	Name string
	Err  error
	// Status is the exit status to report: ExitNotFound or ExitNotExecutable.
	Status int
}

func (e *Error) Error() string {
	return fmt.Sprintf("cannot execute %q: %v", e.Name, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Resolve finds the executable for name as execvp would, searching path
// (the command's own PATH) when name has no slash.
func Resolve(name, path string) (string, error) {
	if name == "" {
		return "", &Error{Name: name, Err: fs.ErrNotExist, Status: ExitNotFound}
	}
	if strings.Contains(name, "/") {
		if err := executable(name); err != nil {
			return "", classify(name, err)
		}
		return name, nil
	}
	if path == "" {
		path = DefaultPath
	}
	var denied error
	for _, dir := range strings.Split(path, ":") {
		if dir == "" {
			dir = "."
		}
		full := dir + "/" + name
		err := executable(full)
		if err == nil {
			return full, nil
		}
		if errors.Is(err, fs.ErrPermission) && denied == nil {
			denied = err
		}
	}
	if denied != nil {
		return "", classify(name, denied)
	}
	return "", &Error{Name: name, Err: errors.New("not found in PATH"), Status: ExitNotFound}
}

func executable(file string) error {
	fi, err := os.Stat(file)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return fmt.Errorf("is a directory: %w", fs.ErrPermission)
	}
	if err := syscall.Access(file, 1 /* X_OK */); err != nil {
		return &fs.PathError{Op: "access", Path: file, Err: err}
	}
	return nil
}

func classify(name string, err error) error {
	status := ExitNotExecutable
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		status = ExitNotFound
	}
	return &Error{Name: name, Err: err, Status: status}
}

// Env returns environ with PADDLE_TASK_ID set to taskID, every other
// variable kept as it is and where it is.
func Env(environ []string, taskID string) []string {
	return Setenv(environ, "PADDLE_TASK_ID", taskID)
}

// Setenv returns environ with name set to value: the first occurrence is
// replaced in place (later duplicates dropped), or the variable appended.
func Setenv(environ []string, name, value string) []string {
	key := name + "="
	out := make([]string, 0, len(environ)+1)
	set := false
	for _, kv := range environ {
		if strings.HasPrefix(kv, key) {
			if set {
				continue
			}
			kv, set = key+value, true
		}
		out = append(out, kv)
	}
	if !set {
		out = append(out, key+value)
	}
	return out
}

// Exec replaces the process with path, argv and env. It returns only on
// failure, with an *Error carrying the exit status to report.
func Exec(path string, argv, env []string) error {
	runtime.LockOSThread()
	// The caller may have started us with signals blocked, and Go keeps
	// blocked what it does not need; the command must start with none.
	var empty [2]uint32
	syscall.RawSyscall6(syscall.SYS_RT_SIGPROCMASK, 2 /* SIG_SETMASK */, uintptr(unsafe.Pointer(&empty)), 0, 8, 0, 0)
	err := syscall.Exec(path, argv, env)
	if errors.Is(err, syscall.ENOEXEC) {
		if sh, shArgv, ok := ScriptFallback(path, argv); ok {
			if shErr := syscall.Exec(sh, shArgv, env); !errors.Is(shErr, syscall.ENOENT) {
				err = shErr
			}
		}
	}
	runtime.UnlockOSThread()
	return StartError(argv[0], err)
}

// Shell is the interpreter of scripts without a "#!" line.
const Shell = "/bin/sh"

// binarySample is how much of a file ScriptFallback reads to tell a script
// from a binary, as bash does.
const binarySample = 80

// ScriptFallback returns how to run path when the kernel refused to execute
// it with ENOEXEC: as execvp(3) does, through Shell with the file as its
// script (argv "/bin/sh", path, then argv[1:]). ok is false when the file
// looks like a binary (a NUL byte in its first line, bash's test: a binary
// for another machine must stay "exec format error", 126, not become a
// shell syntax error) or cannot be read.
func ScriptFallback(path string, argv []string) (sh string, shArgv []string, ok bool) {
	f, err := os.Open(path)
	if err != nil {
		return "", nil, false
	}
	defer f.Close()
	buf := make([]byte, binarySample)
	n, _ := io.ReadFull(f, buf)
	line := buf[:n]
	if i := bytes.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	}
	if bytes.IndexByte(line, 0) >= 0 {
		return "", nil, false
	}
	shArgv = append([]string{Shell, path}, argv[min(1, len(argv)):]...)
	return Shell, shArgv, true
}
