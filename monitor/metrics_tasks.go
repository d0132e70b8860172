package monitor

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paddle-entrypoint/paddle-entrypoint/store"
)

// OpenTasks is what the task collector and the page need from the store.
type OpenTasks interface {
	OpenTasks(ctx context.Context, seenSince int64, limit int) ([]store.OpenTask, error)
}

// TaskCollector exposes the open tasks on /metrics, read from the store at
// every scrape (so a task leaves the exposition as soon as it completes):
// paddle_task_info per task and paddle_task_gpu_info per claimed GPU, with
// UUID spelled as dcgm-exporter spells it, the key of the PromQL join.
//
// One GPU instance runs one task: the store ends an older claim when a
// newer task registers the same GPU (instance) (a completion that never
// came), except across token scopes while the older task is live (seen
// within --claim-grace): then both claims are served, and the recording
// rules reduce them to one series per (UUID, GPU_I_ID). Seven tasks on
// seven MIG instances of one GPU, or four time-sliced tasks on one GPU,
// all keep theirs. A MIG series carries the parent's UUID with GPU_I_ID and
// GPU_I_PROFILE, as dcgm-exporter labels it; a whole GPU's are empty. Open tasks not seen
// (start or heartbeat) for TTL leave /metrics; they stay in the store. A
// store that fails is reported as paddle_monitor_task_scrape_error 1 rather
// than failing the whole scrape.
//
// The monitor's /metrics does not gather it: API.ServeTasks writes the same
// bytes directly (TaskText); Collect serves registries (tests, protobuf
// scrapes).
type TaskCollector struct {
	src     OpenTasks
	ttl     time.Duration
	now     func() time.Time
	timeout time.Duration
}

// NewTaskCollector returns the collector of src's open tasks. now is the
// clock (time.Now when nil).
func NewTaskCollector(src OpenTasks, ttl time.Duration, now func() time.Time) *TaskCollector {
	if now == nil {
		now = time.Now
	}
	return &TaskCollector{src: src, ttl: ttl, now: now, timeout: 10 * time.Second}
}

var (
	taskInfoDesc = prometheus.NewDesc("paddle_task_info", helpTaskInfo,
		taskInfoLabels, nil)
	taskGPUInfoDesc = prometheus.NewDesc("paddle_task_gpu_info", helpTaskGPUInfo,
		taskGPUInfoLabels, nil)
	taskGPUShareDesc = prometheus.NewDesc("paddle_task_gpu_share", helpTaskGPUShare,
		taskGPULabels, nil)
	taskGPUUtilDesc = prometheus.NewDesc("paddle_task_gpu_utilization_percent", helpTaskGPUUtil,
		taskGPULabels, nil)
	taskIdleDesc = prometheus.NewDesc("paddle_task_idle_seconds", helpTaskIdle,
		taskIdleLabels, nil)
	taskStartDesc = prometheus.NewDesc("paddle_task_start_time_seconds", helpTaskStart,
		taskIdentityLabels, nil)
	taskEstimateDesc = prometheus.NewDesc("paddle_task_duration_estimate_seconds", helpTaskEstimate,
		taskIdentityLabels, nil)
	taskScrapeErrorDesc = prometheus.NewDesc("paddle_monitor_task_scrape_error", helpTaskScrapeError,
		nil, nil)
)

// The families' help and label names, shared by the collector's Descs and
// the text writer (metrics_text.go).
const (
	helpTaskInfo        = "A task registered with paddle-monitor and not completed (value 1); its labels identify the task (k8s_pod_uid joins kube-state-metrics' pod series)."
	helpTaskGPUInfo     = "A GPU or MIG instance an open task runs on (value 1); a MIG instance has its parent's UUID with GPU_I_ID and GPU_I_PROFILE, as dcgm-exporter labels it. Join GPU metrics on UUID and GPU_I_ID: DCGM_FI_DEV_GPU_UTIL * on(UUID, GPU_I_ID) group_left(project, owner) paddle_task_gpu_info."
	helpTaskGPUShare    = "The fraction of the physical GPU an open task holds on this GPU (instance): 1 for a whole GPU, slices / total slices for a MIG instance, the platform's share for a time-sliced or MPS GPU."
	helpTaskGPUUtil     = "Mean utilisation (percent) of a GPU an open task runs on, over the interval of the task's latest heartbeat with samples."
	helpTaskIdle        = "How long every sampled GPU of an open task has been below 1 % (last heartbeat minus idle_since); 0 while busy. Absent for a task not heard from for three heartbeat intervals (lost, not idle)."
	helpTaskStart       = "When an open task started (Unix seconds, its registration's start_time)."
	helpTaskEstimate    = "How long an open task said it would run (its registration's duration_est)."
	helpTaskScrapeError = "1 if reading the open tasks from the database failed during this scrape (paddle_task_* series are then missing), else 0."
)

