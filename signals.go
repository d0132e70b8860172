package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// stopSignal is the cause of a context cancelled by a signal.
type stopSignal struct{ sig syscall.Signal }

func (s stopSignal) Error() string { return "received " + s.sig.String() }

// terminating are the signals whose default action ends the process, and
// that a person or an orchestrator sends to stop a start (SIGHUP when a
// terminal closes, SIGQUIT from Ctrl-\, SIGUSR1/2 and SIGALRM from scripts):
// each is treated as SIGTERM is, so none loses the registration or dumps
// the Go runtime's goroutines. SIGPIPE is left alone: Go reports a broken
// pipe as a write error, and catching it would change that.
var terminating = []os.Signal{
	syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT,
	syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGALRM, syscall.SIGVTALRM,
	syscall.SIGXCPU, syscall.SIGXFSZ, syscall.SIGPWR, syscall.SIGSTKFLT,
}

// catchSignals turns every terminating signal before exec into the
// cancellation of the returned context, so every step can stop early and
// spool. A signal the caller ignored stays ignored (and so stays ignored
// for the command). The signals are caught in the background: os/signal
// enables them one at a time, each a round trip to the Go runtime's signal
// thread (which the first one starts), and the start-up work need not wait
// for that.
//
// before and then, when not nil, run in the same background goroutine,
// before and after these signals are caught: supervise mode's reaper
// catches SIGCHLD first (the GPU probe's start waits for it), and its
// forwarder catches every signal last, so that a terminating signal is
// never the forwarder's alone before the command starts.
//
// stop ends the catching and reports the exit status 128+signal when a
// signal arrived. Signals nothing else catches get their default action
// back, so that one arriving between here and exec still stops the start;
// those another catcher holds (supervise mode's forwarder, which must have
// caught them before stop is called) stay with it.
func catchSignals(before, then func()) (ctx context.Context, stop func() (status int, stopped bool)) {
	ctx, cancel := context.WithCancelCause(context.Background())
	ch := make(chan os.Signal, 1)
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		if before != nil {
			before()
		}
		var sigs []os.Signal
		for _, s := range terminating {
			if !signal.Ignored(s) {
				sigs = append(sigs, s)
			}
		}
		signal.Notify(ch, sigs...)
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
		signal.Stop(ch)
		select {
		case s := <-ch:
			cancel(stopSignal{s.(syscall.Signal)})
		default:
		}
		if s, ok := context.Cause(ctx).(stopSignal); ok {
			return 128 + int(s.sig), true
		}
		return 0, false
	}
}
