package nvmlprobe

/*
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>

// probe_fault hands a fault back to the kernel's default action, so the
// probe dies by the signal itself (its parent then knows the library
// crashed) instead of by the Go runtime's "unexpected signal" exit status 2.
static void probe_fault(int sig, siginfo_t *info, void *uctx) {
	(void)info;
	(void)uctx;
	struct sigaction dfl;
	memset(&dfl, 0, sizeof dfl);
	dfl.sa_handler = SIG_DFL;
	sigaction(sig, &dfl, NULL);
	// Returning re-runs the faulting instruction, which now kills.
}

// The Go runtime keeps a signal handler that was installed before it
// started and forwards to it the faults that happen outside Go code (in
// the NVIDIA library); faults in Go code stay the runtime's panics. A
// constructor runs before the runtime installs its handlers.
__attribute__((constructor)) static void probe_install_fault_handlers(void) {
	// A crash must not write a core dump on a container's start path.
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	static const int sigs[] = {SIGSEGV, SIGBUS, SIGFPE};
	for (unsigned i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		sa.sa_sigaction = probe_fault;
		sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
		sigemptyset(&sa.sa_mask);
		sigaction(sigs[i], &sa, NULL);
	}
}
*/
import "C"
