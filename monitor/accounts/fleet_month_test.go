package accounts_test

import (
	"reflect"
	"testing"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/ledger"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// FleetMonth (/metrics' fleet month series) is the ledger by model the
// page's Fleet section shows for the month, prices included. By hand: n1's
// Tesla T4 is known from its first report's start, Nov 20 10:00, to now,
// 12:00: 2 GPU-hours of capacity, 4 EUR; its report covers 10:00–11:00 and
// nobody used it (1 h unallocated, 2 EUR), 11:00–12:00 no report covers
// (1 h unobserved, 2 EUR). The tasks' GPUs are on no reporting node.
func TestFleetMonthWithPrices(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		_, acc := fleet(t, dsn)
		l, err := acc.FleetMonth(ctx, now)
		if err != nil {
			t.Fatal(err)
		}
		page, _, err := acc.Fleet(ctx, facts.Month(now), nil, now)
		if err != nil {
			t.Fatal(err)
		}
		if l.Currency != "EUR" || len(l.Rows) != 1 || l.Rows[0].Key != "Tesla T4" {
			t.Fatalf("FleetMonth: currency %q, rows %+v; want EUR, Tesla T4's row", l.Currency, l.Rows)
		}
		want := map[string][2]float64{ledger.Attributed: {0, 0}, ledger.Undeclared: {0, 0}, ledger.Unattributed: {0, 0},
			ledger.Unallocated: {1, 2}, ledger.Unobserved: {1, 2}}
		for _, f := range []struct {
			name string
			fig  ledger.Figures
		}{{"Tesla T4", l.Rows[0].Figures}, {"total", l.Total}} {
			if f.fig.Capacity == nil || *f.fig.Capacity != 2 || f.fig.CapacityCost == nil || *f.fig.CapacityCost != 4 {
				t.Errorf("%s: capacity %s GPU-hours, %s EUR; want 2, 4", f.name, ptrString(f.fig.Capacity), ptrString(f.fig.CapacityCost))
			}
			for i, state := range ledger.States {
				if h, c := f.fig.States[i], f.fig.StateCosts[i]; h != want[state][0] || c == nil || *c != want[state][1] {
					t.Errorf("%s: %s %v GPU-hours, %s EUR; want %v, %v", f.name, state, h, ptrString(c), want[state][0], want[state][1])
				}
			}
		}
		if page == nil || !reflect.DeepEqual(page.Rows, l.Rows) || !reflect.DeepEqual(page.Total, l.Total) {
			t.Errorf("FleetMonth's figures differ from the Fleet section's")
		}
	})
}
