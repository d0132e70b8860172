// Package monitorproc runs a built `paddle-monitor serve` as a child process
// and waits until it listens: for the black-box tests, the benchmark and the
// demo, which all need the real executable rather than the handler.
//
// The server is asked to listen where the caller says (127.0.0.1:0 for a
// random port); its address is read back from its "listening" log line, in
// either log format. Every log line is kept (Log) and, optionally, copied to
// a writer as it comes.
package monitorproc

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Proc is one running server.
type Proc struct {
	Cmd *exec.Cmd
	// URL is http://ADDR of the listening server.
	URL string

	done chan struct{}
	code int

	mu  sync.Mutex
	log strings.Builder
}

// Options of Start.
type Options struct {
	Env  []string  // the whole environment of the server
	Dir  string    // its working directory
	Echo io.Writer // each log line is also written here, when set
	// Prefix starts each echoed line.
	Prefix string
	// Timeout bounds the wait for the server to listen (default 60 s).
	Timeout time.Duration
}

// listening matches the start-up line in the text and the JSON formats.
var listening = regexp.MustCompile(`(?:"msg":"listening".*"addr":"([^"]+)")|(?:msg=listening .*addr=(\S+))`)

// Start runs `bin serve ARGS...` and returns once it listens. ErrExited:
// the server ended first (its log says why).
func Start(bin string, args []string, opt Options) (*Proc, error) {
	p := &Proc{done: make(chan struct{})}
	p.Cmd = exec.Command(bin, append([]string{"serve"}, args...)...)
	p.Cmd.Env, p.Cmd.Dir = opt.Env, opt.Dir
	pipe, err := p.Cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := p.Cmd.Start(); err != nil {
		return nil, err
	}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.log.WriteString(line + "\n")
			p.mu.Unlock()
			if opt.Echo != nil {
				fmt.Fprintln(opt.Echo, opt.Prefix+line)
			}
			if m := listening.FindStringSubmatch(line); m != nil {
				select {
				case addr <- m[1] + m[2]:
				default:
				}
			}
		}
		p.Cmd.Wait()
		p.code = p.Cmd.ProcessState.ExitCode()
		if ws, ok := p.Cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			p.code = 128 + int(ws.Signal())
		}
		close(p.done)
	}()
	timeout := opt.Timeout
	if timeout == 0 {
		timeout = 60 * time.Second
	}
	select {
	case a := <-addr:
		p.URL = "http://" + a
		return p, nil
	case <-p.done:
		return nil, fmt.Errorf("%w with status %d:\n%s", ErrExited, p.code, p.Log())
	case <-time.After(timeout):
		p.Kill()
		return nil, fmt.Errorf("paddle-monitor serve did not listen within %s:\n%s", timeout, p.Log())
	}
}

// ErrExited: the server exited before it listened.
var ErrExited = errors.New("paddle-monitor serve exited before listening")

// Log is what the server has written to stderr so far.
func (p *Proc) Log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// Signal sends sig to the server.
func (p *Proc) Signal(sig syscall.Signal) { p.Cmd.Process.Signal(sig) }

// Wait waits at most timeout for the server to exit and returns its status
// (128+N when killed by signal N); ok is false on timeout.
func (p *Proc) Wait(timeout time.Duration) (code int, ok bool) {
	select {
	case <-p.done:
		return p.code, true
	case <-time.After(timeout):
		return -1, false
	}
}

// Stop sends SIGTERM and waits (SIGKILL after 20 s).
func (p *Proc) Stop() {
	p.Signal(syscall.SIGTERM)
	if _, ok := p.Wait(20 * time.Second); !ok {
		p.Kill()
	}
}

// Kill sends SIGKILL, unless the server has exited, and waits.
func (p *Proc) Kill() {
	select {
	case <-p.done:
	default:
		p.Cmd.Process.Kill()
		<-p.done
	}
}
