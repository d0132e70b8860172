package report

// What a month bills beside its own total (MONITOR.md 17, "Adjustments
// everywhere"; 20.13): total is the sum of the rows without adjustment_of,
// billed is total plus the late data of closed months the month carries.
// Every export of a month that carries adjustments says both.

// Billed is a month's total plus its adjustments: what the month bills.
type Billed struct {
	GPUHours float64  `json:"gpu_hours"`
	Cost     *float64 `json:"cost"`
}

// Billed returns the report's total plus its adjustments, or nil when the
// report carries none (then billed is the total).
func (r *Report) Billed() *Billed {
	if len(r.Adjustments) == 0 {
		return nil
	}
	b := &Billed{GPUHours: r.Total.GPUHours}
	var cost float64
	priced := r.Total.Cost != nil
	if priced {
		cost = *r.Total.Cost
	}
	for _, a := range r.Adjustments {
		b.GPUHours += a.GPUHours
		if a.Cost != nil {
			cost += *a.Cost
			priced = true
		}
	}
	b.GPUHours = round(b.GPUHours, 1e6)
	if priced {
		c := round(cost, 1e6)
		b.Cost = &c
	}
	return b
}

// adjustmentColumns close a CSV whose month carries adjustments: empty on
// the month's own rows, set on each adjusted task's line.
var adjustmentColumns = []string{"adjustment_of", "adjustment_reason"}

// adjustmentLines are the report CSV's lines of the late tasks of closed
// months: per adjusted task, its keys (project, and owner where the report
// groups by it; other keys are the closed month's and stay empty), its
// GPU-hours and cost, and which month it adjusts and why. head is the
// file's column names.
func (r *Report) adjustmentLines(head []string) [][]string {
	var lines [][]string
	for _, a := range r.Adjustments {
		for _, t := range a.Tasks {
			lines = append(lines, adjustedTaskRecord(head, a, t, nil))
		}
	}
	return lines
}

// adjustedTaskRecord is one adjusted task's CSV line under head, the one
// rule of every CSV that lists adjustments: the task's id, project, owner,
// GPU-hours and cost, the month it adjusts and why; fixed gives the cells
// of other columns (the chargeback's context); the rest stay empty.
func adjustedTaskRecord(head []string, a Adjustment, t AdjustedTask, fixed map[string]string) []string {
	rec := make([]string, len(head))
	for i, col := range head {
		switch col {
		case "task_id":
			rec[i] = t.TaskID
		case "project":
			rec[i] = a.Project
		case "owner":
			rec[i] = t.Owner
		case "gpu_hours":
			rec[i] = num(t.GPUHours)
		case "cost":
			if t.Cost != nil {
				rec[i] = num(*t.Cost)
			}
		case "adjustment_of":
			rec[i] = a.AdjustmentOf
		case "adjustment_reason":
			rec[i] = t.Change
		default:
			rec[i] = fixed[col]
		}
	}
	return rec
}
