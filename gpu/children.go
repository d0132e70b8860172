package gpu

import (
	"io"
	"os"
	"syscall"
	"time"
)

// Children starts child processes for the gpu package when the caller owns
// waiting for children (supervise mode: exactly one place in the process
// waits, and it must not race anyone for a status). Start must register the
// pid with the caller's reaper before the child can possibly be reaped, and
// deliver the child's wait status exactly once on the returned channel
// (buffered, capacity 1).
//
// With a Children set, the package never waits for a process itself (no
// exec.Cmd.Wait, no os.Process.Wait, no wait4): it learns how its probe or
// sampler ended only from that channel, and signals it by pid only while no
// status has arrived.
type Children interface {
	Start(path string, argv []string, attr *os.ProcAttr) (pid int, exited <-chan syscall.WaitStatus, err error)
}

// selfWaiting is the Children of exec mode, where the package is the only
// one starting children and so may wait for its own.
type selfWaiting struct{}

// Start starts the process and waits for it in a goroutine. If the wait
// fails (someone else reaped it), the channel is closed without a status.
func (selfWaiting) Start(path string, argv []string, attr *os.ProcAttr) (int, <-chan syscall.WaitStatus, error) {
	p, err := os.StartProcess(path, argv, attr)
	if err != nil {
		return 0, nil, err
	}
	exited := make(chan syscall.WaitStatus, 1)
	go func() {
		st, err := p.Wait()
		if err != nil {
			close(exited)
			return
		}
		if ws, ok := st.Sys().(syscall.WaitStatus); ok {
			exited <- ws
		}
		close(exited)
	}()
	return p.Pid, exited, nil
}

func childrenOr(c Children) Children {
	if c == nil {
		return selfWaiting{}
	}
	return c
}

// child is a started process whose stdout and stderr the package reads.
type child struct {
	pid    int
	exited <-chan syscall.WaitStatus

	stdout, stderr         *os.File      // read ends
	stdoutDone, stderrDone chan struct{} // closed when their reader returned
	stderrText             limitedBuffer // read only after stderrDone
}

// startChild starts path with argv and env in its own process group (a
// Ctrl-C meant for the task must not look like a crash of a GPU helper),
// stdin as given (nil: /dev/null), and stdout and stderr on pipes: readStdout
// reads stdout in a goroutine of its own until end of file; stderr is kept,
// up to maxOutput bytes. The child's ends of the pipes are closed here once
// it runs.
func startChild(c Children, path string, argv, env []string, stdin *os.File, readStdout func(io.Reader)) (*child, error) {
	if stdin == nil {
		null, err := os.Open(os.DevNull)
		if err != nil {
			return nil, err
		}
		defer null.Close()
		stdin = null
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, err
	}
	attr := &os.ProcAttr{
		Env:   env,
		Files: []*os.File{stdin, outW, errW},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	}
	pid, exited, err := childrenOr(c).Start(path, argv, attr)
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return nil, err
	}
	ch := &child{pid: pid, exited: exited, stdout: outR, stderr: errR,
		stdoutDone: make(chan struct{}), stderrDone: make(chan struct{})}
	go func() {
		defer close(ch.stdoutDone)
		readStdout(outR)
	}()
	go func() {
		defer close(ch.stderrDone)
		io.Copy(&ch.stderrText, errR)
	}()
	return ch, nil
}

// kill sends SIGKILL to the child. Callers call it only while no status
// has arrived on exited; a pid is not reused in the moment between the
// reaper's wait and the status reaching the caller, as Linux hands out pids
// in turn through the whole pid space.
//
// A pid of 0 or less from a Children is never signalled: kill(2) would take
// it as a process group or as every process there is.
func (c *child) kill() {
	if c.pid > 0 {
		syscall.Kill(c.pid, syscall.SIGKILL) // fails only when it already exited
	}
}

// finish waits up to grace for both pipes to reach end of file (a process
// that exited leaves what it wrote readable), then closes the read ends,
// which ends a read still blocked: a grandchild holding a pipe open must not
// hold up the caller. It returns the first line of stderr.
func (c *child) finish(grace time.Duration) string {
	timer := time.NewTimer(grace)
	defer timer.Stop()
	expired := false
	for _, done := range []chan struct{}{c.stdoutDone, c.stderrDone} {
		if expired {
			break
		}
		select {
		case <-done:
		case <-timer.C:
			expired = true
		}
	}
	c.stdout.Close()
	c.stderr.Close()
	<-c.stdoutDone
	<-c.stderrDone
	return firstLine(c.stderrText.String())
}
