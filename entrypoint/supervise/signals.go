package supervise

import (
	"os"
	"syscall"

	"github.com/paddle-entrypoint/paddle-entrypoint/entrypoint/earlysignal"
)

// neverForwarded are signals the supervisor takes (so that one sent with
// kill neither stops nor crashes it) but never passes on: job control of
// the supervisor's own terminal I/O (as tini), and the fault signals, which
// only mean something to the process that faulted.
var neverForwarded = map[syscall.Signal]bool{
	syscall.SIGTTIN: true, syscall.SIGTTOU: true,
	syscall.SIGSEGV: true, syscall.SIGBUS: true, syscall.SIGILL: true, syscall.SIGFPE: true,
	syscall.SIGTRAP: true, syscall.SIGSYS: true, syscall.SIGABRT: true,
}

// Signals passes caught signals to the command, or to its process group.
type Signals struct {
	ch chan os.Signal
	// also brings signals another catcher holds (Also), forwarded the
	// same way; alsoSigs are those signals, not caught again here.
	also     <-chan os.Signal
	alsoSigs []os.Signal
	caught   chan struct{} // closed once every catchable signal is caught
	stop     chan struct{}
	done     chan struct{}
}

// NewSignals returns a forwarder that catches nothing yet.
func NewSignals() *Signals {
	return &Signals{ch: make(chan os.Signal, 64), caught: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
}

// Catch catches every catchable signal (earlysignal.Catchable), but those
// Also brings. os/signal enables signals one at a
// time, each a round trip to the Go runtime's signal thread (about a
// millisecond for the 60 of them), so the caller runs it in the background
// while the start-up work goes on; Run waits for it before the command
// starts. Signals caught before the command starts are kept (up to the
// channel's size) and forwarded then.
func (f *Signals) Catch() {
	earlysignal.CatchAll(f.ch, f.alsoSigs)
	close(f.caught)
}

// Also makes the forwarder take sigs from ch, where another catcher (the
// program's earliest) keeps them, instead of catching them itself. Call it
// before Catch.
func (f *Signals) Also(ch <-chan os.Signal, sigs []os.Signal) {
	f.also, f.alsoSigs = ch, sigs
}

// Caught returns once every catchable signal is caught: from then on none
// has its default action, and each is kept for the command.
func (f *Signals) Caught() { <-f.caught }

// forward passes signals to pid (to its group when group is true) until
// end is called.
func (f *Signals) forward(pid int, group bool, log func(msg string, args ...any)) {
	target := pid
	if group {
		target = -pid
	}
	go func() {
		defer close(f.done)
		for {
			var s os.Signal
			select {
			case s = <-f.ch:
			case s = <-f.also: // nil without Also: never ready
			case <-f.stop:
				return
			}
			sig := s.(syscall.Signal)
			if neverForwarded[sig] {
				log("signal not forwarded", "signal", signalName(sig))
				continue
			}
			if err := syscall.Kill(target, sig); err != nil {
				log("signal not forwarded", "signal", signalName(sig), "err", err)
			}
		}
	}()
}

// end stops forwarding (the command has ended).
func (f *Signals) end() {
	close(f.stop)
	<-f.done
}
