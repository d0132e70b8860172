package store_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// TestLedgerPlans: every read of the ledger (the window's sums, one
// user's hours, the ties of all users per rule) is served by the index
// it names, on both stores, with a month of one hundred nodes of eight
// GPUs and 20,000 registrations (pods, Slurm jobs and runs, containers)
// stored and statistics; none reads tasks without an index.
func TestLedgerPlans(t *testing.T) {
	if testing.Short() {
		t.Skip("stores a month of node reports")
	}
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := storetest.Open(t, dsn)
		db := store.DBForTest(s)
		series := "WITH RECURSIVE h(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM h WHERE i < 19999) SELECT i FROM h"
		if s.Dialect() == store.Postgres {
			series = "SELECT i FROM generate_series(0, 19999) AS h(i)"
		}
		q := `INSERT INTO tasks (id, task_id, task_name, project, owner, hostname, k8s_node, k8s_pod_uid, slurm_job, orchestrator, pipeline_run,
			start_time, gpu_count, registration, registered_at)
			SELECT i + 1, 'task-' || i, 'train', 'p' || (i % 50), 'o', 'host-' || i, CASE WHEN i % 4 = 0 THEN 'node-' || (i % 100) ELSE '' END,
			CASE WHEN i % 4 = 0 THEN 'pod-' || i ELSE '' END, CASE WHEN i % 4 = 1 THEN '' || i ELSE '' END,
			CASE WHEN i % 4 = 2 THEN 'slurm' ELSE '' END, CASE WHEN i % 4 = 2 THEN '' || i ELSE '' END,
			1700000000 + i, 1, '{}', 1700000000 + i FROM (` + series + `) x`
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		loadNodeHours(t, s)
		for _, st := range store.LedgerStatementsForTest(s) {
			t.Run(st.Name, func(t *testing.T) {
				text := strings.Join(explain(t, db, s.Dialect(), st), "\n")
				if sqliteScan.MatchString(text) || postgresScan.MatchString(text) {
					t.Fatalf("reads tasks without an index:\n%s\n%s", st.SQL, text)
				}
				checkPlan(t, db, s.Dialect(), st)
			})
		}
	})
}

