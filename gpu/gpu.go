// Package gpu counts the GPUs the training command will use.
//
// CONTRACT PLACEHOLDER: implemented by the GPU work. The NVML calls run in a
// separate cgo executable (the probe); this package is cgo-free and only
// starts the probe with a timeout, reads its answer, and filters it by
// CUDA_VISIBLE_DEVICES.
package gpu

import (
	"context"
	"log/slog"
	"time"
)

// Device is one GPU as NVML reports it inside the container.
type Device struct {
	Index            int    `json:"index"`
	UUID             string `json:"uuid"`
	Name             string `json:"name"`
	MemoryTotalBytes uint64 `json:"memory_total_bytes"`
}

// Inventory is what the training will see.
type Inventory struct {
	Devices       []Device
	DriverVersion string // "" when unknown
	// Source says where the count came from: "nvml", "device-nodes" or "none".
	Source string
}

// UUIDs returns the devices' UUIDs in order, leaving out empty ones.
func (inv Inventory) UUIDs() []string {
	var out []string
	for _, d := range inv.Devices {
		if d.UUID != "" {
			out = append(out, d.UUID)
		}
	}
	return out
}

// Options configure a probe.
type Options struct {
	Probe   string        // the probe executable
	Timeout time.Duration // PADDLE_GPU_TIMEOUT
	Environ []string      // the task's environment (CUDA_VISIBLE_DEVICES, LD_LIBRARY_PATH)
	Logger  *slog.Logger
}

// Probe is a GPU probe running in the background.
type Probe struct{}

// Start begins probing and returns at once, so the probe overlaps the rest
// of the start-up work.
func Start(ctx context.Context, opt Options) *Probe { return &Probe{} }

// Wait returns the inventory, at most Timeout after Start. It logs why when
// the count is not NVML's.
func (p *Probe) Wait() Inventory { return Inventory{Source: "none"} }

// Stop abandons the probe, killing its process if still running.
func (p *Probe) Stop() {}
