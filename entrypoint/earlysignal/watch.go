package earlysignal

import (
	"context"
	"syscall"
)

// Stopped is the cause of a context cancelled by a signal.
type Stopped struct{ Signal syscall.Signal }

func (s Stopped) Error() string { return "received " + s.Signal.String() }

// Status is the exit status a start stopped by the signal ends with.
func (s Stopped) Status() int { return 128 + int(s.Signal) }

// Watch turns every terminating signal before exec into the
// cancellation of the returned context, so every step can stop early and
// spool. The signals are caught from the program's first moment (this
// package's init; a signal that arrived before this call is waiting); a
// signal the caller ignored stays ignored (and so stays ignored for the
// command).
//
// before and then, when not nil, run in a background goroutine, in that
// order: supervise mode's reaper catches SIGCHLD first (the GPU probe's
// start waits for it), and its forwarder catches every signal then.
// os/signal enables signals one at a time, each a round trip to the Go
// runtime's signal thread, and the start-up work need not wait for that.
//
// stop ends the watching and reports the exit status 128+signal when a
// signal arrived. The signals stay caught: for supervise mode's forwarder,
// which reads the same channel once the command runs, and, in exec mode,
// until ResetDefault and execve.
func Watch(before, then func()) (ctx context.Context, stop func() (status int, stopped bool)) {
	ctx, cancel := context.WithCancelCause(context.Background())
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		if before != nil {
			before()
		}
		if then != nil {
			then()
		}
		select {
		case s := <-caught:
			cancel(Stopped{s.(syscall.Signal)})
		case <-done:
		}
	}()
	return ctx, func() (int, bool) {
		close(done)
		<-exited
		if s, ok := Pending(); ok {
			cancel(Stopped{s})
		}
		if s, ok := context.Cause(ctx).(Stopped); ok {
			return s.Status(), true
		}
		return 0, false
	}
}

// Context is cancelled, with Stopped as its cause, by the first
// terminating signal (caught since the program's start): for a command
// that stops at a signal on its own terms (the spool commands).
func Context() (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan struct{})
	go func() {
		select {
		case s := <-caught:
			cancel(Stopped{s.(syscall.Signal)})
		case <-done:
		}
	}()
	return ctx, func() {
		close(done)
		cancel(nil)
	}
}

// Exit ends a command that does not watch for signals itself (labels,
// version, a usage error) with 128+N when a terminating signal arrived
// while it ran: caught from the start, it would otherwise be lost. It
// returns code otherwise.
func Exit(code int) int {
	Stop()
	if s, ok := Pending(); ok {
		return 128 + int(s)
	}
	return code
}
