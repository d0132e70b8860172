package store_test

import (
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

const hourT0 = int64(1796130000) // a whole hour (UTC)

func ptrOf[T any](v T) *T { return &v }

// wholeReport is a report of node at time t over interval seconds: one
// whole GPU per uuid, fully occupied by one user of pod uid "pod-<uuid>".
func wholeReport(node string, t, interval int64, uuids ...string) *wire.NodeReport {
	r := &wire.NodeReport{SchemaVersion: 1, Node: node, Time: t, IntervalSeconds: interval, Samples: 10}
	for _, u := range uuids {
		r.GPUs = append(r.GPUs, wire.NodeGPU{UUID: u, EnergyJoules: ptrOf(float64(interval) * 100)})
		r.Instances = append(r.Instances, wire.NodeInstance{UUID: u, Name: "NVIDIA H200", Samples: 10, BusyShare: 1, OccupiedShare: 1,
			BusyBasis: "utilization", EnergyJoules: ptrOf(float64(interval) * 100),
			Users: []wire.NodeUser{{Runtime: "containerd", ContainerID: "c-" + u, PodUID: "pod-" + u, Namespace: "team-a",
				AllocatedShare: 1, SeenShare: 1, BusyShare: 0.5}}})
	}
	return r
}

// TestStoreNodeReport: the answers of the write path, on both stores.
func TestStoreNodeReport(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := storetest.Open(t, dsn)
		retire := store.DefaultNodeRetire
		check := func(r *wire.NodeReport, status string, different bool, kept [2]int64) {
			t.Helper()
			w, err := s.StoreNodeReport(ctx, r, retire)
			if err != nil {
				t.Fatal(err)
			}
			if w.Status != status || w.Different != different || w.KeptStart != kept[0] || w.KeptEnd != kept[1] {
				t.Fatalf("report %s at %d: %+v, want %s different=%v kept %v", r.Node, r.Time, w, status, different, kept)
			}
		}
		t1 := hourT0 + 600
		check(wholeReport("n1", t1, 600, "GPU-a"), store.NodeCreated, false, [2]int64{hourT0, t1})
		check(wholeReport("n1", t1, 600, "GPU-a"), store.NodeExists, false, [2]int64{0, 0})
		changed := wholeReport("n1", t1, 600, "GPU-a")
		changed.Samples = 9
		check(changed, store.NodeExists, true, [2]int64{0, 0})
		// Overlaps the first by 300 s: clipped to its last 300.
		check(wholeReport("n1", t1+300, 600, "GPU-a"), store.NodeClipped, false, [2]int64{t1, t1 + 300})
		// Entirely covered: nothing kept.
		check(wholeReport("n1", t1+200, 400, "GPU-a"), store.NodeClipped, false, [2]int64{t1 + 200, t1 + 200})
		// Another node reporting GPU-a: stored, GPU-a in conflict (every
		// time, the same report again too), listed until a retire.
		for _, status := range []string{store.NodeCreated, store.NodeExists} {
			w, err := s.StoreNodeReport(ctx, wholeReport("n2", t1+600, 60, "GPU-a"), retire)
			if err != nil || w.Status != status || len(w.Conflicts) != 1 || w.Conflicts[0] != (store.GPUConflict{Node: "n2", UUID: "GPU-a", HeldBy: "n1"}) {
				t.Fatalf("another node's GPU: %+v, %v", w, err)
			}
		}
		if c, err := s.GPUConflicts(ctx); err != nil || len(c) != 1 || c[0] != (store.GPUConflict{Node: "n2", UUID: "GPU-a", HeldBy: "n1",
			FirstTime: t1 + 600, LastTime: t1 + 600, Seconds: 60}) {
			t.Fatalf("GPUConflicts = %+v, %v", c, err)
		}
		// After a retire of n1, n2 may; the conflict is resolved.
		if n, err := s.RetireNode(ctx, "n1", t1+300); err != nil || n != 1 {
			t.Fatalf("RetireNode = %d, %v", n, err)
		}
		if c, err := s.GPUConflicts(ctx); err != nil || len(c) != 0 {
			t.Fatalf("GPUConflicts after the retire = %+v, %v", c, err)
		}
		check(wholeReport("n2", t1+600, 60, "GPU-a"), store.NodeExists, false, [2]int64{0, 0})
		if _, err := s.RetireNode(ctx, "n9", t1); !errors.Is(err, store.ErrUnknownNode) {
			t.Fatalf("RetireNode of an unknown node: %v", err)
		}
		// A final report frees its GPUs at once.
		final := wholeReport("n2", t1+660, 60, "GPU-a")
		final.Final = true
		check(final, store.NodeCreated, false, [2]int64{t1 + 600, t1 + 660})
		check(wholeReport("n3", t1+720, 60, "GPU-a"), store.NodeCreated, false, [2]int64{t1 + 660, t1 + 720})
		// Pruning keeps the roll-ups.
		if n, err := s.PruneNodeReports(ctx, t1+700); err != nil || n != 5 {
			t.Fatalf("PruneNodeReports = %d, %v; want 5", n, err)
		}
	})
}

