package monitor

import (
	"slices"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
)

// Tasks that can never end on their own. An exec-mode task replaces the
// entrypoint with its command: nothing is left to send a heartbeat or a
// completion, so the monitor cannot tell a task still running from one
// that ended long ago. Such a task (no heartbeat since its start, no
// completion) reads "no end reported" rather than running, and leaves
// /metrics once DefaultExecTTL (--exec-ttl) has passed since its start,
// unless a heartbeat shows it alive (a node report that ties one of its
// node's users to it moves last_seen too). Supervise mode and the node agent
// report the end (docs/supervise.md).

// DefaultExecTTL is how long after its start a task that reported
// nothing since stays on /metrics.
const DefaultExecTTL = 24 * time.Hour

// NoEndReported says t has sent nothing since its registration: no
// heartbeat, no GPU samples (exec mode, or heartbeats off).
func NoEndReported(t store.OpenTask) bool {
	return t.LastSeen <= t.StartTime && !t.Sampled
}

// WithExecTTL makes the collector leave out the tasks that reported
// nothing since their start (NoEndReported) once ttl has passed since
// that start (0: DefaultExecTTL); it returns c.
func (c *TaskCollector) WithExecTTL(ttl time.Duration) *TaskCollector {
	if ttl <= 0 {
		ttl = DefaultExecTTL
	}
	c.execTTL = ttl
	return c
}

// alive drops from tasks those past the exec TTL (none when it is 0).
func alive(tasks []store.OpenTask, execTTL time.Duration, now time.Time) []store.OpenTask {
	if execTTL <= 0 {
		return tasks
	}
	cut := now.Add(-execTTL).Unix()
	return slices.DeleteFunc(tasks, func(t store.OpenTask) bool { return NoEndReported(t) && t.StartTime < cut })
}
