// Package facts holds the shapes of the stored facts the read side reads,
// and the window they are read over: the grouped sums a report merges
// (TaskSums, GPUSums, MetricSums), the tasks a statement and a forecast
// list (TaskUsage, RunningTask), the node reports' observed use
// (Observations), the Window and the parsers of a reader's window, keys and
// metrics, and the error every refused parameter is (ErrBadQuery).
//
// Guarantees: it is the one vocabulary between the store, which fills these
// rows, and the calculations (report, ledger, books, focus, the API), which
// read them; it imports no package of the module but internal/wire (the name
// rule), so the store never depends on a calculation. Its parsers refuse
// with a *QueryError that is ErrBadQuery, naming the parameter as the caller
// spelled it. A Window is half-open, [From, To), and Month's are calendar
// months in UTC.
package facts

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Keys are the grouping keys a report accepts, in the order the
// documentation lists them. node is the node a task ran on (its
// k8s_node, else its host name; use observed by a node report, the node
// that reported it, as the ledger keys it).
var Keys = []string{"project", "owner", "priority", "env", "pipeline", "step", "task_name", "hostname", "node", "model"}

// ErrBadQuery classifies every error about a report's parameters (dates,
// keys, window), so that an HTTP handler can answer 400 for it. Each such
// error is a *QueryError (errors.As) that is ErrBadQuery (errors.Is).
var ErrBadQuery = errors.New("bad report query")

// QueryError is a report parameter refused: Param is the parameter's name
// as the caller spelled it ("from", "--from", "by", "metric"; "" for the
// window as a whole) and Rule the sentence that says what is wrong,
// beginning with the parameter's name, as a caller shows it after its
// own prefix ("parameter " on HTTP).
type QueryError struct{ Param, Rule string }

func (e *QueryError) Error() string { return ErrBadQuery.Error() + ": " + e.Rule }

// Unwrap makes every QueryError ErrBadQuery for errors.Is.
func (e *QueryError) Unwrap() error { return ErrBadQuery }

// badQuery is the QueryError of param with the rule formatted from format
// and args.
func badQuery(param, format string, args ...any) *QueryError {
	return &QueryError{Param: param, Rule: fmt.Sprintf(format, args...)}
}

// Window is the half-open interval [From, To) a report counts.
type Window struct {
	From, To time.Time
}

// IsMonth reports whether the window is exactly one calendar month (UTC).
func (w Window) IsMonth() bool {
	m := Month(w.From)
	return m.From.Equal(w.From) && m.To.Equal(w.To)
}

// TaskSums are the task-level sums of one group: every column of Key is a
// grouping value (the query's keys plus project and owner).
type TaskSums struct {
	Key       map[string]string
	Tasks     int64 // counted intervals overlapping the window
	Completed int64 // with a completion
	Failed    int64 // completed with a non-zero exit status or a failed gate
	// GateFailed are the completed tasks whose quality gate failed (some
	// of Failed, whatever their exit status).
	GateFailed int64
	Open       int64 // without a completion
	// EstSeconds and ActualSeconds sum the whole duration_est and
	// duration_seconds of completed tasks with an estimate whose end is
	// inside the window.
	EstSeconds    int64
	ActualSeconds float64
	// QueueWaitSeconds sums start_time − submit_time over the tasks with a
	// submit_time whose start is inside the window (QueueWaitTasks of
	// them); QueueWaitMax is the longest of those waits (0 when none).
	QueueWaitSeconds, QueueWaitTasks, QueueWaitMax int64
	// UnlistedGPUSeconds is Σ GPUs counted but not listed (device nodes:
	// share 1, no model) × seconds counted in the window, and
	// FailedUnlistedGPUSeconds the same for failed tasks. The listed GPUs'
	// are in GPUSums. (Meaningless in groups by model, where a task is in
	// the group of each of its models: the report takes them from the sums
	// without model.)
	UnlistedGPUSeconds, FailedUnlistedGPUSeconds int64
}

