package store_test

// The day and month facts (rollup_facts.go): what a late report re-rolls,
// and the same figures from raw reports, hours, days and months on random
// fleets.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// monthEnd is 2026-11-30 22:00 UTC: two hours before a day's and a
// month's end.
var monthEnd = time.Date(2026, 11, 30, 22, 0, 0, 0, time.UTC).Unix()

// TestRollupLateReportBuckets: a late report (older than the node's
// latest) writes only the buckets its span touches, at each grain: one
// GPU and one user per hour, day and month it reaches.
func TestRollupLateReportBuckets(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := storetest.Open(t, dsn)
		// A month of reports every hour: the store holds 30 days of facts.
		start := monthEnd - 30*86400
		for at := start + 3600; at <= monthEnd; at += 3600 {
			if at == start+10*86400 || at == monthEnd {
				continue // the hours that arrive late below
			}
			if _, err := s.StoreNodeReport(ctx, wholeReport("n1", at, 3600, "GPU-a"), store.DefaultNodeRetire); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.StoreNodeReport(ctx, wholeReport("n1", monthEnd+2*3600, 7200, "GPU-a"), store.DefaultNodeRetire); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			name   string
			report *wire.NodeReport
			want   map[string]int64
		}{
			// 20 days old, 10 minutes of one hour: one GPU row and one
			// user row per grain.
			{"ten minutes of an old hour", wholeReport("n1", start+10*86400-3000, 600, "GPU-a"),
				map[string]int64{"hour": 2, "day": 2, "month": 2}},
			// The month's second last hour, missing until now.
			{"the month's last missing hour", wholeReport("n1", monthEnd, 3600, "GPU-a"),
				map[string]int64{"hour": 2, "day": 2, "month": 2}},
		} {
			before := s.RollupBuckets()
			w, err := s.StoreNodeReport(ctx, c.report, store.DefaultNodeRetire)
			if err != nil {
				t.Fatal(err)
			}
			if w.KeptEnd <= w.KeptStart {
				t.Fatalf("%s: nothing kept: %+v", c.name, w)
			}
			after := s.RollupBuckets()
			for _, g := range store.Grains {
				if got := after[g] - before[g]; got != c.want[g] {
					t.Errorf("%s: %s buckets written %d, want %d", c.name, g, got, c.want[g])
				}
			}
		}
		// Another node's three hours across the month's end: three hours,
		// and a day and a month on each side of it.
		other := wholeReport("n2", monthEnd+3*3600, 3*3600, "GPU-b")
		before := s.RollupBuckets()
		if _, err := s.StoreNodeReport(ctx, other, store.DefaultNodeRetire); err != nil {
			t.Fatal(err)
		}
		after := s.RollupBuckets()
		for g, want := range map[string]int64{"hour": 6, "day": 4, "month": 4} {
			if got := after[g] - before[g]; got != want {
				t.Errorf("across the month's end: %s buckets written %d, want %d", g, got, want)
			}
		}
	})
}

// rollupSeed is PADDLE_PROPERTY_SEED, else a new seed (printed).
func rollupSeed(t *testing.T) uint64 {
	if v := os.Getenv("PADDLE_PROPERTY_SEED"); v != "" {
		seed, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("PADDLE_PROPERTY_SEED=%q: %v", v, err)
		}
		return seed
	}
	return uint64(time.Now().UnixNano())
}

// TestRollupGrainsProperty: on 200 random small fleets per engine, their
// reports sent in a random order (late data), the figures of every GPU and
// every GPU instance user summed from the raw reports' roll-ups, from the
// hours, from the days and from the months are the same.
func TestRollupGrainsProperty(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		seed := rollupSeed(t)
		t.Logf("seed %d (PADDLE_PROPERTY_SEED replays)", seed)
		rng := rand.New(rand.NewPCG(seed, 38))
		s := storetest.Open(t, dsn)
		// Every fleet's reports lie within two days of the end of
		// November: the window is its month and December, whole.
		from := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC).Unix()
		to := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
		raw := map[string]*store.FactSum{}
		for i := range 200 {
			for _, r := range rollupFleet(rng, i) {
				if _, err := s.StoreNodeReport(ctx, r, store.DefaultNodeRetire); err != nil {
					t.Fatalf("seed %d fleet %d: %v", seed, i, err)
				}
			}
		}
		// The raw reports as stored (clipped, some re-rolled by a later
		// one's clip), rolled up again.
		d, err := s.LedgerDataRaw(ctx, from, to, int64(store.DefaultNodeRetire/time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range d.GPUs {
			addFact(raw, store.FactSum{Node: g.Node, UUID: g.UUID, GPUInstanceID: -1, Observed: g.Observed,
				Unallocated: g.Unallocated, Energy: g.Energy})
		}
		for _, u := range d.Users {
			addFact(raw, store.FactSum{Node: u.Node, UUID: u.UUID, GPUInstanceID: u.GPUInstanceID, UserKey: u.User.Key(),
				Equal: u.Equal, Util: u.Util, BusyEqual: u.BusyEqual, BusyUtil: u.BusyUtil, Energy: u.Energy})
		}
		for _, g := range store.Grains {
			sums, err := s.FactSums(ctx, g, from, to)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]*store.FactSum{}
			for _, f := range sums {
				addFact(got, f)
			}
			// A row whose figures are all zero adds nothing: a later
			// report's clip can take a user's whole use of a bucket back
			// (its row stays, at zero), which the raw reports, rolled up
			// again after the clip, never write.
			dropZero(got)
			dropZero(raw)
			if len(got) != len(raw) {
				t.Fatalf("seed %d: %s: %d rows, raw %d", seed, g, len(got), len(raw))
			}
			keys := make([]string, 0, len(raw))
			for k := range raw {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				w, f := raw[k], got[k]
				if f == nil {
					t.Fatalf("seed %d: %s: no row of %q", seed, g, k)
				}
				for _, p := range [][3]any{{"observed", f.Observed, w.Observed}, {"unallocated", f.Unallocated, w.Unallocated},
					{"equal", f.Equal, w.Equal}, {"util", f.Util, w.Util}, {"busy equal", f.BusyEqual, w.BusyEqual},
					{"busy util", f.BusyUtil, w.BusyUtil}, {"energy", f.Energy, w.Energy}} {
					a, b := p[1].(float64), p[2].(float64)
					if math.Abs(a-b) > 1e-6*math.Max(1, math.Abs(b)) {
						t.Fatalf("seed %d: %s: %q %s %v, raw %v", seed, g, k, p[0], a, b)
					}
				}
			}
		}
	})
}

