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

// catchSignals turns SIGTERM and SIGINT before exec into the cancellation of
// the returned context, so every step can stop early and spool. A signal the
// caller ignored stays ignored (and so stays ignored for the command).
//
// stop ends the catching, restoring the default dispositions so that a
// signal arriving between here and exec still stops the start, and reports
// the exit status 128+signal when a signal arrived.
func catchSignals() (ctx context.Context, stop func() (status int, stopped bool)) {
	ctx, cancel := context.WithCancelCause(context.Background())
	var sigs []os.Signal
	for _, s := range []os.Signal{syscall.SIGTERM, syscall.SIGINT} {
		if !signal.Ignored(s) {
			sigs = append(sigs, s)
		}
	}
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, sigs...)
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		select {
		case s := <-ch:
			cancel(stopSignal{s.(syscall.Signal)})
		case <-done:
		}
	}()
	return ctx, func() (int, bool) {
		signal.Reset(sigs...)
		close(done)
		<-exited
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
