package monitor

import (
	"context"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/accounts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/ledger"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
)

// FleetSource is what the fleet series are read from (a *store.Store).
type FleetSource interface {
	ledger.Source
	NodesSeen(ctx context.Context, since int64) ([]store.NodeSeen, error)
	LatestNodeReport(ctx context.Context, node string) (*wire.NodeReport, error)
}

// FleetConfig is what NewFleetCollector needs: the ledger's settings of
// serve (--namespace-projects, --split, --node-retire).
type FleetConfig struct {
	Source     FleetSource
	Namespaces *ledger.NamespaceProjects
	Split      string        // ledger.SplitEqual when empty
	Retire     time.Duration // store.DefaultNodeRetire when 0
	Now        func() time.Time
	Log        *slog.Logger
	// Accounts are the figures of the month series (serve hands every
	// view the same; nil: made of the fields above).
	Accounts *accounts.Accounts
}

// FleetCollector exposes the ledger on /metrics (docs/cost.md, "The
// ledger"):
//   - paddle_fleet_gpu_seconds{state, gpu_model}: the current UTC month's
//     ledger by GPU model, each of the five states in GPU-seconds, computed
//     at most once per ProjectsEvery by each replica (scrapes in between
//     get the cached series);
//   - from the latest report of each node not retired, whose last report
//     is within --node-retire and was not its final one:
//     paddle_node_report_age_seconds{node} (now − the report's time, 0 for
//     a report ahead of the clock) and, for each user present on a GPU
//     instance, paddle_gpu_user_info{…, state} 1 with the state the ledger
//     gives it at that report's time (attributed, with its task and
//     project; undeclared, with its namespace's project; unattributed).
//     A node's users are tied once per report, when its latest report
//     changes; users identical in every label are one series.
type FleetCollector struct {
	cfg FleetConfig

	mu      sync.Mutex
	at      time.Time
	month   []prometheus.Metric
	monthOK bool
	nodes   map[string]*nodeSeries
	timeout time.Duration
}

// nodeSeries are the user series of one node's latest report.
type nodeSeries struct {
	time  int64
	final bool
	users [][]string // label values in famGPUUserInfo's order
}

// NewFleetCollector returns the collector of cfg.Source's fleet.
func NewFleetCollector(cfg FleetConfig) *FleetCollector {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Split == "" {
		cfg.Split = ledger.SplitEqual
	}
	if cfg.Retire <= 0 {
		cfg.Retire = store.DefaultNodeRetire
	}
	if cfg.Accounts == nil {
		cfg.Accounts = accounts.New(accounts.Sources{Ledger: cfg.Source},
			accounts.Inputs{Namespaces: cfg.Namespaces, Split: cfg.Split, Retire: cfg.Retire, Now: cfg.Now})
	}
	return &FleetCollector{cfg: cfg, nodes: map[string]*nodeSeries{}, timeout: 30 * time.Second}
}

// Describe implements prometheus.Collector: the families of
// fleetFamilies.
func (c *FleetCollector) Describe(ch chan<- *prometheus.Desc) {
	describe(ch, fleetFamilies)
}

// Collect implements prometheus.Collector.
func (c *FleetCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.cfg.Now()
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	if due(c.month == nil, c.at, now) {
		c.month, c.monthOK = c.computeMonth(ctx, now)
		c.at = now
	}
	for _, m := range c.month {
		ch <- m
	}
	nodesOK := c.collectNodes(ctx, now, ch)
	failed := 0.0
	if !c.monthOK || !nodesOK {
		failed = 1
	}
	ch <- famFleetScrapeError.metric(failed)
}

// computeMonth is the month's ledger by model as series (ok false: it
// failed, logged).
func (c *FleetCollector) computeMonth(ctx context.Context, now time.Time) ([]prometheus.Metric, bool) {
	l, err := c.cfg.Accounts.FleetMonth(ctx, now)
	if err != nil {
		c.cfg.Log.Error("fleet month series: the ledger failed", "err", err)
		return []prometheus.Metric{}, false
	}
	out := []prometheus.Metric{}
	for _, row := range l.Rows {
		for i, state := range ledger.States {
			out = append(out, famFleetGPUSeconds.metric(math.Round(row.States[i]*3600*100)/100, state, row.Key))
		}
	}
	return out, true
}

// collectNodes sends the nodes' series, reading the latest report of each
// node whose report changed since the last scrape (ok false: a read
// failed, logged; the nodes read are served).
func (c *FleetCollector) collectNodes(ctx context.Context, now time.Time, ch chan<- prometheus.Metric) bool {
	seen, err := c.cfg.Source.NodesSeen(ctx, now.Add(-c.cfg.Retire).Unix())
	if err != nil {
		c.cfg.Log.Error("fleet series: reading the nodes failed", "err", err)
		return false
	}
	ok := true
	keep := make(map[string]*nodeSeries, len(seen))
	for _, n := range seen {
		s := c.nodes[n.Node]
		if s == nil || s.time != n.LastTime {
			if s, err = c.readNode(ctx, n); err != nil {
				c.cfg.Log.Error("fleet series: reading a node's latest report failed", "node", n.Node, "err", err)
				ok = false
				continue
			}
		}
		keep[n.Node] = s
		if s.final {
			continue
		}
		ch <- famNodeReportAge.metric(float64(max(0, now.Unix()-n.LastTime)), n.Node)
		for _, u := range s.users {
			ch <- famGPUUserInfo.metric(1, u...)
		}
	}
	c.nodes = keep
	return ok
}

// readNode reads n's latest report and ties its users.
func (c *FleetCollector) readNode(ctx context.Context, n store.NodeSeen) (*nodeSeries, error) {
	r, err := c.cfg.Source.LatestNodeReport(ctx, n.Node)
	if err != nil {
		return nil, err
	}
	s := &nodeSeries{time: r.Time, final: r.Final}
	if r.Final {
		return s, nil
	}
	dup := map[string]bool{}
	for i := range r.Instances {
		in := &r.Instances[i]
		if in.Samples == 0 {
			continue
		}
		gi := ""
		if in.GPUInstanceID != nil {
			gi = strconv.Itoa(*in.GPUInstanceID)
		}
		for j := range in.Users {
			u := &in.Users[j]
			if max(u.AllocatedShare, u.SeenShare) <= 0 {
				continue // listed, never present: no use
			}
			id := store.IdentityOf(u)
			state, tie, project, err := ledger.UserState(ctx, c.cfg.Source, c.cfg.Namespaces, r.Node, r.Time, &id)
			if err != nil {
				return nil, err
			}
			taskID := ""
			if tie != nil {
				taskID = tie.TaskID
			}
			labels := []string{r.Node, in.UUID, gi, u.Runtime, u.ContainerID, u.Namespace, u.Pod, u.Container, u.SlurmJob,
				taskID, project, state}
			k := strings.Join(labels, "\x00")
			if dup[k] {
				continue
			}
			dup[k] = true
			s.users = append(s.users, labels)
		}
	}
	return s, nil
}
