package main

import (
	"context"
	"syscall"

	"github.com/paddle-entrypoint/paddle-entrypoint/earlysignal"
)

// stopSignal is the cause of a context cancelled by a signal.
type stopSignal struct{ sig syscall.Signal }

func (s stopSignal) Error() string { return "received " + s.sig.String() }

// catchSignals turns every terminating signal before exec into the
// cancellation of the returned context, so every step can stop early and
// spool. The signals are caught from the program's first moment by package
// earlysignal (a signal that arrived before this call is waiting there); a
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
// until earlysignal.ResetDefault and execve.
func catchSignals(before, then func()) (ctx context.Context, stop func() (status int, stopped bool)) {
	ctx, cancel := context.WithCancelCause(context.Background())
	ch, _ := earlysignal.Channel()
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
		case s := <-ch:
			cancel(stopSignal{s.(syscall.Signal)})
		case <-done:
		}
	}()
	return ctx, func() (int, bool) {
		close(done)
		<-exited
		if s, ok := earlysignal.Pending(); ok {
			cancel(stopSignal{s})
		}
		if s, ok := context.Cause(ctx).(stopSignal); ok {
			return 128 + int(s.sig), true
		}
		return 0, false
	}
}

// signalContext is cancelled, with the stopSignal as its cause, by the
// first terminating signal (caught since the program's start, see package
// earlysignal).
func signalContext() (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	ch, _ := earlysignal.Channel()
	done := make(chan struct{})
	go func() {
		select {
		case s := <-ch:
			cancel(stopSignal{s.(syscall.Signal)})
		case <-done:
		}
	}()
	return ctx, func() {
		close(done)
		cancel(nil)
	}
}

// exitOnEarlySignal ends a command that does not watch for signals itself
// (labels, version, a usage error) with 128+N when a terminating signal
// arrived while it ran: caught from the start, it would otherwise be lost.
func exitOnEarlySignal(code int) int {
	earlysignal.Stop()
	if s, ok := earlysignal.Pending(); ok {
		return 128 + int(s)
	}
	return code
}
