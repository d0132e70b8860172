package monitor

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"
)

// Family is one family of the monitor's own on /metrics, declared once:
// the registry's collectors (Descs, counter vectors), the direct text
// writer (TaskText) and the documentation's test take its name, help,
// type and label names from here (docs/monitor.md lists them).
type Family struct {
	Name, Help string
	Type       prometheus.ValueType // GaugeValue or CounterValue
	// Labels are the label names in the order the collectors pass the
	// values (the text writer writes them sorted by name, as expfmt does).
	Labels []string
}

// describe sends the descriptions of fams (a collector's Describe).
func describe(ch chan<- *prometheus.Desc, fams []*Family) {
	for _, f := range fams {
		ch <- descs[f]
	}
}

// descs are the collectors' families' Descs, made once.
var descs = func() map[*Family]*prometheus.Desc {
	m := map[*Family]*prometheus.Desc{}
	for _, f := range slices.Concat(taskFamilies, projectFamilies, fleetFamilies, nodeFamilies, rollupFamilies) {
		m[f] = prometheus.NewDesc(f.Name, f.Help, f.Labels, nil)
	}
	return m
}()

// metric is a series of the family (one of the collectors'): the label
// values in the order of Labels.
func (f *Family) metric(v float64, labels ...string) prometheus.Metric {
	return prometheus.MustNewConstMetric(descs[f], f.Type, v, labels...)
}

// counterVec is the family's counter vector (a counter family's).
func (f *Family) counterVec() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: f.Name, Help: f.Help}, f.Labels)
}

// typeName is the family's type as the text format's TYPE line says it.
func (f *Family) typeName() string {
	if f.Type == prometheus.CounterValue {
		return "counter"
	}
	return "gauge"
}

// The families of the API's own counters (api.go).
var (
	famRequests = Family{"paddle_monitor_http_requests_total",
		"HTTP requests answered by paddle-monitor, by endpoint (the route's pattern) and status code.",
		prometheus.CounterValue, []string{"endpoint", "code"}}
	famStoreErrors = Family{"paddle_monitor_store_errors_total",
		"Database operations of paddle-monitor that failed, by operation.",
		prometheus.CounterValue, []string{"operation"}}
	famRequestsCancelled = Family{"paddle_monitor_requests_cancelled_total",
		"Requests whose client cancelled them or timed out while the database worked on them, by operation; not database errors.",
		prometheus.CounterValue, []string{"operation"}}
)

// The open tasks' families (TaskCollector, TaskText). project and owner
// are labels of every per-task series: tasks of scopes no one token sees
// together may share a task_id (docs/monitor.md), and two series of the
// same labels would fail the scrape.
var (
	famTaskInfo = Family{"paddle_task_info",
		"A task registered with paddle-monitor and not completed (value 1); its labels identify the task (k8s_pod_uid joins kube-state-metrics' pod series).",
		prometheus.GaugeValue, []string{"task_id", "task_name", "project", "owner", "priority", "env", "pipeline", "step", "hostname", "k8s_pod_uid"}}
	famTaskGPUInfo = Family{"paddle_task_gpu_info",
		"A GPU or MIG instance an open task runs on (value 1); a MIG instance has its parent's UUID with GPU_I_ID and GPU_I_PROFILE, as dcgm-exporter labels it. Join GPU metrics on UUID and GPU_I_ID: DCGM_FI_DEV_GPU_UTIL * on(UUID, GPU_I_ID) group_left(project, owner) paddle_task_gpu_info.",
		prometheus.GaugeValue, []string{"task_id", "project", "owner", "hostname", "UUID", "GPU_I_ID", "GPU_I_PROFILE", "gpu_model"}}
	famTaskGPUShare = Family{"paddle_task_gpu_share",
		"The fraction of the physical GPU an open task holds on this GPU (instance): 1 for a whole GPU, slices / total slices for a MIG instance, the platform's share for a time-sliced or MPS GPU.",
		prometheus.GaugeValue, taskGPULabels}
	famTaskGPUUtil = Family{"paddle_task_gpu_utilization_percent",
		"Mean utilisation (percent) of a GPU an open task runs on, over the interval of the task's latest heartbeat with samples.",
		prometheus.GaugeValue, taskGPULabels}
	famTaskIdle = Family{"paddle_task_idle_seconds",
		"How long every sampled GPU of an open task has been below 1 % (last heartbeat minus idle_since); 0 while busy. Absent for a task not heard from for three heartbeat intervals (lost, not idle).",
		prometheus.GaugeValue, []string{"task_id", "task_name", "project", "owner", "hostname"}}
	famTaskStart = Family{"paddle_task_start_time_seconds",
		"When an open task started (Unix seconds, its registration's start_time).",
		prometheus.GaugeValue, taskIdentityLabels}
	famTaskEstimate = Family{"paddle_task_duration_estimate_seconds",
		"How long an open task said it would run (its registration's duration_est).",
		prometheus.GaugeValue, taskIdentityLabels}
	famTaskScrapeError = Family{"paddle_monitor_task_scrape_error",
		"1 if reading the open tasks from the database failed during this scrape (paddle_task_* series are then missing), else 0.",
		prometheus.GaugeValue, nil}
)

