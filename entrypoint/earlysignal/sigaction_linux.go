package earlysignal

import (
	"syscall"
	"unsafe"
)

// sigaction is the kernel's struct sigaction (x86-64 and arm64 layout, the
// same for SIG_DFL, which needs no restorer).
type sigaction struct {
	handler  uintptr
	flags    uint64
	restorer uintptr
	mask     uint64
}

// setDefault sets sig's disposition to SIG_DFL with rt_sigaction directly:
// os/signal cannot (after Stop the runtime keeps its own handler).
func setDefault(sig syscall.Signal) {
	sa := sigaction{} // handler 0 is SIG_DFL
	syscall.RawSyscall6(syscall.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&sa)), 0, 8, 0, 0)
}
