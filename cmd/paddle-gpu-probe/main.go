// Command paddle-gpu-probe asks NVML for the GPUs and the driver version
// and prints the answer as one JSON object (gpu.Report) on stdout.
//
// paddle-entrypoint runs it as a child process, with a timeout and without
// LD_BIND_NOW, so that a missing, hung or crashing NVIDIA library, or a
// glibc this dynamic executable cannot run with, costs the entrypoint only
// its GPU fields. It is a normal dynamic cgo program: go-nvml calls into the
// libnvidia-ml.so.1 it dlopens, which a static program cannot do. It exits
// 0 whenever it could write an answer, even one that says NVML is unusable.
//
// Run by hand, it shows what the entrypoint would learn on a node:
//
//	$ paddle-gpu-probe
//	{"devices":[{"index":0,"uuid":"GPU-...","name":"NVIDIA A100-SXM4-80GB","memory_total_bytes":85899345920}],"driver_version":"550.54.15"}
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/paddle-entrypoint/paddle-entrypoint/gpu/nvmlprobe"
)

func main() {
	if len(os.Args) > 1 {
		fmt.Fprintln(os.Stderr, "usage: paddle-gpu-probe (no arguments; prints the GPUs NVML sees as JSON)")
		os.Exit(2)
	}
	if err := json.NewEncoder(os.Stdout).Encode(nvmlprobe.Collect(nvml.New())); err != nil {
		fmt.Fprintln(os.Stderr, "paddle-gpu-probe:", err)
		os.Exit(1)
	}
}