// TestLedgerTies: the ties of many users read at once, one statement per
// rule, are for each user (on each node) what TieCandidates answers for
// it alone: pods, Slurm jobs (slurm_job and pipeline_run, both on one
// job), containers by host name and by k8s_node, owners, other nodes.
func TestLedgerTies(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := storetest.Open(t, dsn)
		var regs []*registration
		add := func(id, owner string, start int64, set func(r *registration)) {
			r := reg(id, "p", owner, start)
			set(r)
			regs = append(regs, r)
		}
		add("t-pod-a", "o", 100, func(r *registration) { r.K8sPodUID = "uid-1" })
		add("t-pod-b", "o", 50, func(r *registration) { r.K8sPodUID = "uid-1" })
		add("t-job", "o", 200, func(r *registration) { r.SlurmJob, r.Hostname = "77", "n1" })
		add("t-run", "o", 150, func(r *registration) { r.Orchestrator, r.PipelineRun, r.Hostname = "slurm", "77", "n1" })
		add("t-job-n2", "o", 120, func(r *registration) { r.SlurmJob, r.K8sNode = "77", "n2" })
		add("t-docker", "o", 300, func(r *registration) { r.Hostname = "abcdef012345" })
		add("t-docker2", "o", 310, func(r *registration) { r.K8sNode = "n2" })
		add("t-pod-n1", "o", 90, func(r *registration) { r.K8sPodUID, r.K8sNode = "uid-3", "N1" })
		add("t-pod-docker", "o", 320, func(r *registration) { r.K8sPodUID, r.K8sNode = "uid-4", "n2" })
		// A Slurm job's registration that names the job twice (slurm_job
		// and pipeline_run): both statements find it, it ties once.
		add("t-job-twice", "o", 330, func(r *registration) {
			r.SlurmJob, r.Orchestrator, r.PipelineRun, r.Hostname = "79", "slurm", "79", "n1"
		})
		for _, r := range regs {
			mustRegister(t, s, r)
		}
		ids := []store.UserIdentity{
			{PodUID: "uid-1", Declared: true, DeclaredTaskID: "t-docker", DeclaredProject: "p"},
			{PodUID: "uid-2"},
			{PodUID: "uid-3"},
			{ContainerID: "ffffff0123456789", Declared: true, DeclaredTaskID: "t-pod-docker", DeclaredProject: "p"},
			{SlurmJob: "77"},
			{SlurmJob: "78"},
			{SlurmJob: "79"},
			{ContainerID: "abcdef0123456789", Declared: true, DeclaredTaskID: "t-docker", DeclaredProject: "p"},
			{ContainerID: "abcdef0123456789", Declared: true, DeclaredTaskID: "t-docker", DeclaredProject: "p", DeclaredOwner: "q"},
			{ContainerID: "ffffff0123456789", Declared: true, DeclaredTaskID: "t-docker", DeclaredProject: "p"},
			{ContainerID: "ffffff0123456789", Declared: true, DeclaredTaskID: "t-docker2", DeclaredProject: "p"},
			{ContainerID: "abcdef0123456789"},
			{Cgroup: "/user.slice", UID: ptrOf(int64(1000))},
		}
		var users []store.UserHour
		// Each node's users over another hour: no pod on two nodes at once.
		for k, node := range []string{"n1", "n2", "n3"} {
			for _, id := range ids {
				h := int64(k) * 3600
				users = append(users, store.UserHour{Node: node, User: id, Hour: h, LastTime: h + 3600})
			}
		}
		all, err := s.LedgerTies(ctx, users)
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != len(users) {
			t.Errorf("%d users answered, want %d", len(all), len(users))
		}
		tied := 0
		for i := range users {
			u := &users[i]
			want, err := s.TieCandidates(ctx, u.Node, &u.User)
			if err != nil {
				t.Fatal(err)
			}
			got := all[store.TieKey(u.Node, &u.User)]
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s %s: %v, want %v", u.Node, u.User.Key(), got, want)
			}
			tied += len(got)
		}
		// By hand: n1, n2 and n3 each tie uid-1 to both pods (6); uid-3
		// only on n1, its registration's k8s_node in any case (1); job 77
		// on n1 to t-run and t-job, on n2 to t-job-n2 (3); the container
		// of host name abcdef012345 to t-docker on every node (3), not
		// with owner q; the other one to t-docker2 on n2, its k8s_node (1),
		// never to t-pod-docker of n2, which names a pod UID; job 79 on n1
		// to t-job-twice, once (1).
		if tied != 15 {
			t.Errorf("%d ties in all, want 15", tied)
		}
		// uid-1 on n1 and n3 over overlapping times ties on no node of the
		// window (its registrations name no node: a pod never moves, so one
		// of them forges it); uid-3 on n1 and n2 still ties on n1, its node.
		two := []store.UserHour{
			{Node: "n1", User: store.UserIdentity{PodUID: "uid-1"}, Hour: 0, LastTime: 3600},
			{Node: "n2", User: store.UserIdentity{PodUID: "uid-1"}, Hour: 3600, LastTime: 7200},
			{Node: "n3", User: store.UserIdentity{PodUID: "uid-1"}, Hour: 0, LastTime: 1800},
			{Node: "n1", User: store.UserIdentity{PodUID: "uid-3"}, Hour: 0, LastTime: 3600},
			{Node: "n2", User: store.UserIdentity{PodUID: "uid-3"}, Hour: 0, LastTime: 3600},
		}
		all, err = s.LedgerTies(ctx, two)
		if err != nil {
			t.Fatal(err)
		}
		for i, want := range []int{0, 0, 0, 1, 0} {
			if got := all[store.TieKey(two[i].Node, &two[i].User)]; len(got) != want {
				t.Errorf("%s %s on two nodes: %v, want %d ties", two[i].Node, two[i].User.PodUID, got, want)
			}
		}
	})
}
