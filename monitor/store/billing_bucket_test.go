package store_test

import (
	"fmt"
	"testing"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// TestBillingBucketRows: a window of one whole bucket, read from its rows
// as stored and summed by node and user, gives the groups, figures and
// order the GROUP BY gives: a user on three GPUs of a node (one group,
// its report times the earliest and the latest), the same user on a MIG
// instance (a group of its own), another user and another node.
func TestBillingBucketRows(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := storetest.Open(t, dsn)
		db := store.DBForTest(s)
		h := hourT0
		for _, r := range []struct {
			node, uuid string
			gi         int64
			key        string
			last       int64
			eq, busy   float64
		}{
			{"node-b", "GPU-1", -1, "u2", h + 100, 3600, 1800},
			{"node-a", "GPU-3", -1, "u1", h + 300, 1200.25, 600},
			{"node-a", "GPU-1", -1, "u1", h + 200, 1200.5, 0},
			{"node-a", "GPU-2", -1, "u1", h + 100, 1200.125, 300},
			{"node-a", "GPU-2", 1, "u1", h + 400, 900, 900},
			{"node-a", "GPU-4", -1, "u0", h + 50, 60, 60},
		} {
			if _, err := db.Exec(store.BindForTest(s, `INSERT INTO node_user_hours (hour, node, uuid, gpu_instance_id, user_key, last_time,
				equal_s, busy_equal_s, energy_j, model) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'm')`),
				h, r.node, r.uuid, r.gi, r.key, r.last, r.eq, r.busy, r.busy*2+float64(r.last%7)); err != nil {
				t.Fatal(err)
			}
		}
		grouped, rows, err := store.BillingBucketBothWaysForTest(ctx, s, "hour", h)
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("node-a u0 mig=false m/ 0/0 %d-%d 60 60 121\n", h+50, h+50) +
			fmt.Sprintf("node-a u1 mig=false m/ 0/0 %d-%d 3600.875 900 1812\n", h+100, h+300) +
			fmt.Sprintf("node-a u1 mig=true m/ 0/0 %d-%d 900 900 1801\n", h+400, h+400) +
			fmt.Sprintf("node-b u2 mig=false m/ 0/0 %d-%d 3600 1800 3602", h+100, h+100)
		if rows != want || grouped != want {
			t.Errorf("read as stored:\n%s\ngrouped:\n%s\nwant:\n%s", rows, grouped, want)
		}
	})
}
