// Command gofloor is the benchmark's floor for any Go entrypoint that speaks
// HTTP: it pays for the Go runtime's start and net/http's package
// initialisation, and does nothing else before exec'ing its arguments. The
// benchmark builds it the way the entrypoint is built (static, cgo-free).
package main

import (
	_ "net/http" // its package init is the cost being measured
	"os"
	"syscall"
)

func main() {
	if len(os.Args) < 2 {
		os.Stderr.WriteString("usage: gofloor /path/to/command [arg...]\n")
		os.Exit(2)
	}
	err := syscall.Exec(os.Args[1], os.Args[1:], os.Environ())
	os.Stderr.WriteString("gofloor: " + err.Error() + "\n")
	os.Exit(127)
}