// TestRollupIdentity: each GPU hour's observed seconds are its
// unallocated seconds plus its users' parts, under both split rules, and
// the parts are those the rules give by hand.
func TestRollupIdentity(t *testing.T) {
	r := wholeReport("n", hourT0+1800, 3600, "GPU-a")
	// GPU-b in MIG mode: a 3g for all samples with two users of unequal
	// presence, a 2g for half of them empty; 2 slices unallocated.
	r.Instances = append(r.Instances,
		wire.NodeInstance{UUID: "GPU-b", GPUInstanceID: ptrOf(1), Profile: "3g.71gb", Slices: 3, TotalSlices: 7, Name: "NVIDIA H200",
			Samples: 10, OccupiedShare: 0.8, Users: []wire.NodeUser{
				{PodUID: "p1", AllocatedShare: 0.8, SeenShare: 0.2, SMUtilMean: ptrOf(50.0)},
				{PodUID: "p2", AllocatedShare: 0.2, SeenShare: 0.4}}},
		wire.NodeInstance{UUID: "GPU-b", GPUInstanceID: ptrOf(2), Profile: "2g.35gb", Slices: 2, TotalSlices: 7, Name: "NVIDIA H200",
			Samples: 5, OccupiedShare: 0})
	if err := r.Validate(time.Unix(hourT0+1800, 0)); err != nil {
		t.Fatal(err)
	}
	gpus, users := store.Rollup(r, hourT0-1800, hourT0+1800)
	if len(gpus) != 4 {
		t.Fatalf("%d GPU hours, want 4 (2 GPUs × 2 hours)", len(gpus))
	}
	for _, g := range gpus {
		eq, ut := g.Unallocated, g.Unallocated
		for _, u := range users {
			if u.Hour == g.Hour && u.UUID == g.UUID {
				eq += u.Equal
				ut += u.Util
			}
		}
		if g.Observed != 1800 || abs(eq-1800) > 1e-9 || abs(ut-1800) > 1e-9 {
			t.Errorf("%s hour %d: observed %v, unallocated + users %v (equal) %v (util)", g.UUID, g.Hour, g.Observed, eq, ut)
		}
	}
	// GPU-b's hour: 3/7 × 1800 × 0.8 occupied, split 0.8 : 0.4; the rest
	// unallocated: 1800 − that.
	occupied := 3.0 / 7 * 1800 * 0.8
	for _, u := range users {
		if u.UUID == "GPU-b" && u.User.PodUID == "p1" && abs(u.Equal-occupied*2/3) > 1e-9 {
			t.Errorf("p1's part %v, want %v", u.Equal, occupied*2/3)
		}
		if u.UUID == "GPU-a" && abs(u.BusyEqual-900) > 1e-9 {
			t.Errorf("GPU-a's user busy %v, want 900 (half of 1800)", u.BusyEqual)
		}
		if u.UUID == "GPU-a" && abs(u.Energy-1800*100) > 1e-6 {
			t.Errorf("GPU-a's user energy %v, want %v", u.Energy, 1800*100)
		}
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// TestNodeWritePlans: every statement of the node-report write path is
// served by the index it names, on both stores, with a month of one
// hundred nodes of eight GPUs stored and statistics.
func TestNodeWritePlans(t *testing.T) {
	if testing.Short() {
		t.Skip("stores a month of node reports")
	}
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := storetest.Open(t, dsn)
		loadNodeHours(t, s)
		db := store.DBForTest(s)
		for _, st := range store.NodeStatementsForTest(s) {
			t.Run(st.Name, func(t *testing.T) {
				checkPlan(t, db, s.Dialect(), st)
			})
		}
	})
}