var (
	taskGPULabels      = []string{"task_id", "project", "owner", "UUID", "GPU_I_ID"}
	taskIdentityLabels = []string{"task_id", "project", "owner"}
)

// The projects' month families (ProjectCollector).
var (
	famProjectGPUSeconds = Family{"paddle_project_month_gpu_seconds",
		"GPU-seconds a project used in the current UTC month, as the report counts them (computed at most once a minute).",
		prometheus.GaugeValue, []string{"project"}}
	famProjectCost = Family{"paddle_project_month_cost",
		"What a project's GPUs cost in the current UTC month, in the prices file's currency (computed at most once a minute).",
		prometheus.GaugeValue, []string{"project"}}
	famBudgetGPUSeconds = Family{"paddle_project_budget_gpu_seconds",
		"A project's monthly GPU budget (monthly_gpu_hours of the budgets file, in GPU-seconds).",
		prometheus.GaugeValue, []string{"project"}}
	famBudgetCost = Family{"paddle_project_budget_cost",
		"A project's monthly cost budget (monthly_cost of the budgets file, in its currency).",
		prometheus.GaugeValue, []string{"project"}}
	famProjectScrapeError = Family{"paddle_monitor_project_scrape_error",
		"1 if computing the project month series failed the last time (paddle_project_* series are then missing), else 0.",
		prometheus.GaugeValue, nil}
)

// The fleet's families, from the node agents' reports (FleetCollector).
var (
	famFleetGPUSeconds = Family{"paddle_fleet_gpu_seconds",
		"GPU-seconds of the fleet's capacity in the current UTC month, by ledger state (attributed, undeclared, unattributed, unallocated, unobserved) and GPU model, as the ledger counts them (computed at most once a minute).",
		prometheus.GaugeValue, []string{"state", "gpu_model"}}
	famGPUUserInfo = Family{"paddle_gpu_user_info",
		"A user of a GPU instance in its node's latest report (value 1): the parent's UUID and GPU_I_ID as dcgm-exporter labels them, who the user is, and its ledger state (attributed, with its task and project; undeclared, with its namespace's project; unattributed).",
		prometheus.GaugeValue, []string{"node", "UUID", "GPU_I_ID", "runtime", "container_id", "namespace", "pod", "container", "slurm_job", "task_id", "project", "state"}}
	famNodeReportAge = Family{"paddle_node_report_age_seconds",
		"Seconds since the end of a node's latest report (nodes not retired, whose last report was not final, within --node-retire).",
		prometheus.GaugeValue, []string{"node"}}
	famFleetScrapeError = Family{"paddle_monitor_fleet_scrape_error",
		"1 if computing the fleet series failed the last time (the month's ledger, or reading the nodes' latest reports; those series are then missing or partial), else 0.",
		prometheus.GaugeValue, nil}
)

// The roll-ups' family (RollupCollector): the buckets the write paths
// wrote, so that what a late report re-rolls is seen.
var famRollupBuckets = Family{"paddle_monitor_rollup_buckets_written_total",
	"Buckets of the ledger's roll-ups (a row per GPU, or per GPU instance and user) written by this process's node-report write path, by grain: hour, day or month.",
	prometheus.CounterValue, []string{"grain"}}

// rollupFamilies are the roll-up collector's families.
var rollupFamilies = []*Family{&famRollupBuckets}

// taskFamilies are the task collector's families by name (the order of
// the exposition).
var taskFamilies = byName(&famTaskScrapeError, &famTaskEstimate, &famTaskGPUInfo, &famTaskGPUShare,
	&famTaskGPUUtil, &famTaskIdle, &famTaskInfo, &famTaskStart)

// projectFamilies are the project collector's families, in the order it
// describes them.
var projectFamilies = []*Family{&famProjectGPUSeconds, &famProjectCost, &famBudgetGPUSeconds, &famBudgetCost, &famProjectScrapeError}

// fleetFamilies are the fleet collector's families, in the order it
// describes them.
var fleetFamilies = []*Family{&famFleetGPUSeconds, &famGPUUserInfo, &famNodeReportAge, &famFleetScrapeError}

// Families returns every family of the monitor's own (not the Go and
// process collectors'), by name: copies, the declarations stay as they
// are.
func Families() []Family {
	var out []Family
	for _, f := range byName(slices.Concat([]*Family{&famRequests, &famStoreErrors, &famRequestsCancelled}, taskFamilies, projectFamilies, fleetFamilies, nodeFamilies, rollupFamilies)...) {
		c := *f
		c.Labels = slices.Clone(f.Labels)
		out = append(out, c)
	}
	return out
}

func byName(fs ...*Family) []*Family {
	return slices.SortedFunc(slices.Values(fs), func(a, b *Family) int { return cmpStrings(a.Name, b.Name) })
}
