package ledger_test

// Property test of MONITOR.md section 17's fourth invariant on random
// fleets (propFleet) on both engines: a finished task's chargeback line
// over a window that ended (to <= now, 20.4) changes only with data about
// its own GPUs' node inside its counted interval. After the line of every
// task is taken, random node reports arrive that are not about any task:
// reports of other nodes (new GPUs, an unregistered pod's use), and
// reports of the fleet's own nodes (their GPUs and a GPU no task holds,
// idle or used by the unregistered pod) at times outside every task's
// counted interval there — in the same hours as the tasks, so that an hour
// partly covered again is exercised. Every task's line must stay byte for
// byte the same (its JSON).
//
// A task's counted interval on its node is taken as its [start, end)
// widened by every report span of its node that met it (an attributing
// report moves its counted end to the report's end, 20.3): the new reports
// of its node stay clear of that, so none of them observes a task's pod.

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/report"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

func TestBooksPropertyFinishedLine(t *testing.T) {
	seed := propertySeed(t)
	fleets := propertyFleets(t)
	t.Logf("PADDLE_PROPERTY_SEED=%d (%d fleets per engine)", seed, fleets)
	prices, err := report.ParsePrices(strings.NewReader(propPrices))
	if err != nil {
		t.Fatal(err)
	}
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := storetest.Open(t, dsn)
		rng := rand.New(rand.NewPCG(seed, 4))
		for i := range fleets {
			base := t0 - int64(i+1)*86400
			tasks, spans := propFleet(t, s, rng, i, base)
			from := base + int64(rng.IntN(4*3600))
			to := from + 1 + int64(rng.IntN(int(base+4*3600-from)))
			w := facts.Window{From: time.Unix(from, 0).UTC(), To: time.Unix(to, 0).UTC()}
			where := fmt.Sprintf("fleet %d (PADDLE_PROPERTY_SEED=%d), window [%s, %s)", i, seed, w.From.Format(time.RFC3339), w.To.Format(time.RFC3339))
			q := report.Query{Window: w, Prices: prices, Namespaces: propNamespaces, Now: time.Unix(base+86400, 0)}
			before := taskLines(t, where, s, q)
			added := addUnrelatedReports(t, s, rng, i, base, tasks, spans)
			after := taskLines(t, where, s, q)
			for id, line := range before {
				if after[id] != line {
					t.Errorf("%s: task %s's line moved after %d reports about other GPUs, nodes and times:\nbefore %s\nafter  %s\nthe reports: %s",
						where, id, len(added), line, after[id], strings.Join(added, "; "))
				}
			}
			for id, line := range after {
				if _, ok := before[id]; !ok {
					t.Errorf("%s: task %s has a line only after reports about other GPUs, nodes and times: %s", where, id, line)
				}
			}
			if t.Failed() {
				return
			}
		}
	})
}

// taskLines are the JSON of each task's chargeback line over q's window,
// by task_id (lines of undeclared use, which other nodes' reports do
// change, left out).
func taskLines(t *testing.T, where string, s report.TaskLister, q report.Query) map[string]string {
	t.Helper()
	st, err := report.Chargeback(ctx, s, q)
	if err != nil {
		t.Fatalf("%s: chargeback: %v", where, err)
	}
	out := map[string]string{}
	for _, l := range st.Lines {
		if l.Namespace != "" {
			continue
		}
		if l.End == nil {
			t.Fatalf("%s: task %s has no end: the generator completes every task", where, l.TaskID)
		}
		b, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		out[l.TaskID] = string(b)
	}
	return out
}

// addUnrelatedReports stores 1–4 reports of fleet i that are about no
// task: of a node of its own with new GPUs, or of one of the fleet's
// nodes clear of every task's counted interval there (taskIntervals).
// It returns them, said briefly, for the failure message.
func addUnrelatedReports(t *testing.T, s *store.Store, rng *rand.Rand, i int, base int64, tasks []propTask, spans []propSpan) []string {
	t.Helper()
	nodes := map[string][]string{} // a fleet node's GPUs
	for _, sp := range spans {
		nodes[sp.node] = sp.gpus
	}
	models := map[string]string{}
	for _, tk := range tasks {
		models[tk.node] = tk.model
	}
	busy := taskIntervals(tasks, spans)
	var out []string
	for e := range 1 + rng.IntN(4) {
		node := fmt.Sprintf("f%d-other-%d", i, e)
		gpus := []string{fmt.Sprintf("GPU-f%d-x%d-0", i, e)}
		model := propModels[0]
		own := rng.IntN(3) > 0 && len(tasks) > 0
		if own {
			node = tasks[rng.IntN(len(tasks))].node
			gpus = append(append([]string{}, nodes[node]...), fmt.Sprintf("GPU-f%d-%s-spare", i, node))
			model = models[node]
		}
		var at, end int64
		placed := false
		for range 30 {
			at = base - 3600 + int64(rng.IntN(6*3600))
			end = at + int64(60+rng.IntN(1200))
			if !own || !overlapsAny(busy[node], at, end) {
				placed = true
				break
			}
		}
		if !placed {
			continue
		}
		r := &wire.NodeReport{SchemaVersion: 1, Node: node, Time: end, IntervalSeconds: end - at, Samples: 10}
		for _, uuid := range gpus {
			in := wire.NodeInstance{UUID: uuid, Name: model, Samples: 10, BusyShare: 1, BusyBasis: "utilization"}
			if rng.IntN(6) == 0 {
				in.Samples = 0
			}
			if rng.IntN(2) == 0 {
				in.OccupiedShare = 1
				in.Users = []wire.NodeUser{{Runtime: "containerd", ContainerID: "c-y", PodUID: fmt.Sprintf("y-%d", i),
					Namespace: fmt.Sprintf("ns-%d", i), AllocatedShare: 1, SeenShare: 1, BusyShare: 1}}
			}
			r.Instances = append(r.Instances, in)
		}
		if err := r.Validate(time.Unix(end, 0)); err != nil {
			t.Fatalf("the generator made an invalid report: %v", err)
		}
		if _, err := s.StoreNodeReport(ctx, r, store.DefaultNodeRetire); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s [%s, %s) %d GPUs", node, time.Unix(at, 0).UTC().Format(time.TimeOnly),
			time.Unix(end, 0).UTC().Format(time.TimeOnly), len(gpus)))
	}
	return out
}

// taskIntervals are, per node, the tasks' counted intervals there as far
// as they can reach: each task's [start, end) widened by every report span
// of its node that met it.
func taskIntervals(tasks []propTask, spans []propSpan) map[string][][2]int64 {
	out := map[string][][2]int64{}
	for _, tk := range tasks {
		a, b := tk.start, tk.end
		for _, sp := range spans {
			if sp.node == tk.node && sp.start < tk.end && sp.end > tk.start {
				a, b = min(a, sp.start), max(b, sp.end)
			}
		}
		out[tk.node] = append(out[tk.node], [2]int64{a, b})
	}
	return out
}

// overlapsAny says whether [a, b) meets one of the intervals.
func overlapsAny(ivs [][2]int64, a, b int64) bool {
	for _, iv := range ivs {
		if a < iv[1] && b > iv[0] {
			return true
		}
	}
	return false
}
