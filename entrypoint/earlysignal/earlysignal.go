// Package earlysignal owns the entrypoint's signals from the program's
// first init until the command starts: it catches the terminating signals
// in its init, Watch turns them into the start's cancellation (and runs
// supervise mode's catchers in the background), Context serves a command
// that stops on its own terms (the spool commands), Exit ends one that
// watches nothing with 128+N, ResetDefault gives them the kernel's default
// just before exec, and CatchAll catches every other Catchable signal for
// supervise mode's forwarder, which reads Channel once the command runs.
//
// It catches the terminating signals at the earliest moment a Go program
// can: the init of a package that imports nothing but
// os/signal (and what it needs), which the Go runtime initialises long
// before the packages of the product (package initialisation picks, among
// the packages whose imports are done, the first by import path).
//
// Why: until a program asks for a signal with signal.Notify, the Go
// runtime's own handler turns SIGTERM into an exit with status 2 (and, as
// PID 1, where a raised signal with its default action is dropped, that is
// all that happens), and before the runtime installs its handlers at all
// the kernel's default applies (the process dies; as PID 1 the signal is
// dropped). docs/supervise.md has the windows measured.
//
// Guarantees: from this package's init on, every terminating signal the
// process's caller did not ignore is caught and kept (the first ones, up to
// the channel's size) until the program takes them with Channel; a signal
// the caller ignored stays ignored. The program must take them: a caught
// signal no longer ends the process by itself.
package earlysignal

import (
	"os"
	"os/signal"
	"syscall"
)

// Terminating are the signals whose default action ends the process, and
// that a person or an orchestrator sends to stop a start (SIGHUP when a
// terminal closes, SIGQUIT from Ctrl-\, SIGUSR1/2 and SIGALRM from scripts):
// each is treated as SIGTERM is, so none loses the registration or dumps
// the Go runtime's goroutines. SIGPIPE is left alone: Go reports a broken
// pipe as a write error, and catching it would change that.
var Terminating = []os.Signal{
	syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT,
	syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGALRM, syscall.SIGVTALRM,
	syscall.SIGXCPU, syscall.SIGXFSZ, syscall.SIGPWR, syscall.SIGSTKFLT,
}

// caught is filled from this package's init on: the one piece of state the
// package has, since an init has nowhere else to leave what it caught.
var caught = make(chan os.Signal, len(Terminating))

// caughtSignals are the Terminating signals the caller did not ignore.
var caughtSignals []os.Signal

func init() {
	for _, s := range Terminating {
		if !signal.Ignored(s) {
			caughtSignals = append(caughtSignals, s)
		}
	}
	signal.Notify(caught, caughtSignals...)
}

// Channel returns the channel the terminating signals arrive on, and the
// signals it catches (those the caller did not ignore). Signals caught
// before the call are waiting in it.
func Channel() (<-chan os.Signal, []os.Signal) { return caught, caughtSignals }

// Stop stops catching: the signals get the Go runtime's handling back
// (signal.Stop). A signal that arrived before is still in the channel.
func Stop() { signal.Stop(caught) }

// Pending returns a signal that arrived and was not taken yet, if any.
func Pending() (syscall.Signal, bool) {
	select {
	case s := <-caught:
		return s.(syscall.Signal), true
	default:
		return 0, false
	}
}

// ResetDefault gives the caught signals the kernel's default action back,
// as they would have after an execve: for the moment between the last
// check and exec, so that a signal there ends the process (or, as PID 1,
// is dropped) instead of the Go runtime's exit 2. Call it after Stop, and
// only when nothing else in the process catches them.
func ResetDefault() {
	for _, s := range caughtSignals {
		setDefault(s.(syscall.Signal))
	}
}
