package store_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// TestBillingPlans: billing's reads of the roll-ups are served by the
// primary keys they name (the window's hours a range of their first
// column), on both stores, with a month of one hundred nodes of eight GPUs
// stored and statistics (a window of six of its hours: over most of a
// table a scan is the right plan).
func TestBillingPlans(t *testing.T) {
	if testing.Short() {
		t.Skip("stores a month of node reports")
	}
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := storetest.Open(t, dsn)
		loadNodeHours(t, s)
		db := store.DBForTest(s)
		for _, st := range store.BillingStatementsForTest(s, hourT0+48*3600, hourT0+54*3600) {
			t.Run(st.Name, func(t *testing.T) {
				checkPlan(t, db, s.Dialect(), st)
			})
		}
	})
}

// TestParseUserKey: a user's key splits back into the identity it joins,
// and a key that does not (a field holding the separator, a malformed
// UID) is refused, so that billing reads the identity's columns instead.
func TestParseUserKey(t *testing.T) {
	uid := int64(1000)
	for _, id := range []store.UserIdentity{
		{Runtime: "containerd", ContainerID: "c1", PodUID: "pod-1", Namespace: "team-a", Pod: "train-0", Container: "paddle"},
		{Runtime: "", Cgroup: "/user.slice/user-1000.slice", UID: &uid},
		{Runtime: "docker", ContainerID: "abc", Declared: true, DeclaredTaskID: "t", DeclaredProject: "p", DeclaredOwner: "o"},
		{SlurmJob: "42", UID: &uid, Declared: true},
	} {
		got, ok := store.ParseUserKeyForTest(id.Key())
		if !ok || got.Key() != id.Key() || (id.UID == nil) != (got.UID == nil) {
			t.Errorf("%+v: parsed %+v, %v", id, got, ok)
		}
	}
	for _, key := range []string{
		(&store.UserIdentity{Pod: "a\x1fb"}).Key(),
		strings.Replace((&store.UserIdentity{UID: &uid}).Key(), "1000", "01000", 1),
		strings.Replace((&store.UserIdentity{Declared: true}).Key(), "\x1fd\x1f", "\x1fx\x1f", 1),
		"",
	} {
		if got, ok := store.ParseUserKeyForTest(key); ok {
			t.Errorf("%q parsed as %+v", key, got)
		}
	}
}

// BenchmarkObservations: billing's observed part of a month of 1,000 GPUs
// (125 nodes of 8), one pod per GPU all month, each registered: 720,000
// hourly roll-up rows of users and as many of GPUs, on both stores. The
// scenario of 10,000 GPUs is test/bench/monitorbench's.
func BenchmarkObservations(b *testing.B) {
	for _, kind := range []string{"sqlite", "postgres"} {
		b.Run(kind, func(b *testing.B) {
			dsn := storetest.SQLiteDSN(b)
			if kind == "postgres" {
				dsn = storetest.PostgresDSN(b)
			}
			s := storetest.Open(b, dsn)
			const gpus, hours = 1000, 720
			series := "WITH RECURSIVE h(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM h WHERE i < %d) SELECT i FROM h"
			if s.Dialect() == store.Postgres {
				series = "SELECT i FROM generate_series(0, %d) AS h(i)"
			}
			db := store.DBForTest(s)
			for _, q := range []string{
				fmt.Sprintf(`INSERT INTO tasks (id, task_id, task_name, project, owner, start_time, gpu_count, registration, registered_at, token, seen_at,
					k8s_pod_uid, k8s_node, hostname) SELECT i + 1, 't-' || i, 'train', 'p' || (i %% 50), 'o', %d, 1, '{}', 1, 'tok', 1,
					'pod-' || i, 'node-' || (i / 8), 'h-' || i FROM (`+series+`) x`, hourT0, gpus-1),
				fmt.Sprintf(`INSERT INTO node_gpu_hours (hour, node, uuid, observed_s) SELECT %d + 3600 * (i / %d), 'node-' || ((i %% %d) / 8),
					'GPU-' || (i %% %d), 3600 FROM (`+series+`) x`, hourT0, gpus, gpus, gpus, gpus*hours-1),
				fmt.Sprintf(`INSERT INTO node_user_hours (hour, node, uuid, gpu_instance_id, user_key, pod_uid, last_time, equal_s, busy_equal_s)
					SELECT %d + 3600 * (i / %d), 'node-' || ((i %% %d) / 8), 'GPU-' || (i %% %d), -1, 'u' || (i %% %d), 'pod-' || (i %% %d),
					%d + 3600 * (i / %d) + 3600, 3600, 1800 FROM (`+series+`) x`, hourT0, gpus, gpus, gpus, gpus, gpus, hourT0, gpus, gpus*hours-1),
				"ANALYZE",
			} {
				if _, err := db.Exec(q); err != nil {
					b.Fatalf("%s: %v", q, err)
				}
			}
			w := facts.Window{From: time.Unix(hourT0, 0), To: time.Unix(hourT0+hours*3600, 0)}
			b.ResetTimer()
			for b.Loop() {
				obs, err := s.Observations(ctx, w)
				if err != nil {
					b.Fatal(err)
				}
				if len(obs.Tasks) != gpus {
					b.Fatalf("%d tasks observed, want %d", len(obs.Tasks), gpus)
				}
			}
		})
	}
}
