// Command paddle-node is the node agent: the platform's own witness on
// every GPU node (docs/node.md). It is static and cgo-free; NVML is read by
// its child, paddle-gpu-probe. The program is package nodeagent.
package main

import (
	"os"

	"github.com/paddle-entrypoint/paddle-entrypoint/node/nodeagent"
)

// version is set by the build (-X main.version).
var version = "dev"

func main() {
	os.Exit(nodeagent.Main(os.Args[1:], os.Getenv, os.Stdout, os.Stderr, version))
}