// loadNodeHours stores 100 nodes × 8 GPUs × 30 days of hourly reports in
// one statement per table, then ANALYZE.
func loadNodeHours(t *testing.T, s *store.Store) {
	t.Helper()
	db := store.DBForTest(s)
	const nodes, gpus, hours = 100, 8, 24 * 30
	// The partitions of the month loaded, as the monitor makes them ahead.
	if err := s.CreatePartitions(ctx, time.Unix(hourT0-3600, 0), time.Unix(hourT0+hours*3600, 0), time.Unix(hourT0+hours*3600, 0)); err != nil {
		t.Fatal(err)
	}
	series := "WITH RECURSIVE h(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM h WHERE i < %d) SELECT i FROM h"
	if s.Dialect() == store.Postgres {
		series = "SELECT i FROM generate_series(0, %d) AS h(i)"
	}
	for _, q := range []string{
		fmt.Sprintf(`INSERT INTO node_reports (node, time, interval_seconds, span_start, span_end, body, received_at)
			SELECT 'node-' || (i %% %d), %d + 3600 * (i / %d), 3600, %d + 3600 * (i / %d) - 3600, %d + 3600 * (i / %d), '{}', 1 FROM (`+series+`) x`,
			nodes, hourT0, nodes, hourT0, nodes, hourT0, nodes, nodes*hours-1),
		fmt.Sprintf(`INSERT INTO node_gpus (node, uuid, first_start, last_end, ended_at, model)
			SELECT 'node-' || (i / %d), 'GPU-' || i, %d, %d, CASE WHEN i %% 2 = 0 THEN %d END, 'm' FROM (`+series+`) x`,
			gpus, hourT0, hourT0+hours*3600, hourT0+hours*3600, nodes*gpus-1),
		fmt.Sprintf(`INSERT INTO nodes (node, last_time, interval_seconds, latest) SELECT 'node-' || i, 1, 60, '{}' FROM (`+series+`) x`, 20000),
		fmt.Sprintf(`INSERT INTO node_gpu_hours (hour, node, uuid, observed_s) SELECT %d + 3600 * (i / %d), 'node-' || ((i %% %d) / %d), 'GPU-' || (i %% %d), 3600
			FROM (`+series+`) x`, hourT0, nodes*gpus, nodes*gpus, gpus, nodes*gpus, nodes*gpus*hours/10-1),
		fmt.Sprintf(`INSERT INTO node_user_hours (hour, node, uuid, gpu_instance_id, user_key, last_time, equal_s)
			SELECT %d + 3600 * (i / %d), 'node-' || ((i %% %d) / %d), 'GPU-' || (i %% %d), -1, 'u' || i, 1, 3600 FROM (`+series+`) x`,
			hourT0, nodes*gpus, nodes*gpus, gpus, nodes*gpus, nodes*gpus*hours/10-1),
		// GPU conflicts of many months, a few of them open.
		fmt.Sprintf(`INSERT INTO node_gpu_conflicts (node, uuid, held_by, first_time, last_time, resolved_at)
			SELECT 'node-' || (i %% %d), 'GPU-' || i, 'node-' || ((i + 1) %% %d), 1, 2, CASE WHEN i %% 1000 <> 0 THEN 3 END FROM (`+series+`) x`,
			nodes, nodes, 20000),
		// A span a day of each node and GPU ('' the node's own), the
		// last 400 s of each day uncovered.
		fmt.Sprintf(`INSERT INTO node_spans (node, uuid, span_start, span_end)
			SELECT 'node-' || (i %% %d), CASE WHEN (i / %d) %% %d = 0 THEN '' ELSE 'GPU-' || ((i %% %d) * %d + (i / %d) %% %d - 1) END,
			%d + 86400 * (i / %d), %d + 86400 * (i / %d) + 86000 FROM (`+series+`) x`,
			nodes, nodes, gpus+1, nodes, gpus, nodes, gpus+1, hourT0, nodes*(gpus+1), hourT0, nodes*(gpus+1), nodes*(gpus+1)*hours/24-1),
		// The day and month facts of those hours (the month's first
		// second for all: the plans do not depend on it).
		`INSERT INTO node_gpu_days (day, node, uuid, observed_s) SELECT hour - hour % 86400, node, uuid, SUM(observed_s)
			FROM node_gpu_hours GROUP BY hour - hour % 86400, node, uuid`,
		`INSERT INTO node_user_days (day, node, uuid, gpu_instance_id, user_key, first_time, last_time, equal_s)
			SELECT hour - hour % 86400, node, uuid, gpu_instance_id, user_key, MIN(last_time), MAX(last_time), SUM(equal_s)
			FROM node_user_hours GROUP BY hour - hour % 86400, node, uuid, gpu_instance_id, user_key`,
		fmt.Sprintf(`INSERT INTO node_gpu_months (month, node, uuid, observed_s) SELECT %d, node, uuid, SUM(observed_s)
			FROM node_gpu_hours GROUP BY node, uuid`, hourT0-hourT0%(86400*28)),
		fmt.Sprintf(`INSERT INTO node_user_months (month, node, uuid, gpu_instance_id, user_key, first_time, last_time, equal_s)
			SELECT %d, node, uuid, gpu_instance_id, user_key, MIN(last_time), MAX(last_time), SUM(equal_s)
			FROM node_user_hours GROUP BY node, uuid, gpu_instance_id, user_key`, hourT0-hourT0%(86400*28)),
		"ANALYZE",
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

var (
	nodeSQLiteScan = regexp.MustCompile(`\bSCAN (node_reports|node_gpus|nodes|node_gpu_hours|node_user_hours|node_spans)\b|LIST SUBQUERY`)
	// A partition of a partitioned table (node_reports_p20261201) is
	// the table; the default partition, which holds only the rows of a
	// bucket without its partition, may be read whole.
	nodePostgresScan = regexp.MustCompile(`Seq Scan on (node_reports|node_gpus|nodes|node_gpu_hours|node_user_hours|node_spans)(_p[0-9]+)?\b`)
)

// checkPlan checks that st reads no node table without an index and uses
// the one it names.
func checkPlan(t *testing.T, db *sql.DB, d store.Dialect, st store.WriteStatement) {
	t.Helper()
	text := strings.Join(explain(t, db, d, st), "\n")
	ix := indexFamily(t, db, d, st.Index)
	scan, uses := nodePostgresScan, regexp.MustCompile(`(Index Scan|Index Only Scan)( Backward)? using `+ix+` on |Bitmap Index Scan on `+
		ix+`\b|Conflict Arbiter Indexes: `+ix+`\b`)
	if d == store.SQLite {
		scan, uses = nodeSQLiteScan, regexp.MustCompile(`(?m)USING (COVERING )?INDEX `+st.Index+`( |$)`)
	}
	if scan.MatchString(text) {
		t.Fatalf("reads a table without an index:\n%s\n%s", st.SQL, text)
	}
	if st.Index == "" {
		if strings.Contains(text, "SEARCH ") || strings.Contains(text, " Scan ") {
			t.Fatalf("reads a table; the statement table names no index for it:\n%s", text)
		}
		return
	}
	if !uses.MatchString(text) {
		t.Fatalf("does not use %s:\n%s\n%s", st.Index, st.SQL, text)
	}
}

// TestMigrateNodesFromVersion8: a database of the schema before node
// reports, with a task, upgrades in place: the task keeps its figures and
// has no Slurm job, and node reports are stored.
func TestMigrateNodesFromVersion8(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		old, err := store.OpenAtVersionForTest(ctx, dsn, 8)
		if err != nil {
			t.Fatal(err)
		}
		q := `INSERT INTO tasks (id, task_id, task_name, project, owner, start_time, gpu_count, registration, registered_at, end_time, duration_seconds, exit_code)
			VALUES (1000, 'a', 'train', 'p', 'o', 1000, 1, '{}', 1, 4600, 3600, 0)`
		if _, err := store.DBForTest(old).Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		old.Close()
		s := storetest.Open(t, dsn)
		var job string
		if err := store.DBForTest(s).QueryRow("SELECT slurm_job FROM tasks WHERE task_id = 'a'").Scan(&job); err != nil || job != "" {
			t.Fatalf("slurm_job after the upgrade: %q, %v", job, err)
		}
		if task, err := s.Task(ctx, "a", "", nil); err != nil || task == nil || task.StartTime != 1000 {
			t.Fatalf("the task after the upgrade: %+v, %v", task, err)
		}
		if w, err := s.StoreNodeReport(ctx, wholeReport("n1", hourT0, 60, "GPU-a"), store.DefaultNodeRetire); err != nil || w.Status != store.NodeCreated {
			t.Fatalf("a node report after the upgrade: %+v, %v", w, err)
		}
	})
}

