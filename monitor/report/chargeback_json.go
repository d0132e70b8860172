package report

import (
	"encoding/json"
	"io"
	"time"
)

// The chargeback statement as JSON (report --by task --format json): the
// CSV's lines as objects, with the file's context once at the top.

// chargebackJSON is the document WriteChargebackJSON writes.
type chargebackJSON struct {
	From     time.Time `json:"window_from"`
	To       time.Time `json:"window_to"`
	Currency *string   `json:"currency"`
	// StatementSHA256 is the closed month's statement hash, null while
	// the month is open.
	StatementSHA256 *string          `json:"statement_sha256"`
	Lines           []chargebackLine `json:"lines"`
	// Adjustments are the late data of closed months the window carries,
	// each task listed (absent when none).
	Adjustments []Adjustment `json:"adjustments,omitempty"`
}

type chargebackLine struct {
	TaskID       string            `json:"task_id"`
	TaskName     string            `json:"task_name"`
	Project      string            `json:"project"`
	Owner        string            `json:"owner"`
	Labels       map[string]string `json:"labels"`
	Namespace    *string           `json:"namespace"`
	Start        time.Time         `json:"start"`
	End          *time.Time        `json:"end"`
	GPUs         string            `json:"gpus"`
	GPUHours     float64           `json:"gpu_hours"`
	PricePerHour *float64          `json:"price_per_hour"`
	Cost         *float64          `json:"cost"`
	EnergyKWh    *float64          `json:"energy_kwh"`
	BillingBasis string            `json:"billing_basis"`
}

// WriteChargebackJSON writes the statement as one JSON object: the window,
// currency and statement hash, and its lines in the CSV's order with the
// CSV's figures (end null for a task without a completion; namespace set on
// a line of undeclared use).
func WriteChargebackJSON(w io.Writer, st *Statement) error {
	doc := chargebackJSON{From: st.From.UTC(), To: st.To.UTC(), Currency: st.Currency, Lines: []chargebackLine{}, Adjustments: st.Adjustments}
	if st.SHA256 != "" {
		h := st.SHA256
		doc.StatementSHA256 = &h
	}
	for _, l := range st.Lines {
		line := chargebackLine{TaskID: l.TaskID, TaskName: l.Name, Project: l.Project, Owner: l.Owner, Labels: l.Labels,
			Start: time.Unix(l.Start, 0).UTC(), GPUs: gpusText(l), GPUHours: l.GPUHours, PricePerHour: l.PricePerHour,
			Cost: l.Cost, EnergyKWh: l.EnergyKWh, BillingBasis: l.Basis}
		if line.Labels == nil {
			line.Labels = map[string]string{}
		}
		switch {
		case l.Namespace != "":
			ns := l.Namespace
			line.Namespace = &ns
			end := st.To.UTC()
			line.End = &end
		case l.End != nil:
			end := time.Unix(*l.End, 0).UTC()
			line.End = &end
		}
		doc.Lines = append(doc.Lines, line)
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// LineGPUs is a line's GPUs as the CSV's gpus column says them.
func LineGPUs(l StatementLine) string { return gpusText(l) }
