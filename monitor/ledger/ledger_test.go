package ledger_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/ledger"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/report"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

var ctx = context.Background()

const t0 = int64(1796130000) // a whole hour (UTC)

func ptr[T any](v T) *T { return &v }

// randomFleet stores random reports of 3 nodes over 6 hours: whole GPUs
// and MIG GPUs re-partitioned within intervals, gaps, overlapping
// reports, restarts (a short interval after a gap), final reports and
// nodes coming back, users on Kubernetes (registered or not), in
// containers (declared or not) and on the host; and registrations for
// some of the pods. It returns the number of reports stored.
func randomFleet(t *testing.T, s *store.Store, rng *rand.Rand) int {
	t.Helper()
	for i := range 6 {
		start, count := t0+int64(i)*1800, int64(0)
		r := &wire.Registration{TaskID: fmt.Sprintf("task-%d", i), TaskName: "train", Project: fmt.Sprintf("proj_%d", i%3),
			Owner: "ann", StartTime: &start, K8sPodUID: fmt.Sprintf("pod-%d", i), Hostname: "h", GPUCount: &count,
			Labels: wire.Labels{}}
		body := []byte(fmt.Sprintf(`{"task_id":%q}`, r.TaskID))
		if _, err := s.Register(ctx, r, body, store.Sender{}); err != nil {
			t.Fatal(err)
		}
	}
	stored := 0
	for n := range 3 {
		node := fmt.Sprintf("node-%d", n)
		gpus := 2 + n%2
		at := t0 - 600 + int64(rng.IntN(600))
		for at < t0+6*3600 {
			interval := int64(60 + rng.IntN(900))
			switch rng.IntN(10) {
			case 0: // a gap
				at += int64(rng.IntN(3600))
			case 1: // an overlap with what was sent
				at -= int64(rng.IntN(int(interval)))
			}
			end := at + interval
			r := randomReport(rng, node, gpus, end, interval)
			r.Final = rng.IntN(40) == 0
			if err := r.Validate(time.Unix(end, 0)); err != nil {
				t.Fatalf("the generator made an invalid report: %v", err)
			}
			if _, err := s.StoreNodeReport(ctx, r, store.DefaultNodeRetire); err != nil {
				t.Fatal(err)
			}
			stored++
			at = end
		}
	}
	return stored
}

func randomReport(rng *rand.Rand, node string, gpus int, end, interval int64) *wire.NodeReport {
	samples := 1 + rng.IntN(12)
	if rng.IntN(15) == 0 {
		samples = 0
	}
	r := &wire.NodeReport{SchemaVersion: 1, Node: node, Time: end, IntervalSeconds: interval, Samples: samples}
	for g := range gpus {
		uuid := fmt.Sprintf("GPU-%s-%d", node, g)
		r.GPUs = append(r.GPUs, wire.NodeGPU{UUID: uuid, EnergyJoules: ptr(rng.Float64() * 1e5)})
		if rng.IntN(8) == 0 {
			continue // not listed
		}
		model := "NVIDIA H200"
		if g%2 == 1 {
			model = "NVIDIA A100"
		}
		instance := func(gi *int, slices, total, s int) wire.NodeInstance {
			in := wire.NodeInstance{UUID: uuid, GPUInstanceID: gi, Slices: slices, TotalSlices: total, Name: model, Samples: s,
				BusyShare: rng.Float64(), OccupiedShare: rng.Float64(), EnergyJoules: ptr(rng.Float64() * 1e4)}
			if gi != nil {
				in.Profile = fmt.Sprintf("%dg.%dgb", slices, slices*10)
			}
			if rng.IntN(4) == 0 {
				in.OccupiedShare = 1
			}
			for range rng.IntN(4) {
				in.Users = append(in.Users, randomUser(rng))
			}
			return in
		}
		if samples == 0 || rng.IntN(2) == 0 {
			s := samples
			if s > 0 {
				s = 1 + rng.IntN(samples)
			}
			r.Instances = append(r.Instances, instance(nil, 0, 0, s))
			continue
		}
		// MIG: a partition for a samples, another for the rest.
		a := 1 + rng.IntN(samples)
		id := 0
		for _, part := range []int{a, samples - a} {
			if part == 0 {
				continue
			}
			free := 7
			for free > 0 && rng.IntN(4) != 0 {
				sl := 1 + rng.IntN(free)
				free -= sl
				r.Instances = append(r.Instances, instance(ptr(id), sl, 7, part))
				id++
			}
		}
	}
	return r
}

