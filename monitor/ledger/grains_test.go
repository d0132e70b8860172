package ledger_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/ledger"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/report"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// TestLedgerGrainsRetie (MONITOR.md 18): a window of two days and three
// hours before a calendar month, the month, and a day and five hours
// after it is read from the hours, days and month facts; pod-x's GPU is
// reported every hour, and its pod is registered twice: pa before the
// window, pb ten days, five hours and a half into the month. An hour's
// use ties to the latest registration started by its report's time (the
// hour's end), so pa is attributed the hours ending before pb's start:
// 2 × 24 + 3 + 10 × 24 + 5 = 296, and pb the rest; the month's facts
// spanning both registrations are read again by day, and that day by
// hour. The same figures from the raw reports, on both stores.
func TestLedgerGrainsRetie(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := storetest.Open(t, dsn)
		month := facts.Month(time.Unix(t0-40*86400, 0)) // in the past: the report reads to now
		from, to := month.From.Unix()-2*86400-3*3600, month.To.Unix()+86400+5*3600
		pbStart := month.From.Unix() + 10*86400 + 5*3600 + 1800
		for _, r := range []struct {
			id, project string
			start       int64
		}{{"ta", "pa", from - 3600}, {"tb", "pb", pbStart}} {
			start, count, share := r.start, int64(1), 1.0
			reg := &wire.Registration{TaskID: r.id, TaskName: "train", Project: r.project, Owner: "ann", StartTime: &start,
				K8sPodUID: "pod-x", K8sNode: "grain-node", Hostname: r.id + "-0", GPUCount: &count, Labels: wire.Labels{},
				GPUs: []wire.RegisteredGPU{{UUID: "GPU-g", Name: "NVIDIA H200", MemoryTotalBytes: 1, Share: &share}}}
			if _, err := s.Register(ctx, reg, []byte(fmt.Sprintf(`{"task_id":%q}`, r.id)), store.Sender{}); err != nil {
				t.Fatal(err)
			}
		}
		for end := from + 3600; end <= to; end += 3600 {
			r := &wire.NodeReport{SchemaVersion: 1, Node: "grain-node", Time: end, IntervalSeconds: 3600, Samples: 10,
				Instances: []wire.NodeInstance{{UUID: "GPU-g", Name: "NVIDIA H200", Samples: 10, BusyShare: 1, BusyBasis: "utilization",
					OccupiedShare: 1, Users: []wire.NodeUser{{Runtime: "containerd", ContainerID: "c-x", PodUID: "pod-x",
						Namespace: "team", AllocatedShare: 1, SeenShare: 1, BusyShare: 1}}}}}
			if _, err := s.StoreNodeReport(ctx, r, store.DefaultNodeRetire); err != nil {
				t.Fatal(err)
			}
		}
		w := facts.Window{From: time.Unix(from, 0).UTC(), To: time.Unix(to, 0).UTC()}
		q := ledger.Query{Window: w, By: ledger.ByProject, Split: ledger.SplitEqual, Now: time.Unix(to, 0)}
		l, err := ledger.Compute(ctx, s, q)
		if err != nil {
			t.Fatal(err)
		}
		total := float64(to-from) / 3600
		want := map[string]float64{"pa": 296, "pb": total - 296}
		for _, row := range l.Rows {
			if row.Key == "" {
				continue // the GPU's other states: none
			}
			if w, ok := want[row.Key]; !ok || math.Abs(row.States[0]-w) > 1e-9 {
				t.Errorf("%s: attributed %v, want %v", row.Key, row.States[0], w)
			}
			delete(want, row.Key)
		}
		if len(want) > 0 {
			t.Errorf("no rows of %v: %+v", want, l.Rows)
		}
		q.Raw = true
		raw, err := ledger.Compute(ctx, s, q)
		if err != nil {
			t.Fatal(err)
		}
		sameLedger(t, "the window from the raw reports", raw, l)

		// The report bills the same, from the same grains (the tasks run
		// on: every instant of theirs was covered, the observed basis).
		rep, err := report.Compute(ctx, s, report.Query{Window: w})
		if err != nil {
			t.Fatal(err)
		}
		bill := map[string]float64{"pa": 296, "pb": total - 296}
		for _, row := range rep.Rows {
			if w, ok := bill[row.Key["project"]]; !ok || math.Abs(row.GPUHours-w) > 1e-6 || row.BillingBasis != "observed" {
				t.Errorf("the report's %s: %v GPU-hours (%s), want %v observed", row.Key["project"], row.GPUHours, row.BillingBasis, w)
			}
		}
	})
}
