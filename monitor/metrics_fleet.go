package monitor

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paddle-entrypoint/paddle-entrypoint/ledger"
	"github.com/paddle-entrypoint/paddle-entrypoint/report"
	"github.com/paddle-entrypoint/paddle-entrypoint/store"
)

// The fleet's families (FleetCollector): the ledger of the month and the
// nodes' latest reports.
var (
	famFleetGPUSeconds = Family{"paddle_fleet_gpu_seconds",
		"GPU-seconds of the fleet in the current UTC month by ledger state (attributed, undeclared, unattributed, unallocated, unobserved) and GPU model, from the node reports (computed at most once a minute).",
		prometheus.GaugeValue, []string{"state", "gpu_model"}}
	famGPUUserInfo = Family{"paddle_gpu_user_info",
		"A user of a GPU instance in its node's latest report (value 1): state attributed (tied to a registered task), undeclared or unattributed. Join with dcgm-exporter's series on UUID and GPU_I_ID.",
		prometheus.GaugeValue, []string{"node", "UUID", "GPU_I_ID", "runtime", "container_id", "namespace", "pod", "container", "slurm_job",
			"task_id", "project", "state"}}
	famNodeReportAge = Family{"paddle_node_report_age_seconds",
		"Seconds since the end of a node's latest report (nodes retired or gone with a final report are left out).",
		prometheus.GaugeValue, []string{"node"}}
	famFleetScrapeError = Family{"paddle_monitor_fleet_scrape_error",
		"1 if computing the fleet series failed the last time (paddle_fleet_*, paddle_gpu_user_info and paddle_node_report_age_seconds are then missing), else 0.",
		prometheus.GaugeValue, nil}
)

// fleetFamilies are the fleet collector's families, in the order it
// describes them.
var fleetFamilies = []*Family{&famFleetGPUSeconds, &famGPUUserInfo, &famNodeReportAge, &famFleetScrapeError}

// FleetSource is what the fleet collector reads.
type FleetSource interface {
	ledger.Source
	LatestReports(ctx context.Context) ([]store.LatestReport, error)
}

// FleetCollector exposes the fleet's month by state and model, the users
// of the nodes' latest reports and the reports' age, computed at most once
// per ProjectsEvery (the age from the last computation's reports, at the
// scrape's time).
type FleetCollector struct {
	src        FleetSource
	cfg        LedgerConfig
	log        *slog.Logger
	mu         sync.Mutex
	at         time.Time
	cached     []prometheus.Metric
	latest     []store.LatestReport
	failed     bool
	computedOK bool
}

// NewFleetCollector returns the collector of the fleet (cfg's prices,
// namespaces, split and --node-retire; its Now the clock).
func NewFleetCollector(src FleetSource, cfg LedgerConfig, log *slog.Logger) *FleetCollector {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Split == "" {
		cfg.Split = ledger.SplitEqual
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &FleetCollector{src: src, cfg: cfg, log: log}
}

// Describe implements prometheus.Collector.
func (c *FleetCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, f := range fleetFamilies {
		ch <- descs[f]
	}
}

// Collect implements prometheus.Collector.
func (c *FleetCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.cfg.Now()
	if !c.computedOK || now.Sub(c.at) >= ProjectsEvery || now.Before(c.at) {
		c.compute(now)
	}
	failed := 0.0
	if c.failed {
		failed = 1
	}
	ch <- famFleetScrapeError.metric(failed)
	if c.failed {
		return
	}
	for _, m := range c.cached {
		ch <- m
	}
	for _, l := range c.latest {
		ch <- famNodeReportAge.metric(float64(now.Unix()-l.Time), l.Node)
	}
}

func (c *FleetCollector) compute(now time.Time) {
	c.at, c.computedOK = now, true
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	q := ledger.Query{Window: report.Month(now), By: ledger.ByModel, Split: c.cfg.Split, Namespaces: c.cfg.Namespaces,
		Retire: c.cfg.Retire, Now: now}
	var out []prometheus.Metric
	l, err := ledger.Compute(ctx, c.src, q)
	if err == nil {
		for _, r := range l.Rows {
			for i, s := range ledger.States {
				out = append(out, famFleetGPUSeconds.metric(r.States[i]*3600, s, r.Key))
			}
		}
	}
	var latest []store.LatestReport
	if err == nil {
		latest, err = c.src.LatestReports(ctx)
	}
	if err == nil {
		var users []prometheus.Metric
		users, latest, err = c.users(ctx, latest)
		out = append(out, users...)
	}
	if err != nil {
		c.log.Error("computing the fleet series failed", "err", err)
		c.failed, c.cached, c.latest = true, nil, nil
		return
	}
	c.failed, c.cached, c.latest = false, out, latest
}

// users are the users of the latest reports, tied as the ledger ties
// them at the report's time; the reports of nodes gone with a final
// report are left out.
func (c *FleetCollector) users(ctx context.Context, reports []store.LatestReport) ([]prometheus.Metric, []store.LatestReport, error) {
	var out []prometheus.Metric
	var kept []store.LatestReport
	seen := map[string]bool{}
	for _, l := range reports {
		if l.Report.Final {
			continue
		}
		kept = append(kept, l)
		for _, in := range l.Report.Instances {
			gi := ""
			if in.GPUInstanceID != nil {
				gi = strconv.Itoa(*in.GPUInstanceID)
			}
			for j := range in.Users {
				u := &in.Users[j]
				id := store.IdentityOf(u)
				state, taskID, project, err := ledger.Tie(ctx, c.src, l.Node, &id, l.Time, c.cfg.Namespaces)
				if err != nil {
					return nil, nil, err
				}
				labels := []string{l.Node, in.UUID, gi, u.Runtime, u.ContainerID, u.Namespace, u.Pod, u.Container, u.SlurmJob, taskID, project, state}
				key := ""
				for _, v := range labels {
					key += v + "\x1f"
				}
				if seen[key] {
					continue // two host users of one UID and cgroup on one instance: one series
				}
				seen[key] = true
				out = append(out, famGPUUserInfo.metric(1, labels...))
			}
		}
	}
	return out, kept, nil
}