func randomUser(rng *rand.Rand) wire.NodeUser {
	u := wire.NodeUser{AllocatedShare: rng.Float64(), SeenShare: rng.Float64(), BusyShare: rng.Float64(),
		Namespace: []string{"", "team-a", "team-b", "kube-system"}[rng.IntN(4)]}
	if rng.IntN(3) == 0 {
		u.SMUtilMean = ptr(rng.Float64() * 100)
	}
	switch rng.IntN(4) {
	case 0:
		u.Runtime, u.PodUID, u.ContainerID = "containerd", fmt.Sprintf("pod-%d", rng.IntN(9)), fmt.Sprintf("c%d", rng.IntN(5))
	case 1:
		u.Runtime, u.ContainerID = "docker", fmt.Sprintf("abcdef%06d99", rng.IntN(3))
		if rng.IntN(2) == 0 {
			u.Declared = &wire.Declaration{TaskID: fmt.Sprintf("task-%d", rng.IntN(6)), Project: "proj_0"}
		}
	case 2:
		u.SlurmJob = fmt.Sprint(rng.IntN(4))
	default:
		u.Cgroup, u.UID = "/user.slice", ptr(int64(1000+rng.IntN(2)))
	}
	return u
}

func near(a, b, scale float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, scale) }

// TestLedgerIdentityRandom: on random fleets, on both stores, every node
// and model row and the total have capacity = the five states (|check| ≤
// 1e-6 × capacity), the states add up the same whatever the grouping,
// and the ledger from the raw reports equals the one from the roll-ups.
func TestLedgerIdentityRandom(t *testing.T) {
	for seed := range uint64(4) {
		// One subtest per seed: the stores' names must differ (a '#' of
		// a repeated subtest name would cut a SQLite file URI).
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			storetest.Each(t, func(t *testing.T, dsn string) {
				rng := rand.New(rand.NewPCG(seed, 7))
				s := storetest.Open(t, dsn)
				n := randomFleet(t, s, rng)
				if seed == 3 {
					// Two fleets' reports under the same node names: late
					// final reports, gaps filled after a final, resends.
					n += randomFleet(t, s, rand.New(rand.NewPCG(seed, 8)))
				}
				ns, err := ledger.ParseNamespaceProjects([]byte(`{"team-a": "proj_a", "team-*": "proj_teams"}`))
				if err != nil {
					t.Fatal(err)
				}
				prices, err := report.ParsePrices(stringsReader(`{"currency":"CNY","models":{"NVIDIA H200":20,"NVIDIA A100":10,"NVIDIA H200 3g.30gb":9}}`))
				if err != nil {
					t.Fatal(err)
				}
				w := facts.Window{From: time.Unix(t0-3600, 0), To: time.Unix(t0+8*3600, 0)}
				var totals []ledger.Figures
				for _, split := range []string{ledger.SplitEqual, ledger.SplitUtil} {
					for _, by := range []string{ledger.ByNode, ledger.ByModel, ledger.ByProject, ledger.ByNamespace, ledger.ByState} {
						q := ledger.Query{Window: w, By: by, Split: split, Namespaces: ns, Prices: prices, Now: time.Unix(t0+7*3600, 0)}
						l, err := ledger.Compute(ctx, s, q)
						if err != nil {
							t.Fatal(err)
						}
						q.Raw = true
						raw, err := ledger.Compute(ctx, s, q)
						if err != nil {
							t.Fatal(err)
						}
						where := fmt.Sprintf("seed %d (%d reports), --split %s --by %s", seed, n, split, by)
						if *l.Total.Capacity <= 0 {
							t.Fatalf("%s: capacity %v", where, *l.Total.Capacity)
						}
						checkIdentity(t, where+" total", &l.Total)
						if by == ledger.ByNode || by == ledger.ByModel {
							for _, r := range l.Rows {
								checkIdentity(t, where+" row "+r.Key, &r.Figures)
							}
						}
						sameLedger(t, where+": raw vs roll-ups", raw, l)
						if split == ledger.SplitEqual {
							totals = append(totals, l.Total)
						}
					}
				}
				for _, f := range totals[1:] {
					for i := range f.States {
						if !near(f.States[i], totals[0].States[i], *totals[0].Capacity) {
							t.Errorf("seed %d: the total's %s differs by grouping: %v vs %v", seed, ledger.States[i], f.States[i], totals[0].States[i])
						}
					}
				}
			})
		})
	}
}

