package ledger_test

// The random fleets of the property tests of MONITOR.md section 17's
// invariants (books_property_test.go, views_property_test.go,
// finished_property_test.go, windows_property_test.go): a fleet per day
// in the past, its seed printed and replayed by PADDLE_PROPERTY_SEED.

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
)

// propertyFleets is how many random fleets each engine checks: 200
// (MONITOR.md 20.28), or PADDLE_PROPERTY_FLEETS while developing.
func propertyFleets(t *testing.T) int {
	if v := os.Getenv("PADDLE_PROPERTY_FLEETS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("PADDLE_PROPERTY_FLEETS=%q: a number of fleets of at least 1", v)
		}
		return n
	}
	return 200
}

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
	id, project, owner, pod, node, uuid, model string
	share                                      float64
	start, end                                 int64
}

// propSpan is a report's span, the GPUs it observed and every GPU of its
// node.
type propSpan struct {
	node       string
	start, end int64
	observed   map[string]bool
	gpus       []string
}

// propModels are the GPU models of a fleet's nodes 0 and 1, propOwners
// the owners its tasks take in turn.
var (
	propModels = []string{"NVIDIA H200", "NVIDIA A100-SXM4-80GB"}
	propOwners = []string{"ann", "bob"}
)

// propFleet stores fleet i of rng in [base, base+4h): 1–2 nodes of 1–3
// whole GPUs (node 0 of H200s, node 1 of A100s), 1–5 tasks (some sharing a GPU, some declaring too little,
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
		model := propModels[n]
		var mine []propTask
		for k := range 1 + rng.IntN(3) {
			start := base + int64(rng.IntN(3*3600))
			tk := propTask{id: fmt.Sprintf("f%d-t%d-%d", i, n, k), project: fmt.Sprintf("p%d_%d", i, rng.IntN(2)),
				owner: propOwners[k%len(propOwners)], node: node, uuid: uuid(rng.IntN(gpus)), model: model, share: []float64{1, 0.5, 0.25, 0.1}[rng.IntN(4)],
				start: start, end: start + 1 + int64(rng.IntN(5400))}
			tk.pod = "pod-" + tk.id
			if rng.IntN(6) == 0 {
				tk.uuid = ""
			}
			mine = append(mine, tk)
		}
		for _, tk := range mine {
			start, count, share := tk.start, int64(1), tk.share
			r := &wire.Registration{TaskID: tk.id, TaskName: "train", Project: tk.project, Owner: tk.owner, StartTime: &start,
				K8sPodUID: tk.pod, K8sNode: node, Hostname: tk.id + "-0", GPUCount: &count, Labels: wire.Labels{},
				GPUs: []wire.RegisteredGPU{{UUID: tk.uuid, Name: tk.model, MemoryTotalBytes: 1, Share: &share}}}
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
				sp.gpus = append(sp.gpus, uuid(g))
			}
			for g := range gpus {
				in := wire.NodeInstance{UUID: uuid(g), Name: model, Samples: 10, BusyShare: 1, BusyBasis: "utilization",
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
