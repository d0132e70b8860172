// Package report turns stored tasks into GPU-hours, failed and idle hours,
// utilisation and cost per project (or any other grouping key) over a time
// window, as paddle-monitor's report command and GET /v1/report print them.
//
// Guarantees: no figure is made up. A completed task counts from its start
// to its end, a task without a completion up to its last heartbeat (or not
// at all without one), and only the part inside the window [From, To)
// counts. The sums are computed by the store where the data is (SQL), over
// a handful of grouped rows; this package merges those rows, applies the
// prices and the reader's scope, and writes the result. Rows come out in
// the same order from every store: GPU-hours, largest first, then the key
// in byte order.
package report

import (
	"context"
	"errors"
	"fmt"
	"strings"
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

// Query says what to report.
type Query struct {
	Window
	// By lists the grouping keys (validated by ParseKeys); empty means
	// project.
	By []string
	// Prices turns GPU-hours into cost; nil leaves cost out (null).
	Prices *Prices
	// Scope, when set, says which (project, owner) pairs the reader may
	// see; tasks outside it count nowhere, not even in the total.
	Scope func(project, owner string) bool
	// Metrics lists completion metrics (validated by ParseMetrics) whose
	// mean every row and the total show; empty leaves them out.
	Metrics []string
	// Budgets give each row of a report by project over one calendar
	// month its budget (nil: none). The forecast of the month that holds
	// Now needs a Source that is also a Running.
	Budgets *Budgets
	// Now is the clock of the forecast (time.Now when zero).
	Now time.Time
	// Namespaces charges undeclared use to projects (--namespace-projects:
	// the project of a namespace, ok false for none); nil charges none.
	Namespaces func(namespace string) (project string, ok bool)
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

// Figures are one row's (or the total's) numbers, as docs/cost.md (How
// time is counted) names them.
type Figures struct {
	Tasks               int64    `json:"tasks"`
	CompletedTasks      int64    `json:"completed_tasks"`
	FailedTasks         int64    `json:"failed_tasks"`
	GateFailedTasks     int64    `json:"gate_failed_tasks"`
	OpenTasks           int64    `json:"open_tasks"`
	GPUHours            float64  `json:"gpu_hours"`
	FailedGPUHours      float64  `json:"failed_gpu_hours"`
	IdleGPUHours        float64  `json:"idle_gpu_hours"`
	UtilMean            *float64 `json:"util_mean"`
	WasteShare          *float64 `json:"waste_share"`
	DurationEstHours    float64  `json:"duration_est_hours"`
	DurationActualHours float64  `json:"duration_actual_hours"`
	// QueueWaitMeanSeconds and QueueWaitMaxSeconds are the mean and the
	// longest start_time − submit_time over the tasks of the row with a
	// submit_time that started inside the window; null when there is none.
	QueueWaitMeanSeconds *float64 `json:"queue_wait_mean_seconds"`
	QueueWaitMaxSeconds  *float64 `json:"queue_wait_max_seconds"`
	Cost                 *float64 `json:"cost"`
	// UnpricedGPUHours are GPU-hours no price matched (they cost 0); null
	// without prices.
	UnpricedGPUHours *float64 `json:"unpriced_gpu_hours"`
	// EnergyKWh is the energy the row's completed tasks' GPUs reported,
	// clipped to the window (null when none reported any); EnergyCost
	// (not part of Cost) and CO2Kg are it × the prices file's factors
	// (null without the factor).
	EnergyKWh  *float64 `json:"energy_kwh"`
	EnergyCost *float64 `json:"energy_cost"`
	CO2Kg      *float64 `json:"co2_kg"`
	// Metrics has one entry per metric the query asked for (absent when it
	// asked for none, so that a report without metrics is unchanged).
	Metrics map[string]MetricMean `json:"metrics,omitempty"`
	// The billing columns (docs/cost.md, "Two bases"), present when a node
	// report covered some of the window (absent otherwise, so that a
	// report without node reports is unchanged): the declared figures of
	// the row's tasks and their attributed hours, whatever their basis,
	// the undeclared hours charged to the row's project, and the basis
	// GPUHours and Cost are on.
	DeclaredGPUHours   *float64 `json:"declared_gpu_hours,omitempty"`
	ObservedGPUHours   *float64 `json:"observed_gpu_hours,omitempty"`
	UndeclaredGPUHours *float64 `json:"undeclared_gpu_hours,omitempty"`
	BillingBasis       string   `json:"billing_basis,omitempty"`
}

// MetricMean is a completion metric's mean over the tasks of a row that
// reported it; Mean is null when Tasks is 0.
type MetricMean struct {
	Mean  *float64 `json:"mean"`
	Tasks int64    `json:"tasks"`
}

// Row is one group of the report.
type Row struct {
	Key map[string]string `json:"key"`
	Figures
	// Budget is the row's project budget in a report by project over one
	// calendar month with budgets; null in other reports and for rows
	// without one.
	Budget *BudgetFigures `json:"budget"`
}

// Report is the whole answer.
type Report struct {
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	By   []string  `json:"by"`
	// Metrics are the query's metrics, in the order of the CSV and table
	// columns (absent when none).
	Metrics  []string `json:"metrics,omitempty"`
	Currency *string  `json:"currency"`
	Rows     []Row    `json:"rows"`
	Total    Figures  `json:"total"`
	// Closed is set when the report is a closed month's statement
	// (absent otherwise); Adjustments list the late data of closed months
	// this month's statement counts (absent when none).
	Closed      *Closed      `json:"closed,omitempty"`
	Adjustments []Adjustment `json:"adjustments,omitempty"`
}

// Observed says a node report covered some of the report's window: the
// rows and the total have the billing columns (read back from JSON too, as
// a closed month's statement is).
func (r *Report) Observed() bool { return r.Total.BillingBasis != "" }

// rowID joins a row's key values in the order of by with a byte that no
// label value may hold, so that comparing IDs compares keys value by value
// in byte order.
func rowID(by []string, key map[string]string) string {
	var b strings.Builder
	for i, name := range by {
		if i > 0 {
			b.WriteByte(0)
		}
		b.WriteString(key[name])
	}
	return b.String()
}
