package books

import (
	"context"
	"fmt"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/report"
)

// ReportAdjustments are the adjustments Report(ctx, st, q, false) lists,
// the same values, refused alike, without the report's rows: a reader of
// the late data alone (the FOCUS export's corrections) then does not pay
// for the month's report, which for an open month is computed from every
// task and node report of the month (14 % of the export's CPU at 1,000
// GPUs). A closed month's are its statement's (Report reads them from
// it); an open month's are Adjustments as q's reader may see them.
func ReportAdjustments(ctx context.Context, st Store, q report.Query) ([]report.Adjustment, error) {
	if err := q.Window.Check(); err != nil {
		return nil, err
	}
	if !q.Window.IsMonth() {
		return nil, nil
	}
	c, err := st.Statement(ctx, q.From.Format("2006-01"))
	if err != nil {
		return nil, err
	}
	if c != nil {
		r, err := Report(ctx, st, q, false)
		if err != nil {
			return nil, err
		}
		return r.Adjustments, nil
	}
	if err := checkTrimmed(ctx, st, q); err != nil {
		return nil, err
	}
	adj, err := Adjustments(ctx, st, q)
	if err != nil {
		return nil, err
	}
	if adj = forReader(adj, q); len(adj) > 0 {
		return adj, nil
	}
	return nil, nil
}

// checkTrimmed refuses q's window with a TrimmedError when it reaches
// days whose tasks retention deleted.
func checkTrimmed(ctx context.Context, st Store, q report.Query) error {
	trimmed, err := st.TrimmedBefore(ctx)
	if err != nil {
		return err
	}
	if !trimmed.IsZero() && q.From.Before(trimmed) {
		return &TrimmedError{facts.QueryError{Param: "from", Rule: fmt.Sprintf(
			"from %s: the window reaches days whose tasks were deleted by --retain (those that ended before %s); "+
				"there, ask for a whole closed month without metrics (its statement)",
			q.From.Format(time.RFC3339), trimmed.Format(time.RFC3339))}}
	}
	return nil
}
