package supervise

import (
	"syscall"
	"testing"

	"github.com/paddle-entrypoint/paddle-entrypoint/entrypoint/earlysignal"
)

func TestSignalName(t *testing.T) {
	for sig, want := range map[syscall.Signal]string{
		syscall.SIGKILL: "SIGKILL", syscall.SIGTERM: "SIGTERM", syscall.SIGSEGV: "SIGSEGV",
		syscall.SIGSYS: "SIGSYS", 34: "SIGRTMIN+0", 35: "SIGRTMIN+1", 64: "SIGRTMIN+30", 99: "signal 99",
	} {
		if got := signalName(sig); got != want {
			t.Errorf("signalName(%d) = %q, want %q", int(sig), got, want)
		}
	}
}

func TestCatchable(t *testing.T) {
	caught := map[syscall.Signal]bool{}
	for _, s := range earlysignal.Catchable() {
		caught[s.(syscall.Signal)] = true
	}
	for _, s := range []syscall.Signal{syscall.SIGKILL, syscall.SIGSTOP, syscall.SIGCHLD, syscall.SIGURG} {
		if caught[s] {
			t.Errorf("%v is caught", s)
		}
	}
	// Caught so that kill neither stops nor crashes the supervisor; then
	// dropped by the forwarder.
	for s := range neverForwarded {
		if !caught[s] {
			t.Errorf("%v is not caught", s)
		}
	}
	for _, s := range []syscall.Signal{syscall.SIGTERM, syscall.SIGUSR1, syscall.SIGWINCH, syscall.SIGTSTP, syscall.SIGCONT, 64} {
		if !caught[s] {
			t.Errorf("%v is not caught, so not forwarded", s)
		}
	}
}
