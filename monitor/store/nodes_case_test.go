package store_test

import (
	"strconv"
	"testing"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// TestMigrateCaseTwins: a store of the schema before migration 0013, where
// one node reported as Gpu-Node-1 and gpu-node-1 and its GPU as GPU-ABC
// and GPU-abc, upgrades to one node and one GPU in canonical form on both
// engines: the hours added, the lives merged (open when either was), the
// node with the latest report kept, one raw report per time.
func TestMigrateCaseTwins(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		old, err := store.OpenAtVersionForTest(ctx, dsn, store.VersionBeforeForTest("0013"))
		if err != nil {
			t.Fatal(err)
		}
		db := store.DBForTest(old)
		for _, q := range []string{
			`INSERT INTO node_gpu_hours (hour, node, uuid, model, observed_s, unallocated_s, energy_j) VALUES
				(3600, 'Gpu-Node-1', 'GPU-ABC', 'm', 100, 10, 1), (3600, 'gpu-node-1', 'GPU-abc', 'm', 50, 5, 2),
				(3600, 'GPU-NODE-1', 'gpu-abc', 'm', 25, 0, 0), (7200, 'Gpu-Node-1', 'GPU-ABC', 'm', 7, 0, 0), (3600, 'gpu-node-2', 'GPU-abc', 'm', 1, 0, 0)`,
			`INSERT INTO node_user_hours (hour, node, uuid, gpu_instance_id, user_key, last_time, equal_s, util_s) VALUES
				(3600, 'Gpu-Node-1', 'GPU-ABC', -1, 'u', 3000, 30, 30), (3600, 'gpu-node-1', 'GPU-abc', -1, 'u', 3500, 20, 20)`,
			`INSERT INTO node_gpus (node, uuid, first_start, last_end, ended_at, model) VALUES
				('Gpu-Node-1', 'GPU-ABC', 0, 5000, NULL, 'm'), ('gpu-node-1', 'GPU-abc', 0, 4000, 4000, 'm'),
				('gpu-node-1', 'GPU-abc', 9000, 9500, 9500, 'm')`,
			`INSERT INTO nodes (node, last_time, interval_seconds, latest) VALUES ('Gpu-Node-1', 5000, 60, 'upper'), ('gpu-node-1', 4000, 60, 'lower')`,
			`INSERT INTO node_reports (node, time, interval_seconds, span_start, span_end, body, received_at) VALUES
				('Gpu-Node-1', 5000, 60, 4940, 5000, 'upper', 1), ('gpu-node-1', 5000, 60, 4940, 5000, 'lower', 1), ('Gpu-Node-1', 4000, 60, 3940, 4000, 'u', 1)`,
		} {
			if _, err := db.Exec(q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		old.Close()
		s := storetest.Open(t, dsn)
		db = store.DBForTest(s)
		rows := func(q string) []string {
			t.Helper()
			r, err := db.Query(q)
			if err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			defer r.Close()
			cols, _ := r.Columns()
			var out []string
			for r.Next() {
				vals := make([]any, len(cols))
				ptrs := make([]any, len(cols))
				for i := range vals {
					ptrs[i] = &vals[i]
				}
				if err := r.Scan(ptrs...); err != nil {
					t.Fatal(err)
				}
				line := ""
				for i, v := range vals {
					if i > 0 {
						line += " "
					}
					switch x := v.(type) {
					case []byte:
						line += string(x)
					case nil:
						line += "NULL"
					default:
						line += fmtNum(x)
					}
				}
				out = append(out, line)
			}
			return out
		}
		check := func(q string, want ...string) {
			t.Helper()
			got := rows(q)
			if len(got) != len(want) {
				t.Fatalf("%s:\n%q\nwant\n%q", q, got, want)
			}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("%s:\n%q\nwant\n%q", q, got, want)
				}
			}
		}
		check("SELECT hour, node, uuid, observed_s, unallocated_s, energy_j FROM node_gpu_hours ORDER BY hour, node",
			"3600 gpu-node-1 GPU-abc 175 15 3", "3600 gpu-node-2 GPU-abc 1 0 0", "7200 gpu-node-1 GPU-abc 7 0 0")
		check("SELECT node, uuid, last_time, equal_s FROM node_user_hours", "gpu-node-1 GPU-abc 3500 50")
		check("SELECT node, uuid, first_start, last_end, ended_at FROM node_gpus ORDER BY first_start",
			"gpu-node-1 GPU-abc 0 5000 NULL", "gpu-node-1 GPU-abc 9000 9500 9500")
		check("SELECT node, last_time, latest FROM nodes", "gpu-node-1 5000 upper")
		check("SELECT node, time FROM node_reports ORDER BY time", "gpu-node-1 4000", "gpu-node-1 5000")
	})
}

func fmtNum(v any) string {
	switch x := v.(type) {
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case string:
		return x
	}
	return "?"
}
