package monitor_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/ledger"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// countingLedger is a store that counts the ledgers computed from it.
type countingLedger struct {
	*store.Store
	ledgers int
}

func (c *countingLedger) LedgerData(ctx context.Context, from, to, retire int64) (*store.LedgerData, error) {
	c.ledgers++
	return c.Store.LedgerData(ctx, from, to, retire)
}

const fleetT0 = int64(1796076000) // 2026-11-30 22:00:00 UTC

func ptrTo[T any](v T) *T { return &v }

// fleetReport is gpu-1's report of [end − interval, end): GPU-a whole,
// used all the time by pod p1 (and listed, never present, pod p9);
// GPU-b whole, occupied half the time by pod nb-0 of team-b (pod UID p2);
// GPU-c in MIG mode, instance 3 (3 of 7 slices) used all the time by two
// host users that differ only in UID.
func fleetReport(end, interval int64) *wire.NodeReport {
	whole := func(uuid string, occupied float64, users ...wire.NodeUser) wire.NodeInstance {
		return wire.NodeInstance{UUID: uuid, Name: "NVIDIA H200", Samples: 10, BusyShare: 1, OccupiedShare: occupied,
			BusyBasis: wire.BusyBasisUtilization, Users: users}
	}
	return &wire.NodeReport{SchemaVersion: 1, Node: "gpu-1", Time: end, IntervalSeconds: interval, Samples: 10,
		GPUs: []wire.NodeGPU{{UUID: "GPU-a"}, {UUID: "GPU-b"}, {UUID: "GPU-c"}},
		Instances: []wire.NodeInstance{
			whole("GPU-a", 1,
				wire.NodeUser{Runtime: "containerd", ContainerID: "c1", PodUID: "p1", Namespace: "team-a", Pod: "train-0", Container: "paddle",
					AllocatedShare: 1, SeenShare: 1, BusyShare: 1},
				wire.NodeUser{Runtime: "containerd", ContainerID: "c9", PodUID: "p9", Namespace: "team-a", Pod: "gone", Container: "x"}),
			whole("GPU-b", 0.5, wire.NodeUser{Runtime: "containerd", ContainerID: "c2", PodUID: "p2", Namespace: "team-b", Pod: "nb-0",
				Container: "jupyter", AllocatedShare: 0.5, SeenShare: 0.5}),
			{UUID: "GPU-c", GPUInstanceID: ptrTo(3), Profile: "3g.71gb", Slices: 3, TotalSlices: 7, Name: "NVIDIA H200", Samples: 10,
				BusyShare: 1, BusyBasis: wire.BusyBasisProcesses, OccupiedShare: 1, Users: []wire.NodeUser{
					{UID: ptrTo(int64(1000)), Cgroup: "/user.slice/user-1000.slice", SeenShare: 1},
					{UID: ptrTo(int64(1001)), Cgroup: "/user.slice/user-1000.slice", SeenShare: 1}}},
		}}
}

