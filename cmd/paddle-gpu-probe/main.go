// Command paddle-gpu-probe asks NVML for the GPUs and the driver version
// and prints the answer as one JSON object (gpu.Report: the GPUs, and the
// MIG devices of those in MIG mode) on stdout; in its sampling mode it
// prints the GPUs' utilisation, used memory and energy counter, one line
// per interval (gpu.Sample), for GPU UUIDs and MIG device UUIDs alike; in
// its node mode (paddle-node's long-lived child) it prints every GPU of the
// node, its MIG instances and the processes on each, one JSON line
// (probestream.Line) per interval.
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
//	$ paddle-gpu-probe sample --interval 1s GPU-... MIG-...
//	v2 GPU-...=37/1073741824/81234567890 MIG-...=-/-/90012345678
//	$ paddle-gpu-probe node --interval 5s
//	{"time":...,"gpus":[{"index":0,"uuid":"GPU-...","util":37,"processes":[{"pid":4242,"used_memory_bytes":1073741824,"sm_util":35}],...}]}
//
// The sampling and node modes open NVML once and writes a line at once, then one per
// interval, each with a single write; it exits 0 when its stdin reaches end
// of file (the entrypoint closes it, or dies), 1 when NVML cannot be used,
// 2 on a usage error.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/spf13/pflag"

	"github.com/paddle-entrypoint/paddle-entrypoint/gpu/nvmlprobe"
	"github.com/paddle-entrypoint/paddle-entrypoint/internal/program"
)

const usage = `usage: paddle-gpu-probe                                  print the GPUs NVML sees as JSON
       paddle-gpu-probe sample --interval D UUID...    print utilisation, used memory and energy every D until stdin closes (GPU or MIG UUIDs)
       paddle-gpu-probe node --interval D              print every GPU, MIG instance and GPU process as one JSON line every D until stdin closes`

// stuckExit bounds how long the sampling mode may take to end after its
// stdin closed: an NVML call that never returns must not keep it running.
const stuckExit = time.Second

func main() {
	switch {
	case len(os.Args) == 1:
		if err := json.NewEncoder(os.Stdout).Encode(nvmlprobe.Collect(nvml.New())); err != nil {
			fmt.Fprintln(os.Stderr, "paddle-gpu-probe:", err)
			os.Exit(1)
		}
	case os.Args[1] == "sample":
		os.Exit(sample(os.Args[2:]))
	case os.Args[1] == "node":
		os.Exit(node(os.Args[2:]))
	default:
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(program.ExitUsage)
	}
}

func sample(args []string) int {
	fs := pflag.NewFlagSet("sample", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	interval := fs.Duration("interval", 10*time.Second, "time between samples")
	if err := fs.Parse(args); err != nil {
		return mode("sample").Usage(os.Stderr, err, usage)
	}
	if *interval <= 0 || fs.NArg() == 0 {
		return mode("sample").Usage(os.Stderr, errors.New("--interval must be positive and at least one UUID given"), usage)
	}
	stop := stopAtEOF("sample")
	if err := nvmlprobe.Sample(nvml.New(), fs.Args(), *interval, os.Stdout, os.Stderr, stop); err != nil {
		fmt.Fprintln(os.Stderr, "paddle-gpu-probe sample:", err)
		return 1
	}
	return 0
}

// node is the node agent's streaming mode: every GPU, each line at once.
func node(args []string) int {
	fs := pflag.NewFlagSet("node", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	interval := fs.Duration("interval", 5*time.Second, "time between samples")
	proc := fs.String("proc", "/proc", "the host's proc file system (to leave the MPS server out)")
	if err := fs.Parse(args); err != nil {
		return mode("node").Usage(os.Stderr, err, usage)
	}
	if *interval <= 0 || fs.NArg() != 0 {
		return mode("node").Usage(os.Stderr, errors.New("--interval must be positive and no argument given"), usage)
	}
	stop := stopAtEOF("node")
	comm := func(pid uint32) string {
		b, err := os.ReadFile(filepath.Join(*proc, strconv.FormatUint(uint64(pid), 10), "comm"))
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	if err := nvmlprobe.Stream(nvml.New(), *interval, os.Stdout, os.Stderr, comm, stop); err != nil {
		fmt.Fprintln(os.Stderr, "paddle-gpu-probe node:", err)
		return 1
	}
	return 0
}

// mode is one of the probe's modes as the programs' shared shell sees it:
// its usage errors ("paddle-gpu-probe sample: ...", the usage) exit 2.
func mode(name string) program.Program { return program.Program{Name: "paddle-gpu-probe " + name} }

// stopAtEOF returns the channel that closes when stdin reaches end of file
// (the parent is gone or asks the mode to end), and ends the process with
// status 3 when the mode has not returned stuckExit after that: an NVML
// call that never returns must not outlive the parent.
func stopAtEOF(name string) <-chan struct{} {
	stop := make(chan struct{})
	go func() {
		io.Copy(io.Discard, os.Stdin)
		close(stop)
		time.Sleep(stuckExit)
		fmt.Fprintf(os.Stderr, "paddle-gpu-probe %s: an NVML call did not return; exiting\n", name)
		os.Exit(3)
	}()
	return stop
}
