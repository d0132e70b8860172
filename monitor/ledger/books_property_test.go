package ledger_test

// Property test of the instant rule and of MONITOR.md section 17's first
// invariant, on random fleets on both engines: per project and in total,
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
	"os"
	"strconv"
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

// propertyFleets is how many random fleets each engine checks.
const propertyFleets = 200

// propertySeed is PADDLE_PROPERTY_SEED, else a new seed (printed).
func propertySeed(t *testing.T) uint64 {
	if v := os.Getenv("PADDLE_PROPERTY_SEED"); v != "" {
		seed, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("PADDLE_PROPERTY_SEED=%q: %v", v, err)
		}
		return seed
	}
	return uint64(time.Now().UnixNano())
}

// propTask is a generated task: one GPU (uuid "" for one counted without
// a UUID) at share, running [start, end) on its node.
type propTask struct {
	id, project, pod, node, uuid string
	share                        float64
	start, end                   int64
}

// propSpan is a report's span and the GPUs it observed.
type propSpan struct {
	node       string
	start, end int64
	observed   map[string]bool
}

// propFleet stores fleet i of rng in [base, base+4h): 1–2 nodes of 1–3
// whole GPUs, 1–5 tasks (some sharing a GPU, some declaring too little,
// some without a UUID), reports with gaps and GPUs left without samples,
// an unregistered pod of namespace ns-<i> (mapped to project u<i>).
func propFleet(t *testing.T, s *store.Store, rng *rand.Rand, i int, base int64) ([]propTask, []propSpan) {
	t.Helper()
	var tasks []propTask
	var spans []propSpan
	for n := range 1 + rng.IntN(2) {
		node := fmt.Sprintf("f%d-node-%d", i, n)
		gpus := 1 + rng.IntN(3)
		uuid := func(g int) string { return fmt.Sprintf("GPU-f%d-%d-%d", i, n, g) }
		var mine []propTask
		for k := range 1 + rng.IntN(3) {
			start := base + int64(rng.IntN(3*3600))
			tk := propTask{id: fmt.Sprintf("f%d-t%d-%d", i, n, k), project: fmt.Sprintf("p%d_%d", i, rng.IntN(2)),
				node: node, uuid: uuid(rng.IntN(gpus)), share: []float64{1, 0.5, 0.25, 0.1}[rng.IntN(4)],
				start: start, end: start + 1 + int64(rng.IntN(5400))}
			tk.pod = "pod-" + tk.id
			if rng.IntN(6) == 0 {
				tk.uuid = ""
			}
			mine = append(mine, tk)
		}
		for _, tk := range mine {
			start, count, share := tk.start, int64(1), tk.share
			r := &wire.Registration{TaskID: tk.id, TaskName: "train", Project: tk.project, Owner: "ann", StartTime: &start,
				K8sPodUID: tk.pod, K8sNode: node, Hostname: tk.id + "-0", GPUCount: &count, Labels: wire.Labels{},
				GPUs: []wire.RegisteredGPU{{UUID: tk.uuid, Name: "NVIDIA H200", MemoryTotalBytes: 1, Share: &share}}}
			body := []byte(fmt.Sprintf(`{"task_id":%q}`, tk.id))
			if _, err := s.Register(ctx, r, body, store.Sender{}); err != nil {
				t.Fatal(err)
			}
			end, duration, exit := tk.end, float64(tk.end-tk.start), int64(0)
			c := &wire.Completion{TaskID: tk.id, EndTime: &end, DurationSeconds: &duration, ExitCode: &exit}
			if _, err := s.Complete(ctx, c, []byte(fmt.Sprintf(`{"task_id":%q,"end_time":%d}`, tk.id, tk.end)), store.Sender{}); err != nil {
				t.Fatal(err)
			}
		}
		tasks = append(tasks, mine...)
		at := base + int64(rng.IntN(1800))
		for at < base+4*3600 {
			if rng.IntN(4) == 0 { // a gap
				at += int64(rng.IntN(1800))
			}
			interval := int64(60 + rng.IntN(1200))
			end := at + interval
			r := &wire.NodeReport{SchemaVersion: 1, Node: node, Time: end, IntervalSeconds: interval, Samples: 10}
			sp := propSpan{node: node, start: at, end: end, observed: map[string]bool{}}
			for g := range gpus {
				in := wire.NodeInstance{UUID: uuid(g), Name: "NVIDIA H200", Samples: 10, BusyShare: 1, BusyBasis: "utilization",
					OccupiedShare: 1}
				if rng.IntN(8) == 0 {
					in.Samples = 0
				} else {
					sp.observed[uuid(g)] = true
				}
				for _, tk := range mine {
					// The node sees a task's pod on its GPU (a task
					// without a UUID on GPU 0) while it runs.
					if (tk.uuid == uuid(g) || (tk.uuid == "" && g == 0)) && tk.start < end && tk.end > at {
						in.Users = append(in.Users, wire.NodeUser{Runtime: "containerd", ContainerID: "c-" + tk.id, PodUID: tk.pod,
							Namespace: "team", AllocatedShare: 1, SeenShare: 1, BusyShare: 1})
					}
				}
				if rng.IntN(5) == 0 {
					in.Users = append(in.Users, wire.NodeUser{Runtime: "containerd", ContainerID: "c-x", PodUID: fmt.Sprintf("x-%d", i),
						Namespace: fmt.Sprintf("ns-%d", i), AllocatedShare: 0.5, SeenShare: 0.5, BusyShare: 1})
				}
				if len(in.Users) == 0 {
					in.OccupiedShare = 0
				}
				r.Instances = append(r.Instances, in)
			}
			if err := r.Validate(time.Unix(end, 0)); err != nil {
				t.Fatalf("the generator made an invalid report: %v", err)
			}
			if _, err := s.StoreNodeReport(ctx, r, store.DefaultNodeRetire); err != nil {
				t.Fatal(err)
			}
			spans = append(spans, sp)
			at = end
		}
	}
	return tasks, spans
}

// declaredUncovered is tk's declared GPU-seconds in [from, to) over the
// seconds no span of its node observed its GPU (a GPU without a UUID: any
// span of its node), second by second.
func declaredUncovered(tk propTask, spans []propSpan, from, to int64) float64 {
	n := 0
	for sec := max(tk.start, from); sec < min(tk.end, to); sec++ {
		covered := false
		for _, sp := range spans {
			if sp.node == tk.node && sp.start <= sec && sec < sp.end && (tk.uuid == "" || sp.observed[tk.uuid]) {
				covered = true
				break
			}
		}
		if !covered {
			n++
		}
	}
	return tk.share * float64(n)
}

func TestBooksPropertyInstantRule(t *testing.T) {
	seed := propertySeed(t)
	t.Logf("PADDLE_PROPERTY_SEED=%d (%d fleets per engine)", seed, propertyFleets)
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := storetest.Open(t, dsn)
		rng := rand.New(rand.NewPCG(seed, 36))
		for i := range propertyFleets {
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
