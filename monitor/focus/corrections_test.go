package focus

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/books"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/ledger"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/report"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

// The corrections of November's export charge October's late undeclared
// use by namespace, as the report of November lists it (9a0e765): October
// closed on Nov 1 with testdata's mapping (team-c → c) and prices (a
// Tesla T4 at 2 EUR an hour), then node n1's report of Oct 30
// 10:00–11:00 arrived, its Tesla T4 held all the hour by an unregistered
// pod of namespace team-c. By hand: one correction row, project c, 1
// GPU-hour, 2 EUR, observed, on October's last day (a change naming no
// task), billed in November.
func TestCorrectionsChargeUndeclaredUseByNamespace(t *testing.T) {
	ctx := context.Background()
	day := func(month time.Month, d, hour int) time.Time {
		return time.Date(2026, month, d, hour, 0, 0, 0, time.UTC)
	}
	now := day(11, 20, 12)
	pj, err := os.ReadFile(filepath.Join("testdata", "prices.json"))
	if err != nil {
		t.Fatal(err)
	}
	nj, err := os.ReadFile(filepath.Join("testdata", "namespaces.json"))
	if err != nil {
		t.Fatal(err)
	}
	prices, err := report.LoadPrices(filepath.Join("testdata", "prices.json"))
	if err != nil {
		t.Fatal(err)
	}
	ns, err := ledger.ParseNamespaceProjects(nj)
	if err != nil {
		t.Fatal(err)
	}
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := storetest.OpenWith(t, dsn, store.Options{Now: func() time.Time { return now }})
		in := books.Inputs{Prices: prices, PricesJSON: pj, Namespaces: ns.Project, NamespacesJSON: nj}
		if _, created, err := books.Close(ctx, s, "2026-10", "finance", in, day(11, 1, 0)); err != nil || !created {
			t.Fatalf("close 2026-10: %v (created %v)", err, created)
		}
		end := day(10, 30, 11)
		r := &wire.NodeReport{SchemaVersion: 1, Node: "n1", Time: end.Unix(), IntervalSeconds: 3600, Samples: 10,
			Instances: []wire.NodeInstance{{UUID: "GPU-n1", Name: "Tesla T4", Samples: 10, BusyShare: 1,
				BusyBasis: wire.BusyBasisUtilization, OccupiedShare: 1, Users: []wire.NodeUser{{Runtime: "containerd",
					ContainerID: "c-nb", PodUID: "pod-nb", Namespace: "team-c", Pod: "nb-0", Container: "jupyter",
					AllocatedShare: 1, SeenShare: 1, BusyShare: 1}}}}}
		if _, err := s.StoreNodeReport(ctx, r, store.DefaultNodeRetire); err != nil {
			t.Fatal(err)
		}
		e, err := Generate(ctx, Config{Source: s, Books: s, Ledger: s, Prices: prices, Namespaces: ns}, "2026-11", nil)
		if err != nil {
			t.Fatal(err)
		}
		var got []Row
		for _, row := range e.Rows {
			if row.ChargeClass == "Correction" {
				got = append(got, row)
			}
		}
		if len(got) != 1 {
			t.Fatalf("%d correction rows, want 1 (project c's): %+v", len(got), got)
		}
		c := got[0]
		if c.SubAccountID != "c" || c.BilledCost != 2 || c.ConsumedQuantity == nil || *c.ConsumedQuantity != 1 ||
			c.PricingQuantity == nil || *c.PricingQuantity != 1 || c.BillingBasis != "observed" {
			t.Errorf("correction: project %q, %v EUR, %v GPU-hours, basis %q; want c, 2, 1, observed", c.SubAccountID, c.BilledCost,
				c.ConsumedQuantity, c.BillingBasis)
		}
		if !c.ChargePeriodStart.Equal(day(10, 31, 0)) || !c.ChargePeriodEnd.Equal(day(11, 1, 0)) ||
			!c.BillingPeriodStart.Equal(day(11, 1, 0)) || !c.BillingPeriodEnd.Equal(day(12, 1, 0)) {
			t.Errorf("correction: charge period [%s, %s), billing period [%s, %s); want October 31, November",
				c.ChargePeriodStart, c.ChargePeriodEnd, c.BillingPeriodStart, c.BillingPeriodEnd)
		}
		if want := "GPU time, late data of 2026-10 (observed_after_close)"; c.ChargeDescription != want {
			t.Errorf("correction: description %q, want %q", c.ChargeDescription, want)
		}
	})
}