// Add adds t's sums to s (QueueWaitMax the larger), its key aside: the
// one place a group's task sums are added, whoever groups them.
func (s *TaskSums) Add(t TaskSums) {
	s.Tasks += t.Tasks
	s.Completed += t.Completed
	s.Failed += t.Failed
	s.GateFailed += t.GateFailed
	s.Open += t.Open
	s.EstSeconds += t.EstSeconds
	s.ActualSeconds += t.ActualSeconds
	s.QueueWaitSeconds += t.QueueWaitSeconds
	s.QueueWaitTasks += t.QueueWaitTasks
	s.QueueWaitMax = max(s.QueueWaitMax, t.QueueWaitMax)
	s.UnlistedGPUSeconds += t.UnlistedGPUSeconds
	s.FailedUnlistedGPUSeconds += t.FailedUnlistedGPUSeconds
}

// GPUSums are the sums over the GPUs the tasks listed (registration's
// gpus), for one group: the query's keys plus project, owner and model,
// and apart by MIG profile (whole GPUs, and MIG instances of each
// profile, which are priced differently). GPUs counted but not listed
// (device nodes) are not in them: they are TaskSums' unlisted GPUs, and
// take the model "" (the default price). Every GPU's seconds are weighted
// by its share (the fraction of the physical GPU the task held).
type GPUSums struct {
	Key map[string]string
	// MIG says these are MIG instances, of Profile ("1g.18gb"; "" for
	// whole GPUs and for instances whose profile was not reported).
	MIG     bool
	Profile string
	// InstanceSeconds is Σ seconds counted in the window, unweighted: the
	// instance-hours a profile price applies to.
	InstanceSeconds  int64
	GPUSeconds       float64 // Σ share × seconds counted in the window
	FailedGPUSeconds float64 // the same for failed tasks
	IdleGPUSeconds   float64 // Σ per GPU of share × seconds × idle_share
	// IdleOKGPUSeconds is IdleGPUSeconds over tasks that did not fail
	// (waste_share counts a failed task's hours once, as failed).
	IdleOKGPUSeconds float64
	UtilWeighted     float64 // Σ per sampled GPU of share × seconds × util_mean
	UtilSeconds      float64 // Σ per sampled GPU of share × seconds
	// EnergyJoules is Σ over the GPUs of completed tasks that reported
	// energy_joules of it, each × the part of the task's end_time −
	// start_time inside the window; EnergyGPUs counts those GPUs (0: no
	// energy reported, energy_kwh is null).
	EnergyJoules float64
	EnergyGPUs   int64
}

// Add adds g's sums to s, its key, MIG and profile aside.
func (s *GPUSums) Add(g GPUSums) {
	s.InstanceSeconds += g.InstanceSeconds
	s.GPUSeconds += g.GPUSeconds
	s.FailedGPUSeconds += g.FailedGPUSeconds
	s.IdleGPUSeconds += g.IdleGPUSeconds
	s.IdleOKGPUSeconds += g.IdleOKGPUSeconds
	s.UtilWeighted += g.UtilWeighted
	s.UtilSeconds += g.UtilSeconds
	s.EnergyJoules += g.EnergyJoules
	s.EnergyGPUs += g.EnergyGPUs
}

// MetricSums are one group's sums of one completion metric over the
// completed tasks whose end is inside the window and whose completion
// reported the metric as a number (the tasks duration_est_hours counts,
// less the estimate): Sum of the values and the number of Tasks.
type MetricSums struct {
	Key   map[string]string
	Sum   float64
	Tasks int64
}

// Source is what a report needs from a store. Its sums count the window's
// part of every task as the package comment says; they are grouped, never
// every task.
type Source interface {
	// ReportSums computes a report's task and GPU sums (Sums) grouped by
	// keys, and by project and owner too when scoped (the reader's scope
	// is applied on those; unscoped, the reader sees every task).
	ReportSums(ctx context.Context, w Window, keys []string, scoped bool) (Sums, error)
	// ReportMetric sums the completion metric named metric (a key of the
	// completion's metrics object, dots and all) as MetricSums says,
	// grouped by keys, project and owner.
	ReportMetric(ctx context.Context, w Window, keys []string, metric string) ([]MetricSums, error)
}

// Sums are a report's task and GPU sums as ReportSums computes them:
// Tasks (TaskSums) and GPUs (GPUSums, by model too) grouped by the keys
// (several entries may share a key: the report adds them up), and, when
// the keys hold model, Base: the task sums by the keys without model,
// each task once (the total, and the GPUs counted without being listed).
// By model, a task counts in Tasks once under every model it has GPUs of
// (the empty model for GPUs without one, and for no GPU at all).
type Sums struct {
	Tasks []TaskSums
	GPUs  []GPUSums
	Base  []TaskSums
}
