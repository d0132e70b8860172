package supervise

import (
	"errors"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"time"
	"unsafe"

	"github.com/paddle-entrypoint/paddle-entrypoint/entrypoint/command"
	"github.com/paddle-entrypoint/paddle-entrypoint/entrypoint/earlysignal"
	"golang.org/x/sys/unix"
)

// ClearInheritedMask makes sure children start with no blocked signal. A
// Go program keeps the signal mask it was started with on its threads, and
// a child it starts inherits that mask (exec mode clears it just before
// exec; a fork offers no such hook). So a supervisor started with signals
// blocked re-executes itself once with none blocked, before it does
// anything else. It returns only when no re-execution was needed or it
// failed (no /proc): the command then inherits the caller's mask.
func ClearInheritedMask(environ []string) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var old [2]uint32
	if _, _, errno := syscall.RawSyscall6(syscall.SYS_RT_SIGPROCMASK, unix.SIG_BLOCK, 0, uintptr(unsafe.Pointer(&old)), 8, 0, 0); errno != 0 {
		return errno
	}
	if old == [2]uint32{} {
		return nil
	}
	var empty [2]uint32
	syscall.RawSyscall6(syscall.SYS_RT_SIGPROCMASK, unix.SIG_SETMASK, uintptr(unsafe.Pointer(&empty)), 0, 8, 0, 0)
	err := syscall.Exec("/proc/self/exe", os.Args, environ)
	syscall.RawSyscall6(syscall.SYS_RT_SIGPROCMASK, unix.SIG_SETMASK, uintptr(unsafe.Pointer(&old)), 0, 8, 0, 0)
	return err
}

// Command is the training command as the supervisor starts it.
type Command struct {
	Path string
	Argv []string
	Env  []string
	// Group makes the command lead a new process group, to which signals
	// are then forwarded.
	Group bool
}

// child is the started command.
type child struct {
	pid     int
	exited  <-chan syscall.WaitStatus
	started time.Time
	group   bool // leads its own process group
}

// startChild starts the command with what exec mode would give it: argv,
// env, the caller's cwd, umask, rlimits and descriptors (ours are all
// close-on-exec), signal dispositions (caught ones are reset by exec;
// ignored ones stay). When stdin is the controlling terminal the command
// leads its own process group, made the terminal's foreground group, so
// that a Ctrl-C reaches it once.
func startChild(r *Reaper, c Command) (*child, error) {
	files := make([]*os.File, 3)
	for i, f := range []*os.File{os.Stdin, os.Stdout, os.Stderr} {
		if _, err := unix.FcntlInt(uintptr(i), unix.F_GETFD, 0); err == nil {
			files[i] = f
		}
	}
	tty := isForegroundTTY()
	sys := &syscall.SysProcAttr{Setpgid: c.Group || tty, Foreground: tty, Ctty: 0}
	attr := &os.ProcAttr{Env: c.Env, Files: files, Sys: sys}
	start := time.Now()
	pid, exited, err := startCommand(r, c, attr)
	if err != nil && tty && !errors.Is(err, syscall.ENOENT) && !errors.Is(err, syscall.EACCES) && !errors.Is(err, syscall.ENOEXEC) {
		// The terminal would not take the new group: start it where it
		// would be without one.
		sys.Foreground, sys.Setpgid = false, c.Group
		start = time.Now()
		pid, exited, err = startCommand(r, c, attr)
	}
	if err != nil {
		return nil, err
	}
	return &child{pid: pid, exited: exited, started: start, group: sys.Setpgid && c.Group}, nil
}

// startCommand starts the command as exec mode would run it: a file the
// kernel refuses with ENOEXEC that looks like a script (no "#!" line) runs
// through /bin/sh, as execvp(3) does.
func startCommand(r *Reaper, c Command, attr *os.ProcAttr) (int, <-chan syscall.WaitStatus, error) {
	pid, exited, err := r.Start(c.Path, c.Argv, attr)
	if errors.Is(err, syscall.ENOEXEC) {
		if sh, shArgv, ok := command.ScriptFallback(c.Path, c.Argv); ok {
			spid, sexited, shErr := r.Start(sh, shArgv, attr)
			if !errors.Is(shErr, syscall.ENOENT) {
				return spid, sexited, shErr
			}
		}
	}
	return pid, exited, err
}

// isForegroundTTY reports whether stdin is this process's controlling
// terminal (asking for its foreground group fails otherwise).
func isForegroundTTY() bool {
	_, err := unix.IoctlGetInt(0, unix.TIOCGPGRP)
	return err == nil
}

// signalName is the conventional name of s, such as SIGKILL.
func signalName(s syscall.Signal) string {
	if n := unix.SignalName(s); n != "" {
		return n
	}
	if s >= 34 && s <= earlysignal.MaxSignal {
		return "SIGRTMIN+" + strconv.Itoa(int(s)-34)
	}
	return "signal " + strconv.Itoa(int(s))
}
