package ledger_test

// Property test of MONITOR.md section 17's fifth invariant on random
// fleets (propFleet) on both engines, within --raw-retention (the tests
// prune no raw report): a ledger window at one-second resolution is
// answered exactly, so that [from, to) has, row by row and in total, the
// sum of [from, m) and [m, to) for a random m in every additive column
// (capacity, the five states, their costs and the capacity cost), to
// 1e-9; and a window of whole hours has the same figures from the raw
// reports (Query.Raw) as from the hourly roll-ups, for every grouping and
// both split rules.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/ledger"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/report"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// ledgerGroupings are every --by of the ledger.
var ledgerGroupings = []string{ledger.ByNode, ledger.ByModel, ledger.ByProject, ledger.ByNamespace, ledger.ByState}

func TestLedgerPropertyWindows(t *testing.T) {
	seed := propertySeed(t)
	fleets := propertyFleets(t)
	t.Logf("PADDLE_PROPERTY_SEED=%d (%d fleets per engine)", seed, fleets)
	prices, err := report.ParsePrices(strings.NewReader(propPrices))
	if err != nil {
		t.Fatal(err)
	}
	ns, err := ledger.ParseNamespaceProjects([]byte(`{"ns-*": "undeclared_team"}`))
	if err != nil {
		t.Fatal(err)
	}
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := storetest.Open(t, dsn)
		rng := rand.New(rand.NewPCG(seed, 5))
		withGPUs := 0 // windows with some capacity: the sums are not all 0
		for i := range fleets {
			base := t0 - int64(i+1)*86400
			propFleet(t, s, rng, i, base)
			// The fleet's reports lie in [base, base+4h]; windows reach an
			// hour beyond on either side.
			from := base - 3600 + int64(rng.IntN(6*3600-2))
			to := from + 2 + int64(rng.IntN(int(base+5*3600-from-1)))
			m := from + 1 + int64(rng.IntN(int(to-from-1)))
			split := []string{ledger.SplitEqual, ledger.SplitUtil}[rng.IntN(2)]
			by := ledgerGroupings[rng.IntN(len(ledgerGroupings))]
			q := func(a, b int64, raw bool, by, split string) *ledger.Ledger {
				t.Helper()
				l, err := ledger.Compute(ctx, s, ledger.Query{Window: facts.Window{From: time.Unix(a, 0).UTC(), To: time.Unix(b, 0).UTC()},
					By: by, Split: split, Prices: prices, Namespaces: ns, Retire: time.Hour, Now: time.Unix(base+86400, 0), Raw: raw})
				if err != nil {
					t.Fatalf("fleet %d (PADDLE_PROPERTY_SEED=%d): ledger [%d, %d) --by %s: %v", i, seed, a, b, by, err)
				}
				return l
			}
			at := func(a, b int64) string {
				return fmt.Sprintf("fleet %d (PADDLE_PROPERTY_SEED=%d), --by %s --split %s, [%s, %s)", i, seed, by, split,
					time.Unix(a, 0).UTC().Format(time.RFC3339), time.Unix(b, 0).UTC().Format(time.RFC3339))
			}
			whole, left, right := q(from, to, false, by, split), q(from, m, false, by, split), q(m, to, false, by, split)
			if whole.Total.Capacity != nil && *whole.Total.Capacity > 0 {
				withGPUs++
			}
			sumLedgers(t, at(from, to)+fmt.Sprintf(" split at %s", time.Unix(m, 0).UTC().Format(time.TimeOnly)), whole, left, right)
			// Whole hours: the raw reports and the roll-ups agree, for
			// every grouping and both split rules.
			h0 := base - 3600 + 3600*int64(rng.IntN(5))
			h1 := h0 + 3600*int64(1+rng.IntN(int(base+5*3600-h0)/3600))
			for _, by := range ledgerGroupings {
				for _, split := range []string{ledger.SplitEqual, ledger.SplitUtil} {
					where := fmt.Sprintf("fleet %d (PADDLE_PROPERTY_SEED=%d), --by %s --split %s, [%s, %s), raw vs roll-ups", i, seed, by, split,
						time.Unix(h0, 0).UTC().Format(time.RFC3339), time.Unix(h1, 0).UTC().Format(time.RFC3339))
					sumLedgers(t, where, q(h0, h1, true, by, split), q(h0, h1, false, by, split))
				}
			}
			if t.Failed() {
				return
			}
		}
		if withGPUs < fleets/2 {
			t.Errorf("PADDLE_PROPERTY_SEED=%d: only %d of %d windows had any GPU capacity", seed, withGPUs, fleets)
		}
	})
}

// sumLedgers checks that want's rows and total equal, in every additive
// column, the sums of the parts' rows (by key) and totals, to 1e-9 of the
// figure; a part's row want lacks must be zero.
func sumLedgers(t *testing.T, where string, want *ledger.Ledger, parts ...*ledger.Ledger) {
	t.Helper()
	sums := map[string]*[13]float64{}
	var keys []string
	add := func(key string, f *ledger.Figures) {
		s := sums[key]
		if s == nil {
			s = &[13]float64{}
			sums[key] = s
			keys = append(keys, key)
		}
		for i, v := range additive(f) {
			s[i] += v
		}
	}
	const total = "\x00total"
	for _, p := range parts {
		for i := range p.Rows {
			add(p.Rows[i].Key, &p.Rows[i].Figures)
		}
		add(total, &p.Total)
	}
	got := map[string][13]float64{total: additive(&want.Total)}
	for i := range want.Rows {
		got[want.Rows[i].Key] = additive(&want.Rows[i].Figures)
		if sums[want.Rows[i].Key] == nil {
			keys = append(keys, want.Rows[i].Key)
			sums[want.Rows[i].Key] = &[13]float64{}
		}
	}
	for _, k := range keys {
		w, s := got[k], sums[k]
		for i := range w {
			if math.Abs(w[i]-s[i]) > 1e-9*math.Max(1, math.Abs(w[i])) {
				name := k
				if k == total {
					name = "total"
				}
				t.Errorf("%s: row %s: %s %v, the parts' sum %v", where, name, additiveNames[i], w[i], s[i])
			}
		}
	}
}

// additiveNames name the columns of additive.
var additiveNames = [13]string{"capacity", "attributed", "undeclared", "unattributed", "unallocated", "unobserved",
	"capacity cost", "attributed cost", "undeclared cost", "unattributed cost", "unallocated cost", "unobserved cost", "check"}

// additive are f's additive columns (a nil one counts 0).
func additive(f *ledger.Figures) [13]float64 {
	v := func(p *float64) float64 {
		if p == nil {
			return 0
		}
		return *p
	}
	out := [13]float64{v(f.Capacity)}
	copy(out[1:6], f.States[:])
	out[6] = v(f.CapacityCost)
	for i, c := range f.StateCosts {
		out[7+i] = v(c)
	}
	out[12] = v(f.Check)
	return out
}
