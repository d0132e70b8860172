package ledger_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/ledger"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// TestLateRegistrationRetiesMonthOldPod (MONITOR.md 18, 20.6): a month
// forty days back of two pods on two GPUs of one node, each reported every
// hour; pod-b's task registered at the month's start, pod-a's not, so
// pod-a's hours are unattributed (no namespace mapping charges them). A month later pod-a's registration arrives
// (started at the month's start): its hours tie to it, attributed to pa,
// and nothing else moves — pb's row, the GPUs' capacity and every other
// state are the same — while no roll-up bucket is written again: a tie is
// resolved from the registrations when the roll-ups are read (store's
// LedgerTies), so a late registration re-ties the pod's rows, and only
// them, without rewriting them. On both stores, from the facts and from
// the raw reports.
func TestLateRegistrationRetiesMonthOldPod(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := storetest.Open(t, dsn)
		month := facts.Month(time.Unix(t0-40*86400, 0))
		from, to := month.From.Unix(), month.To.Unix()
		hours := float64(to-from) / 3600
		register := func(id, project, pod, uuid string) {
			t.Helper()
			start, count, share := from, int64(1), 1.0
			reg := &wire.Registration{TaskID: id, TaskName: "train", Project: project, Owner: "ann", StartTime: &start,
				K8sPodUID: pod, K8sNode: "tie-node", Hostname: id + "-0", GPUCount: &count, Labels: wire.Labels{},
				GPUs: []wire.RegisteredGPU{{UUID: uuid, Name: "NVIDIA H200", MemoryTotalBytes: 1, Share: &share}}}
			if _, err := s.Register(ctx, reg, []byte(fmt.Sprintf(`{"task_id":%q}`, id)), store.Sender{}); err != nil {
				t.Fatal(err)
			}
		}
		register("tb", "pb", "pod-b", "GPU-b")
		user := func(pod string) wire.NodeUser {
			return wire.NodeUser{Runtime: "containerd", ContainerID: "c-" + pod, PodUID: pod, Namespace: "team",
				AllocatedShare: 1, SeenShare: 1, BusyShare: 1}
		}
		for end := from + 3600; end <= to; end += 3600 {
			r := &wire.NodeReport{SchemaVersion: 1, Node: "tie-node", Time: end, IntervalSeconds: 3600, Samples: 10}
			for _, g := range []struct{ uuid, pod string }{{"GPU-a", "pod-a"}, {"GPU-b", "pod-b"}} {
				r.Instances = append(r.Instances, wire.NodeInstance{UUID: g.uuid, Name: "NVIDIA H200", Samples: 10, BusyShare: 1,
					BusyBasis: "utilization", OccupiedShare: 1, Users: []wire.NodeUser{user(g.pod)}})
			}
			if _, err := s.StoreNodeReport(ctx, r, store.DefaultNodeRetire); err != nil {
				t.Fatal(err)
			}
		}
		w := facts.Window{From: month.From, To: month.To}
		read := func(by string, raw bool) *ledger.Ledger {
			t.Helper()
			l, err := ledger.Compute(ctx, s, ledger.Query{Window: w, By: by, Split: ledger.SplitEqual, Now: time.Unix(t0, 0), Raw: raw})
			if err != nil {
				t.Fatal(err)
			}
			return l
		}
		// states are a ledger's rows by key: [attributed, undeclared,
		// unattributed, unallocated, unobserved].
		states := func(l *ledger.Ledger) map[string][5]float64 {
			out := map[string][5]float64{}
			for _, r := range l.Rows {
				out[r.Key] = r.States
			}
			return out
		}
		check := func(where string, got map[string][5]float64, want map[string][5]float64) {
			t.Helper()
			for k, w := range want {
				g, ok := got[k]
				for i := range w {
					if !ok || math.Abs(g[i]-w[i]) > 1e-9 {
						t.Errorf("%s: row %q = %v, want %v", where, k, g, w)
						break
					}
				}
			}
			for k, g := range got {
				if _, ok := want[k]; !ok {
					t.Errorf("%s: a row %q %v nobody expected", where, k, g)
				}
			}
		}
		// Before: pb is attributed its GPU's month; pod-a's month is
		// unattributed (the row of no project).
		check("before", states(read(ledger.ByProject, false)), map[string][5]float64{
			"pb": {hours, 0, 0, 0, 0}, "": {0, 0, hours, 0, 0}})
		byNode := read(ledger.ByNode, false)
		buckets := s.RollupBuckets()

		register("ta", "pa", "pod-a", "GPU-a") // a month late
		if after := s.RollupBuckets(); fmt.Sprint(after) != fmt.Sprint(buckets) {
			t.Errorf("buckets written by the late registration: %v, then %v: a tie is read, not rewritten", buckets, after)
		}
		want := map[string][5]float64{"pa": {hours, 0, 0, 0, 0}, "pb": {hours, 0, 0, 0, 0}, "": {}}
		check("after, from the facts", states(read(ledger.ByProject, false)), want)
		check("after, from the raw reports", states(read(ledger.ByProject, true)), want)
		// The node's row: the same capacity, its unattributed month now
		// attributed, nothing else changed.
		n := byNode.Rows[0].Figures
		after := read(ledger.ByNode, false).Rows[0].Figures
		if *after.Capacity != *n.Capacity || *n.Capacity != 2*hours {
			t.Errorf("node capacity %v, then %v, want %v", *n.Capacity, *after.Capacity, 2*hours)
		}
		if n.States != [5]float64{hours, 0, hours, 0, 0} || after.States != [5]float64{2 * hours, 0, 0, 0, 0} {
			t.Errorf("node states %v, then %v, want [%v 0 %v 0 0], then [%v 0 0 0 0]", n.States, after.States, hours, hours, 2*hours)
		}
	})
}
