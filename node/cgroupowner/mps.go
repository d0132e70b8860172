package cgroupowner

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The driver's MPS daemons: the control daemon starts the server, which
// holds every MPS client's context and so is listed on the GPU as a
// process of its own.
const (
	MPSServer  = "nvidia-cuda-mps-server"
	MPSControl = "nvidia-cuda-mps-control"
)

// Executable is the name of pid's executable: the base name of
// /proc/PID/exe, else (a kernel thread, a link the agent may not read) of
// argv[0]; "" when neither can be read. comm is never used: the kernel
// keeps 15 characters of it, and "nvidia-cuda-mps-server" has 22.
func (r *Reader) Executable(pid int) string {
	dir := filepath.Join(r.root, strconv.Itoa(pid))
	if l, err := os.Readlink(filepath.Join(dir, "exe")); err == nil && l != "" {
		return filepath.Base(strings.TrimSuffix(l, " (deleted)"))
	}
	b, err := os.ReadFile(filepath.Join(dir, "cmdline"))
	if err != nil || len(b) == 0 {
		return ""
	}
	argv0, _, _ := strings.Cut(string(b), "\x00")
	return filepath.Base(argv0)
}

// IsMPSServer says whether pid is the driver's MPS server: its executable
// is nvidia-cuda-mps-server and its parent's is nvidia-cuda-mps-control
// (the control daemon starts it, on the host or in a device plugin's MPS
// pod). A process that only takes the name is a user like any other.
func (r *Reader) IsMPSServer(pid int) bool {
	if r.Executable(pid) != MPSServer {
		return false
	}
	p, err := r.fs.Proc(pid)
	if err != nil {
		return false
	}
	st, err := p.Stat()
	if err != nil || st.PPID <= 0 {
		return false
	}
	return r.Executable(st.PPID) == MPSControl
}
