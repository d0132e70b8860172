package gpu

// GPUInterval is how busy one GPU was over one heartbeat's interval: the
// utilisation readings the sampler streamed since the previous heartbeat.
// With none, Samples is 0 and UtilMean nil (JSON null).
type GPUInterval struct {
	// UUID is the GPU's, a MIG instance's parent's; MIGUUID the instance's.
	UUID    string `json:"uuid"`
	MIGUUID string `json:"mig_uuid,omitempty"`
	// Samples counts the interval's utilisation readings, so UtilMean is
	// set exactly when Samples is not 0.
	Samples int `json:"samples"`
	// UtilMean is their mean, in percent.
	UtilMean *float64 `json:"util_mean"`
}

// intervalStats is the running interval of one GPU: two counters, reset by
// TakeInterval, so a heartbeat's figures take no memory that grows.
type intervalStats struct {
	samples uint64
	utilSum uint64
}

func (g *intervalStats) add(r Reading) {
	if r.HasUtil && r.Util <= 100 {
		g.samples++
		g.utilSum += uint64(r.Util)
	}
}

// TakeInterval returns, per GPU in the order given, the readings since
// the previous call (or since the sampler started), and starts the next
// interval. A sample line counts in exactly one interval; a sampler that
// could not start, or has ended, returns entries without new samples.
func (s *Sampler) TakeInterval() []GPUInterval {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]GPUInterval, len(s.gpus))
	for i, d := range s.gpus {
		g := s.interval[i]
		out[i] = GPUInterval{UUID: d.UUID, Samples: int(g.samples)}
		if d.MIG != nil {
			out[i].MIGUUID = d.MIG.UUID
		}
		if g.samples > 0 {
			mean := float64(g.utilSum) / float64(g.samples)
			out[i].UtilMean = &mean
		}
	}
	clear(s.interval)
	return out
}
