package earlysignal

import (
	"os"
	"os/signal"
	"slices"
	"syscall"
)

// MaxSignal is the highest real-time signal on Linux.
const MaxSignal = 64

// Catchable returns the signals a supervisor catches (supervise mode, to
// forward them to the command): every one but SIGKILL and SIGSTOP (which
// cannot be), SIGCHLD (the reaper's), SIGURG (the Go runtime's own
// preemption signal: one sent with kill is ignored, its default), and
// those the caller ignored, which stay ignored, for the command too, and
// are not forwarded.
func Catchable() []os.Signal {
	var out []os.Signal
	for n := 1; n <= MaxSignal; n++ {
		s := syscall.Signal(n)
		switch s {
		case syscall.SIGKILL, syscall.SIGSTOP, syscall.SIGCHLD, syscall.SIGURG:
			continue
		case syscall.SIGPROF, 32, 33, 34:
			// The Go runtime's own (profiling; glibc's and musl's
			// internal signals): os/signal cannot catch them, so
			// they cannot be forwarded (docs/supervise.md).
			continue
		}
		if signal.Ignored(s) {
			continue
		}
		out = append(out, s)
	}
	return out
}

// CatchAll catches every Catchable signal but those of except (which
// another channel holds: Channel's) on ch, from now on. os/signal enables
// signals one at a time, each a round trip to the Go runtime's signal
// thread (about a millisecond for the 60 of them), so a start runs it in
// the background (Watch's then).
func CatchAll(ch chan<- os.Signal, except []os.Signal) {
	var sigs []os.Signal
	for _, s := range Catchable() {
		if !slices.Contains(except, s) {
			sigs = append(sigs, s)
		}
	}
	signal.Notify(ch, sigs...)
}