var (
	taskInfoLabels    = []string{"task_id", "task_name", "project", "owner", "priority", "env", "pipeline", "step", "hostname", "k8s_pod_uid"}
	taskGPUInfoLabels = []string{"task_id", "project", "owner", "hostname", "UUID", "GPU_I_ID", "GPU_I_PROFILE", "gpu_model"}
	taskGPULabels     = []string{"task_id", "project", "owner", "UUID", "GPU_I_ID"}
	taskIdleLabels    = []string{"task_id", "task_name", "project", "owner", "hostname"}
	// project and owner are labels of every per-task series: tasks of
	// scopes no one token sees together may share a task_id (MONITOR.md
	// 11), and two series of the same labels would fail the scrape.
	taskIdentityLabels = []string{"task_id", "project", "owner"}
)

// Describe implements prometheus.Collector.
func (c *TaskCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- taskInfoDesc
	ch <- taskGPUInfoDesc
	ch <- taskGPUShareDesc
	ch <- taskGPUUtilDesc
	ch <- taskIdleDesc
	ch <- taskStartDesc
	ch <- taskEstimateDesc
	ch <- taskScrapeErrorDesc
}

// Collect implements prometheus.Collector.
func (c *TaskCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	tasks, err := c.src.OpenTasks(ctx, c.now().Add(-c.ttl).Unix(), 0)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(taskScrapeErrorDesc, prometheus.GaugeValue, 1)
		return
	}
	ch <- prometheus.MustNewConstMetric(taskScrapeErrorDesc, prometheus.GaugeValue, 0)

	// Tasks under one task_id differ in project or owner (the store's
	// identity), so their series differ too.
	type series struct{ taskID, project, owner, uuid, gi string }
	served := map[series]bool{}
	now := c.now().Unix()
	for _, t := range tasks {
		ch <- prometheus.MustNewConstMetric(taskInfoDesc, prometheus.GaugeValue, 1,
			t.TaskID, t.TaskName, t.Project, t.Owner, t.Priority, t.Env, t.Pipeline, t.Step, t.Hostname, t.K8sPodUID)
		ch <- prometheus.MustNewConstMetric(taskStartDesc, prometheus.GaugeValue, float64(t.StartTime), t.TaskID, t.Project, t.Owner)
		if t.DurationEst != nil {
			ch <- prometheus.MustNewConstMetric(taskEstimateDesc, prometheus.GaugeValue, float64(*t.DurationEst), t.TaskID, t.Project, t.Owner)
		}
		if t.Sampled && !lost(t, now) {
			idle := 0.0
			if t.IdleSince != nil {
				idle = float64(max(t.LastSeen-*t.IdleSince, 0))
			}
			ch <- prometheus.MustNewConstMetric(taskIdleDesc, prometheus.GaugeValue, idle,
				t.TaskID, t.TaskName, t.Project, t.Owner, t.Hostname)
		}
		for _, g := range t.GPUs {
			gi := ""
			if g.GPUInstanceID != nil {
				gi = strconv.FormatInt(*g.GPUInstanceID, 10)
			}
			k := series{t.TaskID, t.Project, t.Owner, g.UUID, gi}
			if served[k] {
				continue // a GPU (instance) listed twice by one task: one series
			}
			served[k] = true
			ch <- prometheus.MustNewConstMetric(taskGPUInfoDesc, prometheus.GaugeValue, 1,
				t.TaskID, t.Project, t.Owner, t.Hostname, g.UUID, gi, g.Profile, g.Model)
			// With project and owner, another scope's task under the
			// same id on the same GPU cannot set this task's share.
			ch <- prometheus.MustNewConstMetric(taskGPUShareDesc, prometheus.GaugeValue, g.Share, t.TaskID, t.Project, t.Owner, g.UUID, gi)
			if g.LatestUtilMean != nil {
				ch <- prometheus.MustNewConstMetric(taskGPUUtilDesc, prometheus.GaugeValue, *g.LatestUtilMean,
					t.TaskID, t.Project, t.Owner, g.UUID, gi)
			}
		}
	}
}

// lost says whether a task has not been heard from for three of its
// heartbeat intervals: it is then neither idle nor busy, and leaves
// paddle_task_idle_seconds. Without a known interval only --open-ttl
// applies.
func lost(t store.OpenTask, now int64) bool {
	return t.Interval != nil && *t.Interval > 0 && now-t.LastSeen > 3**t.Interval
}
