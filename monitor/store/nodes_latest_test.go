package store_test

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// TestNodesSeen: the nodes listed are those not retired whose latest
// report is recent enough, each with its latest report's time and
// interval; the latest report is the newest stored, whatever the order of
// arrival; a node that never reported is ErrUnknownNode.
func TestNodesSeen(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := storetest.Open(t, dsn)
		ctx := context.Background()
		put := func(node string, at, interval int64, uuids ...string) {
			t.Helper()
			if _, err := s.StoreNodeReport(ctx, wholeReport(node, at, interval, uuids...), store.DefaultNodeRetire); err != nil {
				t.Fatal(err)
			}
		}
		put("b-node", hourT0+120, 60, "GPU-b")
		put("b-node", hourT0+60, 60, "GPU-b") // late: not the latest
		put("a-node", hourT0+30, 30, "GPU-a1", "GPU-a2")
		put("old-node", hourT0-7200, 60, "GPU-o")
		put("gone-node", hourT0, 60, "GPU-g")
		if _, err := s.RetireNode(ctx, "gone-node", hourT0+10); err != nil {
			t.Fatal(err)
		}
		got, err := s.NodesSeen(ctx, hourT0-3600)
		if err != nil {
			t.Fatal(err)
		}
		want := []store.NodeSeen{{Node: "a-node", LastTime: hourT0 + 30, IntervalSeconds: 30}, {Node: "b-node", LastTime: hourT0 + 120, IntervalSeconds: 60}}
		if !slices.Equal(got, want) {
			t.Errorf("NodesSeen = %+v, want %+v", got, want)
		}
		r, err := s.LatestNodeReport(ctx, "b-node")
		if err != nil || r.Time != hourT0+120 || len(r.Instances) != 1 || r.Instances[0].Users[0].PodUID != "pod-GPU-b" {
			t.Errorf("LatestNodeReport(b-node) = %+v, %v; want the report of %d", r, err, hourT0+120)
		}
		if _, err := s.LatestNodeReport(ctx, "never"); !errors.Is(err, store.ErrUnknownNode) {
			t.Errorf("LatestNodeReport(never) = %v, want ErrUnknownNode", err)
		}
		// A retired node that reports again is seen again.
		put("gone-node", hourT0+600, 60, "GPU-g")
		if got, err := s.NodesSeen(ctx, hourT0-3600); err != nil || len(got) != 3 || got[2].Node != "gone-node" {
			t.Errorf("after a new report of a retired node: %+v, %v", got, err)
		}
	})
}

// TestNodeLatestPlans: the reads of the latest reports use the nodes
// table's primary key on both stores, with 20,000 nodes and a month of
// roll-ups stored and statistics. Listing the nodes reads the nodes table
// whole (one row per node is the answer: 10,000 rows for a 10,000-node
// fleet), never another table.
func TestNodeLatestPlans(t *testing.T) {
	if testing.Short() {
		t.Skip("stores a month of node reports")
	}
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := storetest.Open(t, dsn)
		loadNodeHours(t, s)
		db := store.DBForTest(s)
		other := regexp.MustCompile(`\b(node_reports|node_gpus|node_gpu_hours|node_user_hours|tasks)\b`)
		for _, st := range store.NodeLatestStatementsForTest(s) {
			t.Run(st.Name, func(t *testing.T) {
				text := strings.Join(explain(t, db, s.Dialect(), st), "\n")
				if other.MatchString(text) {
					t.Fatalf("reads another table than nodes:\n%s", text)
				}
				if !strings.Contains(text, "nodes") {
					t.Fatalf("does not read nodes:\n%s", text)
				}
				if st.Index == "" {
					return // the whole table is the answer
				}
				uses := regexp.MustCompile(`(Index Scan|Index Only Scan) using ` + st.Index + ` on nodes`)
				if s.Dialect() == store.SQLite {
					uses = regexp.MustCompile(`SEARCH nodes USING (COVERING )?INDEX ` + st.Index + `\b`)
				}
				if !uses.MatchString(text) {
					t.Fatalf("does not use %s:\n%s\n%s", st.Index, st.SQL, text)
				}
			})
		}
	})
}
