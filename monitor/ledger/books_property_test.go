package ledger_test

// Property test of the instant rule and of MONITOR.md section 17's first
// invariant, on random fleets on both engines (propFleet,
// prop_fleet_test.go): per project and in total,
// the bill of a window equals the ledger's attributed + undeclared
// GPU-hours there plus, for each task, its declared share over the
// instants of its counted interval that no report of its node covered
// for its GPU (computed here second by second, apart from the store's
// intervals); the observed part never exceeds the ledger's capacity.

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/ledger"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/report"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

func TestBooksPropertyInstantRule(t *testing.T) {
	seed := propertySeed(t)
	fleets := propertyFleets(t)
	t.Logf("PADDLE_PROPERTY_SEED=%d (%d fleets per engine)", seed, fleets)
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := storetest.Open(t, dsn)
		rng := rand.New(rand.NewPCG(seed, 36))
		for i := range fleets {
			// Each fleet in a day of its own, in the past; the ledger's GPU
			// lives retire an hour after their last report.
			base := t0 - int64(i+1)*86400
			tasks, spans := propFleet(t, s, rng, i, base)
			a := int64(rng.IntN(3))
			w := facts.Window{From: time.Unix(base+a*3600, 0).UTC(), To: time.Unix(base+(a+1+int64(rng.IntN(3)))*3600, 0).UTC()}
			nsJSON := fmt.Sprintf(`{"ns-%d": "u%d"}`, i, i)
			ns, err := ledger.ParseNamespaceProjects([]byte(nsJSON))
			if err != nil {
				t.Fatal(err)
			}
			rep, err := report.Compute(ctx, s, report.Query{Window: w, Namespaces: ns.Project})
			if err != nil {
				t.Fatal(err)
			}
			led, err := ledger.Compute(ctx, s, ledger.Query{Window: w, By: ledger.ByProject, Split: ledger.SplitEqual, Namespaces: ns,
				Retire: time.Hour, Now: time.Unix(base+86400, 0)})
			if err != nil {
				t.Fatal(err)
			}
			capLed, err := ledger.Compute(ctx, s, ledger.Query{Window: w, By: ledger.ByModel, Split: ledger.SplitEqual,
				Retire: time.Hour, Now: time.Unix(base+86400, 0)})
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]float64{}
			for _, row := range led.Rows {
				want[row.Key] += row.States[0] + row.States[1]
			}
			for _, tk := range tasks {
				want[tk.project] += declaredUncovered(tk, spans, w.From.Unix(), w.To.Unix()) / 3600
			}
			got := map[string]float64{}
			for _, row := range rep.Rows {
				got[row.Key["project"]] += row.GPUHours
			}
			where := fmt.Sprintf("fleet %d (PADDLE_PROPERTY_SEED=%d), window [%s, %s)", i, seed, w.From.Format(time.RFC3339), w.To.Format(time.RFC3339))
			for p, v := range want {
				if math.Abs(got[p]-v) > 2e-6 {
					t.Errorf("%s: project %s billed %.6f GPU-hours, the ledger's attributed + undeclared + declared uncovered %.6f", where, p, got[p], v)
				}
			}
			for p, v := range got {
				if _, ok := want[p]; !ok && math.Abs(v) > 1e-6 {
					t.Errorf("%s: project %s billed %.6f GPU-hours, none by hand", where, p, v)
				}
			}
			observed := led.Total.States[0] + led.Total.States[1]
			if capacity := *capLed.Total.Capacity; observed > capacity+1e-6 {
				t.Errorf("%s: observed basis %.6f GPU-hours above the capacity %.6f", where, observed, capacity)
			}
			if t.Failed() {
				return
			}
		}
	})
}

// TestLedgerWindowSeconds: a window of any second is answered while the
// raw reports it needs are kept; once --raw-retention pruned them, a
// window whose ends are not whole hours is refused naming --raw-retention
// where node reports covered it, and answered where none did.
func TestLedgerWindowSeconds(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := storetest.Open(t, dsn)
		r := &wire.NodeReport{SchemaVersion: 1, Node: "n1", Time: t0 + 3600, IntervalSeconds: 3600, Samples: 10,
			Instances: []wire.NodeInstance{{UUID: "GPU-a", Name: "NVIDIA H200", Samples: 10, BusyShare: 1, BusyBasis: "utilization"}}}
		if _, err := s.StoreNodeReport(ctx, r, store.DefaultNodeRetire); err != nil {
			t.Fatal(err)
		}
		q := func(from, to int64) (*ledger.Ledger, error) {
			return ledger.Compute(ctx, s, ledger.Query{Window: facts.Window{From: time.Unix(from, 0), To: time.Unix(to, 0)},
				By: ledger.ByModel, Split: ledger.SplitEqual, Now: time.Unix(t0+7200, 0)})
		}
		l, err := q(t0+600, t0+600+70*60)
		if err != nil {
			t.Fatalf("a 70-minute window: %v", err)
		}
		// Capacity from the first covered instant t0 to now (t0 + 2 h):
		// 3600 − 600 covered + 600 unobserved.
		if c, u := *l.Total.Capacity, l.Total.States[4]; math.Abs(c-4200.0/3600) > 1e-6 || math.Abs(u-1200.0/3600) > 1e-6 {
			t.Errorf("a 70-minute window: capacity %v, unobserved %v; want %v, %v", c, u, 4200.0/3600, 1200.0/3600)
		}
		if _, err := s.PruneNodeReports(ctx, t0+7200); err != nil {
			t.Fatal(err)
		}
		if _, err := q(t0+600, t0+600+70*60); !errors.Is(err, ledger.ErrBadQuery) || !strings.Contains(err.Error(), "--raw-retention") {
			t.Errorf("a 70-minute window after the raw reports went: %v, want a refusal naming --raw-retention", err)
		}
		if _, err := q(t0, t0+7200); err != nil {
			t.Errorf("whole hours after the raw reports went: %v", err)
		}
		if _, err := q(t0+86400+600, t0+86400+1200); err != nil {
			t.Errorf("a window over no node reports: %v", err)
		}
	})
}