// TestUncovered: the newest uncovered stretch of a span, whatever the
// stored spans around it.
func TestUncovered(t *testing.T) {
	type sp = [2]int64
	for _, tc := range []struct {
		spans [][2]int64
		want  [2]int64
	}{
		{nil, sp{0, 100}},
		{[][2]int64{{-50, 40}}, sp{40, 100}},
		{[][2]int64{{80, 120}}, sp{0, 80}},
		{[][2]int64{{40, 60}}, sp{60, 100}},
		{[][2]int64{{80, 120}, {40, 60}}, sp{60, 80}},
		{[][2]int64{{-10, 110}}, sp{100, 100}},
		{[][2]int64{{0, 100}}, sp{100, 100}},
		{[][2]int64{{0, 50}, {50, 100}}, sp{100, 100}},
		{[][2]int64{{90, 100}, {0, 10}, {10, 90}}, sp{100, 100}},
	} {
		a, b := store.UncoveredForTest(0, 100, tc.spans)
		if a != tc.want[0] || b != tc.want[1] {
			t.Errorf("[0, 100) minus %v: [%d, %d), want %v", tc.spans, a, b, tc.want)
		}
	}
}

// TestObservedIdleness: an open task tied to users of its node's latest
// report is idle when each of them was idle there (idle_since the report's
// start), busy otherwise; a heartbeat then no longer changes idle_since,
// and an older report changes nothing.
func TestObservedIdleness(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := storetest.Open(t, dsn)
		r := reg("t-obs", "p", "o", hourT0-600, wire.RegisteredGPU{UUID: "GPU-a", Name: "NVIDIA H200"})
		r.K8sPodUID = "pod-GPU-a"
		mustRegister(t, s, r)
		idleSince := func() *int64 {
			t.Helper()
			task, err := s.Task(ctx, "t-obs", "", nil)
			if err != nil || task == nil {
				t.Fatalf("task: %+v, %v", task, err)
			}
			return task.IdleSince
		}
		report := func(end int64, busy float64) {
			t.Helper()
			rep := wholeReport("n1", end, 60, "GPU-a")
			rep.Instances[0].Users[0].BusyShare = busy
			if _, err := s.StoreNodeReport(ctx, rep, store.DefaultNodeRetire); err != nil {
				t.Fatal(err)
			}
		}
		report(hourT0+60, 0)
		if got := idleSince(); got == nil || *got != hourT0 {
			t.Fatalf("idle_since after an idle report: %v, want %d", got, hourT0)
		}
		report(hourT0+120, 0)
		if got := idleSince(); got == nil || *got != hourT0 {
			t.Fatalf("idle_since after a second idle report: %v, want %d (kept)", got, hourT0)
		}
		// A busy heartbeat does not make the observed task busy.
		if err := s.HeartbeatSampled(ctx, &wire.Heartbeat{TaskID: "t-obs",
			GPUs: []wire.HeartbeatGPU{{UUID: ptrOf("GPU-a"), Samples: ptrOf[int64](5), UtilMean: ptrOf(90.0)}}}, hourT0+130, nil); err != nil {
			t.Fatal(err)
		}
		if got := idleSince(); got == nil || *got != hourT0 {
			t.Fatalf("idle_since after a busy heartbeat: %v, want %d (the reports decide)", got, hourT0)
		}
		// An older report (a resend from a spool) changes nothing.
		report(hourT0-300, 0.5)
		if got := idleSince(); got == nil || *got != hourT0 {
			t.Fatalf("idle_since after an older busy report: %v, want %d", got, hourT0)
		}
		report(hourT0+180, 0.5)
		if got := idleSince(); got != nil {
			t.Fatalf("idle_since after a busy report: %v, want none", *got)
		}
	})
}

