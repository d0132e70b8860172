// Command paddle-monitor is the monitor API that paddle-entrypoint registers
// tasks with: it stores registrations, completions and heartbeats in SQLite
// or PostgreSQL, checks tokens, lists tasks and exposes Prometheus metrics.
// See docs/monitor.md.
package main

import "os"

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
