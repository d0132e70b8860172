package supervise

import (
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// reapTick is the reaper's safety net: a SIGCHLD that arrives while one is
// already queued is coalesced (by the kernel, or by a full channel), so the
// reaper also looks for exited children this often.
const reapTick = time.Second

// prSetChildSubreaper is prctl's PR_SET_CHILD_SUBREAPER.
const prSetChildSubreaper = 36

// Reaper is the one place in the process that waits for children: every
// child it started, every orphan re-parented to the process, and the GPU
// probe and sampler through Start (gpu.Children). It waits with
// wait4(-1, WNOHANG) in a single goroutine, woken by SIGCHLD and by a
// ticker; nothing else in the process may wait (no exec.Cmd.Wait, no
// os.Process.Wait), or a child's status could go to the wrong waiter.
type Reaper struct {
	log     *slog.Logger
	chld    chan os.Signal
	caught  chan struct{} // closed once SIGCHLD is caught
	mu      sync.Mutex    // held while starting a child and while reaping
	waiters map[int]chan syscall.WaitStatus
	orphans int
}

// NewReaper returns the reaper; it reaps once Catch has been called. When
// the process is not PID 1 it makes itself a child subreaper, so orphans
// of the command are re-parented to it rather than to the node's init.
func NewReaper(log *slog.Logger) *Reaper {
	r := &Reaper{log: log, chld: make(chan os.Signal, 1), caught: make(chan struct{}), waiters: map[int]chan syscall.WaitStatus{}}
	if os.Getpid() != 1 {
		if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
			log.Warn("cannot become a child subreaper; orphans of the command go to the node's init", "err", errno)
		} else {
			log.Debug("not PID 1: reaping orphans as a child subreaper")
		}
	}
	return r
}

// Catch catches SIGCHLD and starts reaping. Catching a signal is a round
// trip to the Go runtime's signal thread (and that thread's start, when
// first), so the caller runs it in the background, off the start's path;
// Start waits for it, so no child's exit is missed.
func (r *Reaper) Catch() {
	signal.Notify(r.chld, syscall.SIGCHLD)
	close(r.caught)
	go r.loop()
}

// Start starts a child and registers it before it can possibly be reaped:
// its wait status is delivered exactly once on the returned channel. It
// implements gpu.Children.
func (r *Reaper) Start(path string, argv []string, attr *os.ProcAttr) (pid int, exited <-chan syscall.WaitStatus, err error) {
	<-r.caught // a child's exit is never missed
	r.mu.Lock()
	defer r.mu.Unlock()
	p, err := os.StartProcess(path, argv, attr)
	if err != nil {
		return 0, nil, err
	}
	ch := make(chan syscall.WaitStatus, 1)
	r.waiters[p.Pid] = ch
	pid = p.Pid
	p.Release() // never waited for through os.Process: the reaper does
	return pid, ch, nil
}

func (r *Reaper) loop() {
	t := time.NewTicker(reapTick)
	defer t.Stop()
	for {
		select {
		case <-r.chld:
		case <-t.C:
		}
		r.reap()
	}
}

// reap collects every child that has exited.
func (r *Reaper) reap() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || pid <= 0 {
			return
		}
		if ch, ok := r.waiters[pid]; ok {
			ch <- ws
			delete(r.waiters, pid)
			continue
		}
		r.orphans++
		r.log.Debug("orphan reaped", "pid", pid, "status", exitCode(ws))
	}
}

// exitCode is a wait status as a shell reports it: the exit status, or
// 128+N when killed by signal N.
func exitCode(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}