// TestTieCandidates: who a report's user is tied to, by each rule.
func TestTieCandidates(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := storetest.Open(t, dsn)
		pod := reg("t-pod", "p", "o", 100)
		pod.K8sPodUID = "uid-1"
		slurm := reg("t-slurm", "p", "o", 200)
		slurm.Orchestrator, slurm.PipelineRun, slurm.Hostname = "slurm", "4242", "n1"
		docker := reg("t-docker", "p", "o", 300)
		docker.Hostname = "abcdef012345"
		for _, r := range []*registration{pod, slurm, docker} {
			mustRegister(t, s, r)
		}
		for _, tc := range []struct {
			name string
			u    store.UserIdentity
			want string
		}{
			{"pod UID, whatever it declares", store.UserIdentity{PodUID: "uid-1", Declared: true, DeclaredTaskID: "t-docker", DeclaredProject: "p"}, "t-pod"},
			{"unknown pod UID", store.UserIdentity{PodUID: "uid-2"}, ""},
			{"Slurm job as the pipeline run", store.UserIdentity{SlurmJob: "4242"}, "t-slurm"},
			{"another Slurm job", store.UserIdentity{SlurmJob: "4243"}, ""},
			{"container by its default host name", store.UserIdentity{ContainerID: "abcdef0123456789", Declared: true, DeclaredTaskID: "t-docker", DeclaredProject: "p"}, "t-docker/o"},
			{"container with the declared owner", store.UserIdentity{ContainerID: "abcdef0123456789", Declared: true, DeclaredTaskID: "t-docker", DeclaredProject: "p", DeclaredOwner: "other"}, ""},
			{"container of another host name", store.UserIdentity{ContainerID: "ffffff0123456789", Declared: true, DeclaredTaskID: "t-docker", DeclaredProject: "p"}, ""},
			{"container that declared nothing", store.UserIdentity{ContainerID: "abcdef0123456789"}, ""},
			{"host user", store.UserIdentity{Cgroup: "/user.slice", UID: ptrOf(int64(1000))}, ""},
		} {
			ties, err := s.TieCandidates(ctx, "n1", &tc.u)
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			for _, x := range ties {
				got += x.TaskID
				if x.TaskID == "t-docker" {
					got += "/" + x.Owner
				}
			}
			if got != tc.want {
				t.Errorf("%s: tied to %q, want %q", tc.name, got, tc.want)
			}
		}
	})
}