func checkIdentity(t *testing.T, where string, f *ledger.Figures) {
	t.Helper()
	if f.Capacity == nil || f.Check == nil {
		t.Fatalf("%s: no capacity or check", where)
	}
	sum := 0.0
	for _, v := range f.States {
		if v < -1e-9 {
			t.Errorf("%s: a negative state: %v", where, f.States)
		}
		sum += v
	}
	if math.Abs(*f.Capacity-sum) > 1e-6*math.Max(*f.Capacity, 1e-9) || math.Abs(*f.Check) > 1e-6*math.Max(*f.Capacity, 1e-9) {
		t.Errorf("%s: capacity %v, five states %v (sum %v), check %v", where, *f.Capacity, f.States, sum, *f.Check)
	}
	if f.CapacityCost != nil {
		c := 0.0
		for _, v := range f.StateCosts {
			c += *v
		}
		if !near(c, *f.CapacityCost, c) {
			t.Errorf("%s: capacity cost %v, the states' %v", where, *f.CapacityCost, c)
		}
	}
}

func sameLedger(t *testing.T, where string, a, b *ledger.Ledger) {
	t.Helper()
	if len(a.Rows) != len(b.Rows) {
		t.Fatalf("%s: %d rows vs %d", where, len(a.Rows), len(b.Rows))
	}
	for i := range a.Rows {
		if a.Rows[i].Key != b.Rows[i].Key {
			t.Fatalf("%s: row %d: %q vs %q", where, i, a.Rows[i].Key, b.Rows[i].Key)
		}
		sameFigures(t, where+" "+a.Rows[i].Key, &a.Rows[i].Figures, &b.Rows[i].Figures)
	}
	sameFigures(t, where+" total", &a.Total, &b.Total)
}

func sameFigures(t *testing.T, where string, a, b *ledger.Figures) {
	t.Helper()
	for i := range a.States {
		if !near(a.States[i], b.States[i], a.States[i]) {
			t.Errorf("%s: %s %v vs %v", where, ledger.States[i], a.States[i], b.States[i])
		}
	}
}

// TestLedgerMonthRawEqualsRollups: a calendar month of reports (two nodes,
// a report every 4 hours with random users and partitions), computed from
// the raw reports and from the roll-ups, by node and by project, on both
// stores: the same figures, and capacity = the five states.
func TestLedgerMonthRawEqualsRollups(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := storetest.Open(t, dsn)
		rng := rand.New(rand.NewPCG(11, 12))
		month := facts.Month(time.Unix(t0, 0))
		from, to := month.From.Unix(), month.To.Unix()
		for n := range 2 {
			node := fmt.Sprintf("month-node-%d", n)
			for end := from + 4*3600; end <= to; end += 4 * 3600 {
				r := randomReport(rng, node, 2, end, 4*3600)
				if _, err := s.StoreNodeReport(ctx, r, store.DefaultNodeRetire); err != nil {
					t.Fatal(err)
				}
			}
		}
		for _, by := range []string{ledger.ByNode, ledger.ByProject} {
			q := ledger.Query{Window: month, By: by, Split: ledger.SplitUtil, Now: month.To}
			l, err := ledger.Compute(ctx, s, q)
			if err != nil {
				t.Fatal(err)
			}
			q.Raw = true
			raw, err := ledger.Compute(ctx, s, q)
			if err != nil {
				t.Fatal(err)
			}
			sameLedger(t, "a month by "+by, raw, l)
			checkIdentity(t, "a month by "+by, &l.Total)
			if want := float64(2*2*(to-from)) / 3600; math.Abs(*l.Total.Capacity-want) > 1e-6 {
				t.Errorf("capacity %v, want %v (4 GPUs the whole month)", *l.Total.Capacity, want)
			}
		}
	})
}
