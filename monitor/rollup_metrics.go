package monitor

import (
	"github.com/prometheus/client_golang/prometheus"
)

// RollupSource is what RollupCollector reads: the store's counts per grain.
type RollupSource interface {
	RollupBuckets() map[string]int64
}

// RollupCollector exposes paddle_monitor_rollup_buckets_written_total from
// the store's counts, read at each scrape.
type RollupCollector struct{ src RollupSource }

// NewRollupCollector returns the collector of src's counts.
func NewRollupCollector(src RollupSource) *RollupCollector { return &RollupCollector{src: src} }

// Describe implements prometheus.Collector.
func (c *RollupCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descs[&famRollupBuckets]
}

// Collect implements prometheus.Collector.
func (c *RollupCollector) Collect(ch chan<- prometheus.Metric) {
	for grain, n := range c.src.RollupBuckets() {
		ch <- prometheus.MustNewConstMetric(descs[&famRollupBuckets], prometheus.CounterValue, float64(n), grain)
	}
}
