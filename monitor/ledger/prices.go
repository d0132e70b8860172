package ledger

import (
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/report"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
)

// gpuPrice is the hourly price of a whole GPU of model (0, false without).
func gpuPrice(p *report.Prices, model string) (float64, bool) {
	if p == nil {
		return 0, false
	}
	return p.Price(model)
}

// instancePrice is the price of one GPU-hour of a user's part: a MIG
// instance at its profile's price per instance-hour (its GPU-hours are
// weighted by slices/total), else the GPU's price.
func instancePrice(p *report.Prices, u *store.UserHour) (float64, bool) {
	if p == nil {
		return 0, false
	}
	if u.GPUInstanceID >= 0 && u.Slices > 0 && u.Total > 0 {
		if v, ok := p.ProfilePrice(u.Model, u.Profile); ok {
			return v * float64(u.Total) / float64(u.Slices), true
		}
	}
	return p.Price(u.Model)
}
