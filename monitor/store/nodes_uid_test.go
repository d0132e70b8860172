package store_test

import (
	"database/sql"
	"fmt"
	"strings"
	"testing"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// TestStoreNodeUID (NODE.md 12.10), on both engines: a report of node n1
// under a new Node UID (the Node deleted and recreated: a new machine)
// ends the old machine's GPU lives at its kept start and resolves their
// conflicts, so that GPU-a, which moved to n2, counts there and not on
// n1; a resend under another UID, a report without a UID (a static
// token) and a node's first UID after static reports change nothing.
func TestStoreNodeUID(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := storetest.Open(t, dsn)
		db := store.DBForTest(s)
		retire := store.DefaultNodeRetire
		t1 := hourT0 + 600
		send := func(r *wire.NodeReport, uid, status string, conflicts int) {
			t.Helper()
			w, err := s.StoreNodeReportFrom(ctx, r, uid, retire)
			if err != nil || w.Status != status || len(w.Conflicts) != conflicts {
				t.Fatalf("report %s at %d (uid %q): %+v, %v; want %s with %d conflicts", r.Node, r.Time, uid, w, err, status, conflicts)
			}
		}
		lives := func(node string, want ...string) {
			t.Helper()
			rows, err := db.Query(`SELECT uuid, first_start, last_end, COALESCE(ended_at, -1) FROM node_gpus WHERE node = '` + node + `'
				ORDER BY uuid, first_start`)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			var got []string
			for rows.Next() {
				var u string
				var a, b, e int64
				if err := rows.Scan(&u, &a, &b, &e); err != nil {
					t.Fatal(err)
				}
				end := "open"
				if e >= 0 {
					end = fmt.Sprintf("ended t1%+d", e-t1)
				}
				got = append(got, fmt.Sprintf("%s t1%+d..t1%+d %s", u, a-t1, b-t1, end))
			}
			if strings.Join(got, "; ") != strings.Join(want, "; ") {
				t.Errorf("lives of %s:\n got %s\nwant %s", node, strings.Join(got, "; "), strings.Join(want, "; "))
			}
		}
		uid := func(node, want string) {
			t.Helper()
			var got sql.NullString
			if err := db.QueryRow(`SELECT node_uid FROM nodes WHERE node = '` + node + `'`).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if g := got.String; g != want {
				t.Errorf("node_uid of %s = %s, want %s", node, g, want)
			}
		}

		send(wholeReport("n1", t1, 600, "GPU-a", "GPU-b"), "u-1", store.NodeCreated, 0)
		uid("n1", "u-1")
		// The card GPU-a went into n2 while n1's Node was still there: a
		// conflict, held by n1.
		send(wholeReport("n2", t1+600, 600, "GPU-a"), "", store.NodeCreated, 1)
		send(wholeReport("n1", t1+600, 600, "GPU-b"), "u-1", store.NodeCreated, 0)
		lives("n1", "GPU-a t1-600..t1+0 open", "GPU-b t1-600..t1+600 open")
		// n1 recreated: a new machine with GPU-c, its report's kept start
		// t1+600.
		send(wholeReport("n1", t1+1200, 600, "GPU-c"), "u-2", store.NodeCreated, 0)
		lives("n1", "GPU-a t1-600..t1+0 ended t1+600", "GPU-b t1-600..t1+600 ended t1+600", "GPU-c t1+600..t1+1200 open")
		uid("n1", "u-2")
		if c, err := s.GPUConflicts(ctx); err != nil || len(c) != 0 {
			t.Fatalf("GPUConflicts after n1 was recreated = %+v, %v", c, err)
		}
		// GPU-a counts on n2 from now on.
		send(wholeReport("n2", t1+1200, 600, "GPU-a"), "", store.NodeCreated, 0)
		lives("n2", "GPU-a t1+600..t1+1200 open")
		// A resend under another UID is the stored report: nothing ends.
		send(wholeReport("n1", t1+1200, 600, "GPU-c"), "u-3", store.NodeExists, 0)
		// A static token's report names no UID: the same machine.
		send(wholeReport("n1", t1+1800, 600, "GPU-c"), "", store.NodeCreated, 0)
		lives("n1", "GPU-a t1-600..t1+0 ended t1+600", "GPU-b t1-600..t1+600 ended t1+600", "GPU-c t1+600..t1+1800 open")
		uid("n1", "u-2")
		// A node that reported with a static token takes its first UID
		// without a retire.
		send(wholeReport("n3", t1, 600, "GPU-d"), "", store.NodeCreated, 0)
		send(wholeReport("n3", t1+600, 600, "GPU-d"), "u-9", store.NodeCreated, 0)
		lives("n3", "GPU-d t1-600..t1+600 open")
		uid("n3", "u-9")
	})
}
