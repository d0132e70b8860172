package monitor

import (
	"context"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The node-report endpoint's families (nodes.go, nodes_auth.go).
var (
	famNodeClockSkew = Family{"paddle_node_clock_skew_seconds",
		"The node agent's clock minus the monitor's, from its latest report: sent_at − the time the monitor received it. A report more than 300 s ahead is refused (425); keep the nodes on NTP.",
		prometheus.GaugeValue, []string{"node"}}
	famGPUUUIDConflict = Family{"paddle_gpu_uuid_conflict",
		"A GPU UUID that node reports while node held_by holds it (value 1): the report is stored but that GPU counts nowhere until 'paddle-monitor node retire' of one of them (docs/node.md, \"A moved GPU\").",
		prometheus.GaugeValue, []string{"node", "UUID", "held_by"}}
	famTokenReviews = Family{"paddle_monitor_tokenreviews_total",
		"TokenReviews of node agents' ServiceAccount tokens sent to the cluster (--kube-tokenreview), by result: authenticated, rejected or error; a token's review is reused for min(its exp, 5 min).",
		prometheus.CounterValue, []string{"result"}}
)

// nodeFamilies are the node collector's families, in the order it
// describes them.
var nodeFamilies = []*Family{&famNodeClockSkew, &famGPUUUIDConflict, &famTokenReviews}

// reviewResults are paddle_monitor_tokenreviews_total's results.
var reviewResults = []string{"authenticated", "error", "rejected"}

// NodeCollector exposes the node-report endpoint's series: each node's
// clock skew (from its latest report, this replica's), the open GPU UUID
// conflicts (from the store at each scrape: every replica sees the same)
// and, with --kube-tokenreview, the reviews sent.
type NodeCollector struct {
	src NodeStore
	log *slog.Logger

	mu        sync.Mutex
	skew      map[string]float64
	reviewing bool
	reviews   map[string]float64
}

// NewNodeCollector returns the collector of src's conflicts (src nil: it
// only describes its families).
func NewNodeCollector(src NodeStore, log *slog.Logger) *NodeCollector {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &NodeCollector{src: src, log: log, skew: map[string]float64{}, reviews: map[string]float64{}}
}

// Describe implements prometheus.Collector.
func (c *NodeCollector) Describe(ch chan<- *prometheus.Desc) {
	describe(ch, nodeFamilies)
}

func (c *NodeCollector) setSkew(node string, v float64) {
	c.mu.Lock()
	c.skew[node] = v
	c.mu.Unlock()
}

func (c *NodeCollector) countReview(result string) {
	c.mu.Lock()
	c.reviews[result]++
	c.mu.Unlock()
}

// Collect implements prometheus.Collector.
func (c *NodeCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	nodes := make([]string, 0, len(c.skew))
	for n := range c.skew {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	for _, n := range nodes {
		ch <- famNodeClockSkew.metric(c.skew[n], n)
	}
	if c.reviewing {
		for _, r := range reviewResults {
			ch <- famTokenReviews.metric(c.reviews[r], r)
		}
	}
	c.mu.Unlock()
	if c.src == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	list, err := c.src.GPUConflicts(ctx)
	if err != nil {
		c.log.Warn("reading the GPU UUID conflicts for /metrics failed", "err", err)
		return
	}
	for _, k := range list {
		ch <- famGPUUUIDConflict.metric(1, k.Node, k.UUID, k.HeldBy)
	}
}
