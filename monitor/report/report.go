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
	"fmt"
	"strings"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
)

// Query says what to report.
type Query struct {
	facts.Window
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

// badQuery is the QueryError of param with the rule formatted from format
// and args (the facts package's parsers make theirs the same way).
func badQuery(param, format string, args ...any) *facts.QueryError {
	return &facts.QueryError{Param: param, Rule: fmt.Sprintf(format, args...)}
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
