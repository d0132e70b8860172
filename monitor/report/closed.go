package report

import "time"

// Closed marks a report served from a closed month's statement (the books
// package): the figures are the statement's, byte for byte, whatever was
// stored since.
type Closed struct {
	Month    string    `json:"month"`
	Version  int       `json:"version"`
	ClosedAt time.Time `json:"closed_at"`
}

// Adjustment is late data of a closed month, counted in a later month's
// statement: per project, the GPU-hours and cost the closed month's tasks
// gained (or lost) after it closed, and those tasks.
type Adjustment struct {
	AdjustmentOf string         `json:"adjustment_of"`
	Project      string         `json:"project"`
	GPUHours     float64        `json:"gpu_hours"`
	Cost         *float64       `json:"cost"`
	Tasks        []AdjustedTask `json:"tasks"`
}

// AdjustedTask is one task of an Adjustment: its change of the closed
// month's figures and why (late_registration, completed_after_close,
// seen_after_close).
type AdjustedTask struct {
	TaskID   string   `json:"task_id"`
	Owner    string   `json:"owner"`
	Change   string   `json:"change"`
	GPUHours float64  `json:"gpu_hours"`
	Cost     *float64 `json:"cost"`
}
