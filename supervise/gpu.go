package supervise

import (
	"context"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/register"
)

// Sampling is how the GPUs' utilisation is sampled while the command runs.
type Sampling struct {
	Interval time.Duration // 0: off
	Probe    string
	UUIDs    []string
	Environ  []string
	Root     string
}

// sampler summarises the GPUs' utilisation for the completion.
type sampler struct {
	uuids []string
}

func startSampler(_ context.Context, _ *Reaper, s Sampling) *sampler {
	return &sampler{uuids: s.UUIDs}
}

// Stop ends sampling and returns one summary per GPU, in order.
func (s *sampler) Stop() []register.GPUUsage {
	out := make([]register.GPUUsage, len(s.uuids))
	for i, u := range s.uuids {
		out[i] = register.GPUUsage{UUID: u}
	}
	return out
}