// The fleet series, on both stores: the month's ledger by model once a
// minute at most (a scrape within the minute gets the cached series even
// after new reports), the users and ages of each node's latest report at
// every scrape (a new report re-ties its users: a registration that
// arrived since makes an undeclared user attributed), nothing of a node
// whose last report was final. The figures by hand:
//
// At 23:30:00, gpu-1's one report covers 22:00–23:00; each GPU's capacity
// runs from 22:00 to now, 5400 s, of which 1800 s unobserved (× 3 GPUs:
// 5400). GPU-a: 3600 attributed to p1's task. GPU-b: 1800 undeclared
// (team-b → notebooks), 1800 unallocated. GPU-c: 3/7 × 3600 = 1542.86
// unattributed, the other 4/7 (2057.14) unallocated: 3857.14 in all.
// gpu-2 (a Tesla T4) sent one final report of 22:50–23:00 with no user:
// 600 unallocated, its capacity ended there.
//
// At 23:31:00 (after the minute), with gpu-1's report of 23:00–23:30 and
// nb-0's task registered at 23:10: capacity 5460 s per GPU, 60 unobserved
// each (180). GPU-a 5400 attributed; GPU-b's hour 22 undeclared (1800:
// its last report, 23:00, is before the registration), hour 23 attributed
// (900), 900 + 1800 unallocated; GPU-c 3/7 × 5400 = 2314.29 unattributed
// and 4/7 × 5400 = 3085.71 unallocated; unallocated in all 2700 + 3085.71
// = 5785.71.
func TestFleetCollector(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		st := &countingLedger{Store: storetest.Open(t, dsn)}
		register := func(taskID, project, podUID string, start int64) {
			t.Helper()
			r := &wire.Registration{TaskID: taskID, TaskName: "train", Project: project, Owner: "ann", StartTime: &start,
				K8sPodUID: podUID, Hostname: "h", Labels: wire.Labels{}}
			if _, err := st.Register(ctx, r, []byte(`{"task_id":"`+taskID+`"}`), store.Sender{}); err != nil {
				t.Fatal(err)
			}
		}
		put := func(r *wire.NodeReport) {
			t.Helper()
			if _, err := st.StoreNodeReport(ctx, r, store.DefaultNodeRetire); err != nil {
				t.Fatal(err)
			}
		}
		register("t1", "search", "p1", fleetT0-600)
		put(fleetReport(fleetT0+3600, 3600))
		put(&wire.NodeReport{SchemaVersion: 1, Node: "gpu-2", Time: fleetT0 + 3600, IntervalSeconds: 600, Samples: 5, Final: true,
			GPUs:      []wire.NodeGPU{{UUID: "GPU-d"}},
			Instances: []wire.NodeInstance{{UUID: "GPU-d", Name: "Tesla T4", Samples: 5, BusyBasis: wire.BusyBasisUtilization}}})
		ns, err := ledger.ParseNamespaceProjects([]byte(`{"team-b": "notebooks"}`))
		if err != nil {
			t.Fatal(err)
		}
		now := time.Unix(fleetT0+5400, 0)
		c := monitor.NewFleetCollector(monitor.FleetConfig{Source: st, Namespaces: ns, Now: func() time.Time { return now }})

		want := func(h200 [5]string, age string, nb string) string {
			var b strings.Builder
			help := map[string]string{}
			for _, f := range monitor.Families() {
				help[f.Name] = f.Help
			}
			head := func(name string) {
				fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s gauge\n", name, help[name], name)
			}
			head("paddle_fleet_gpu_seconds")
			t4 := [5]string{"0", "0", "0", "600", "0"}
			for i, s := range ledger.States {
				fmt.Fprintf(&b, "paddle_fleet_gpu_seconds{gpu_model=%q,state=%q} %s\n", "NVIDIA H200", s, h200[i])
				fmt.Fprintf(&b, "paddle_fleet_gpu_seconds{gpu_model=%q,state=%q} %s\n", "Tesla T4", s, t4[i])
			}
			head("paddle_gpu_user_info")
			b.WriteString(`paddle_gpu_user_info{GPU_I_ID="",UUID="GPU-a",container="paddle",container_id="c1",namespace="team-a",node="gpu-1",pod="train-0",project="search",runtime="containerd",slurm_job="",state="attributed",task_id="t1"} 1
` + nb + `
paddle_gpu_user_info{GPU_I_ID="3",UUID="GPU-c",container="",container_id="",namespace="",node="gpu-1",pod="",project="",runtime="",slurm_job="",state="unattributed",task_id=""} 1
`)
			head("paddle_monitor_fleet_scrape_error")
			b.WriteString("paddle_monitor_fleet_scrape_error 0\n")
			head("paddle_node_report_age_seconds")
			b.WriteString(`paddle_node_report_age_seconds{node="gpu-1"} ` + age + "\n")
			return b.String()
		}
		undeclared := `paddle_gpu_user_info{GPU_I_ID="",UUID="GPU-b",container="jupyter",container_id="c2",namespace="team-b",node="gpu-1",pod="nb-0",project="notebooks",runtime="containerd",slurm_job="",state="undeclared",task_id=""} 1`
		attributed := `paddle_gpu_user_info{GPU_I_ID="",UUID="GPU-b",container="jupyter",container_id="c2",namespace="team-b",node="gpu-1",pod="nb-0",project="vision",runtime="containerd",slurm_job="",state="attributed",task_id="t2"} 1`
		first := [5]string{"3600", "1800", "1542.86", "3857.14", "5400"}
		if err := testutil.CollectAndCompare(c, strings.NewReader(want(first, "1800", undeclared))); err != nil {
			t.Error(err)
		}

		// 59 s later: nb-0's task registered, gpu-1's next report stored.
		register("t2", "vision", "p2", fleetT0+4200)
		put(fleetReport(fleetT0+5400, 1800))
		now = now.Add(59 * time.Second)
		if err := testutil.CollectAndCompare(c, strings.NewReader(want(first, "59", attributed))); err != nil {
			t.Error(err)
		}
		if st.ledgers != 1 {
			t.Errorf("%d ledgers for two scrapes within a minute, want 1", st.ledgers)
		}
		now = now.Add(time.Second)
		second := [5]string{"6300", "1800", "2314.29", "5785.71", "180"}
		if err := testutil.CollectAndCompare(c, strings.NewReader(want(second, "60", attributed))); err != nil {
			t.Error(err)
		}
		if st.ledgers != 2 {
			t.Errorf("%d ledgers after a minute, want 2", st.ledgers)
		}
		if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) > 0 {
			t.Errorf("lint: %v %+v", err, problems)
		}
	})
}
