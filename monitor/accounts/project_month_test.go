package accounts_test

import (
	"testing"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/accounts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// ProjectMonth (/metrics' project month series and the budget alerts) is
// November by project as the report answers it, budgets included, its
// adjustments left out (MONITOR.md 20.13). By hand: search's November is
// ann's 1.5 h at 2 EUR = 3 EUR, 1.5 of its 10 budgeted GPU-hours (0.15);
// bob's late hour of October (+1 GPU-hour, +2 EUR), which the report of
// November carries as an adjustment, is in neither.
func TestProjectMonthWithoutAdjustments(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		_, acc := fleet(t, dsn)
		rep, err := acc.Report(ctx, accounts.Request{Window: facts.Month(now), By: []string{"project"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Adjustments) != 1 || rep.Adjustments[0].AdjustmentOf != "2026-10" {
			t.Fatalf("the report of November carries %+v, want October's late task: the fixture is not what the test says", rep.Adjustments)
		}
		m, err := acc.ProjectMonth(ctx, now)
		if err != nil {
			t.Fatal(err)
		}
		if m.Adjustments != nil {
			t.Errorf("ProjectMonth carries adjustments %+v, want none (20.13)", m.Adjustments)
		}
		if len(m.Rows) != 1 || m.Rows[0].Key["project"] != "search" {
			t.Fatalf("ProjectMonth rows %+v, want search's alone", m.Rows)
		}
		r := m.Rows[0]
		if r.GPUHours != 1.5 || r.Cost == nil || *r.Cost != 3 || m.Total.GPUHours != 1.5 {
			t.Errorf("search's month: %v GPU-hours, cost %v, total %v; want 1.5, 3 EUR, 1.5", r.GPUHours, ptrString(r.Cost), m.Total.GPUHours)
		}
		b := r.Budget
		if b == nil || b.Kind != "gpu_hours" || b.Limit != 10 || b.Used != 1.5 || b.UsedShare == nil || *b.UsedShare != 0.15 {
			t.Errorf("search's budget %+v, want gpu_hours 1.5 of 10 (0.15): the page's and the report's", b)
		}
	})
}
