package monitor

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
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
	execTTL time.Duration // 0: tasks that reported nothing stay (WithExecTTL)
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

// Describe implements prometheus.Collector: the families of taskFamilies.
func (c *TaskCollector) Describe(ch chan<- *prometheus.Desc) {
	describe(ch, taskFamilies)
}

// Collect implements prometheus.Collector.
func (c *TaskCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	tasks, err := c.src.OpenTasks(ctx, c.now().Add(-c.ttl).Unix(), 0)
	if err != nil {
		ch <- famTaskScrapeError.metric(1)
		return
	}
	tasks = alive(tasks, c.execTTL, c.now())
	ch <- famTaskScrapeError.metric(0)

	// Tasks under one task_id differ in project or owner (the store's
	// identity), so their series differ too.
	type series struct{ taskID, project, owner, uuid, gi string }
	served := map[series]bool{}
	now := c.now().Unix()
	for _, t := range tasks {
		ch <- famTaskInfo.metric(1,
			t.TaskID, t.TaskName, t.Project, t.Owner, t.Priority, t.Env, t.Pipeline, t.Step, t.Hostname, t.K8sPodUID)
		ch <- famTaskStart.metric(float64(t.StartTime), t.TaskID, t.Project, t.Owner)
		if t.DurationEst != nil {
			ch <- famTaskEstimate.metric(float64(*t.DurationEst), t.TaskID, t.Project, t.Owner)
		}
		if t.Sampled && !lost(t, now) {
			ch <- famTaskIdle.metric(idleSeconds(&t),
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
			ch <- famTaskGPUInfo.metric(1,
				t.TaskID, t.Project, t.Owner, t.Hostname, g.UUID, gi, g.Profile, g.Model)
			// With project and owner, another scope's task under the
			// same id on the same GPU cannot set this task's share.
			ch <- famTaskGPUShare.metric(g.Share, t.TaskID, t.Project, t.Owner, g.UUID, gi)
			if g.LatestUtilMean != nil {
				ch <- famTaskGPUUtil.metric(*g.LatestUtilMean,
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

// idleSeconds is paddle_task_idle_seconds of a task with GPU samples:
// last_seen − idle_since while idle, 0 while busy.
func idleSeconds(t *store.OpenTask) float64 {
	if t.IdleSince == nil {
		return 0
	}
	return float64(max(t.LastSeen-*t.IdleSince, 0))
}