// dropZero removes the rows of m whose every figure is zero.
func dropZero(m map[string]*store.FactSum) {
	for k, f := range m {
		if f.Observed == 0 && f.Unallocated == 0 && f.Equal == 0 && f.Util == 0 && f.BusyEqual == 0 && f.BusyUtil == 0 && f.Energy == 0 {
			delete(m, k)
		}
	}
}

func addFact(m map[string]*store.FactSum, f store.FactSum) {
	k := fmt.Sprintf("%s\x1e%s\x1e%d\x1e%s", f.Node, f.UUID, f.GPUInstanceID, f.UserKey)
	o := m[k]
	if o == nil {
		m[k] = &f
		return
	}
	o.Observed += f.Observed
	o.Unallocated += f.Unallocated
	o.Equal += f.Equal
	o.Util += f.Util
	o.BusyEqual += f.BusyEqual
	o.BusyUtil += f.BusyUtil
	o.Energy += f.Energy
}

// rollupFleet is fleet i's reports, shuffled: 1–2 nodes of 1–3 GPUs
// reporting from up to two days before the month's end to up to two days
// after it, with gaps, reports that overlap (clipped), GPUs without
// samples, 0–3 users per GPU with random shares, utilisations and energy.
func rollupFleet(rng *rand.Rand, i int) []*wire.NodeReport {
	var out []*wire.NodeReport
	for n := range 1 + rng.IntN(2) {
		node := fmt.Sprintf("r%d-node-%d", i, n)
		gpus := 1 + rng.IntN(3)
		at := monthEnd - int64(rng.IntN(2*86400))
		stop := monthEnd + int64(rng.IntN(2*86400))
		for at < stop {
			if rng.IntN(5) == 0 {
				at += int64(rng.IntN(7200))
			}
			interval := int64(60 + rng.IntN(14400))
			end := at + interval
			r := &wire.NodeReport{SchemaVersion: 1, Node: node, Time: end, IntervalSeconds: interval, Samples: 10}
			for g := range gpus {
				uuid := fmt.Sprintf("GPU-r%d-%d-%d", i, n, g)
				r.GPUs = append(r.GPUs, wire.NodeGPU{UUID: uuid, EnergyJoules: ptrOf(float64(rng.IntN(100000)))})
				in := wire.NodeInstance{UUID: uuid, Name: "NVIDIA H200", Samples: 10, BusyShare: rng.Float64(), BusyBasis: "utilization",
					OccupiedShare: rng.Float64(), EnergyJoules: ptrOf(float64(rng.IntN(100000)))}
				if rng.IntN(8) == 0 {
					in.Samples = 0
				}
				for u := range rng.IntN(4) {
					user := wire.NodeUser{Runtime: "containerd", ContainerID: fmt.Sprintf("c-%d-%d", g, u), PodUID: fmt.Sprintf("pod-%d-%d-%d", i, g, u),
						Namespace: "team", AllocatedShare: rng.Float64(), SeenShare: rng.Float64(), BusyShare: rng.Float64(),
						SMUtilMean: ptrOf(rng.Float64() * 100)}
					if rng.IntN(4) == 0 {
						user.CapacityShare = ptrOf([]float64{0.5, 0.25}[rng.IntN(2)])
					}
					in.Users = append(in.Users, user)
				}
				r.Instances = append(r.Instances, in)
			}
			out = append(out, r)
			// Sometimes the next report overlaps this one (clipped).
			at = end - int64(rng.IntN(2))*int64(rng.IntN(int(interval)))
		}
	}
	rng.Shuffle(len(out), func(a, b int) { out[a], out[b] = out[b], out[a] })
	return out
}
