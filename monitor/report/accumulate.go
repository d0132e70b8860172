package report

import (
	"math"
	"strings"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
)

// acc accumulates one row's sums before they become Figures.
type acc struct {
	t                         facts.TaskSums
	gpuSec, failedSec         float64
	idleSec, idleOKSec, utilW float64
	utilSec                   float64
	cost, unpricedSec         float64
	energyJ                   float64
	energyGPUs                int64
	metrics                   map[string]*facts.MetricSums
	bill                      billing
}

func (a *acc) addMetric(name string, m facts.MetricSums) {
	if a.metrics == nil {
		a.metrics = map[string]*facts.MetricSums{}
	}
	s := a.metrics[name]
	if s == nil {
		s = &facts.MetricSums{}
		a.metrics[name] = s
	}
	s.Sum += m.Sum
	s.Tasks += m.Tasks
}

func (a *acc) addTasks(t facts.TaskSums) { a.t.Add(t) }

// addGPUs adds the listed GPUs' GPU-hours, idle time, utilisation, energy
// and cost. A MIG instance is priced per instance-hour by a key naming its
// profile, else as its share of the GPU (price(model) × share × hours);
// a whole GPU, shared or not, at price(model) × share × hours.
func (a *acc) addGPUs(g facts.GPUSums, p *Prices) {
	a.gpuSec += g.GPUSeconds
	a.failedSec += g.FailedGPUSeconds
	a.idleSec += g.IdleGPUSeconds
	a.idleOKSec += g.IdleOKGPUSeconds
	a.utilW += g.UtilWeighted
	a.utilSec += g.UtilSeconds
	a.energyJ += g.EnergyJoules
	a.energyGPUs += g.EnergyGPUs
	if p == nil {
		return
	}
	// By model a MIG instance's key is its model and profile
	// ("NVIDIA H100 80GB HBM3 1g.10gb"): prices look the model up.
	model := g.Key["model"]
	if g.MIG && g.Profile != "" {
		model = strings.TrimSuffix(model, " "+g.Profile)
	}
	if g.MIG {
		if price, ok := p.ProfilePrice(model, g.Profile); ok {
			a.cost += price * float64(g.InstanceSeconds)
			return
		}
	}
	if price, ok := p.Price(model); ok {
		a.cost += price * g.GPUSeconds
	} else {
		a.unpricedSec += g.GPUSeconds
	}
}

// addUnlisted adds the GPU-seconds of GPUs counted without being listed
// (no model, share 1) and prices them.
func (a *acc) addUnlisted(gpuSec, failedSec int64, p *Prices) {
	a.addUnlistedSeconds(float64(gpuSec), float64(failedSec), p)
}

func (a *acc) addUnlistedSeconds(gpuSec, failedSec float64, p *Prices) {
	a.gpuSec += gpuSec
	a.failedSec += failedSec
	if p == nil {
		return
	}
	if price, ok := p.Price(""); ok {
		a.cost += price * gpuSec
	} else {
		a.unpricedSec += gpuSec
	}
}

// figures rounds every hour figure to the microhour and every share to
// 1e-9: sums of floats may differ in their last bits between stores (they
// add in different orders), and the two must print the same report.
func (a *acc) figures(p *Prices, metrics []string) Figures {
	priced := p != nil
	f := Figures{
		Tasks:               a.t.Tasks,
		CompletedTasks:      a.t.Completed,
		FailedTasks:         a.t.Failed,
		GateFailedTasks:     a.t.GateFailed,
		OpenTasks:           a.t.Open,
		GPUHours:            hours(a.gpuSec),
		FailedGPUHours:      hours(a.failedSec),
		IdleGPUHours:        hours(a.idleSec),
		DurationEstHours:    hours(float64(a.t.EstSeconds)),
		DurationActualHours: hours(a.t.ActualSeconds),
	}
	if n := a.t.QueueWaitTasks; n > 0 {
		mean := round(float64(a.t.QueueWaitSeconds)/float64(n), 1e6)
		longest := float64(a.t.QueueWaitMax)
		f.QueueWaitMeanSeconds, f.QueueWaitMaxSeconds = &mean, &longest
	}
	if a.utilSec > 0 {
		u := round(a.utilW/a.utilSec, 1e6)
		f.UtilMean = &u
	}
	if a.gpuSec > 0 {
		w := round((a.failedSec+a.idleOKSec)/a.gpuSec, 1e9)
		f.WasteShare = &w
	}
	if priced {
		c := round(a.cost/3600, 1e6)
		u := hours(a.unpricedSec)
		f.Cost, f.UnpricedGPUHours = &c, &u
	}
	if a.energyGPUs > 0 {
		kwh := a.energyJ / 3.6e6
		e := round(kwh, 1e6)
		f.EnergyKWh = &e
		if priced && p.PricePerKWh != nil {
			c := round(kwh**p.PricePerKWh, 1e6)
			f.EnergyCost = &c
		}
		if priced && p.CO2KgPerKWh != nil {
			c := round(kwh**p.CO2KgPerKWh, 1e6)
			f.CO2Kg = &c
		}
	}
	if len(metrics) > 0 {
		f.Metrics = make(map[string]MetricMean, len(metrics))
	}
	for _, name := range metrics {
		var m MetricMean
		if s := a.metrics[name]; s != nil && s.Tasks > 0 {
			mean := round(s.Sum/float64(s.Tasks), 1e9)
			m = MetricMean{Mean: &mean, Tasks: s.Tasks}
		}
		f.Metrics[name] = m
	}
	return f
}

func hours(seconds float64) float64 { return round(seconds/3600, 1e6) }

func round(x, scale float64) float64 { return math.Round(x*scale) / scale }
