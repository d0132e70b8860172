package store_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// spansOf lists node_spans as "uuid [start,end)" lines, relative to t0.
func spansOf(t *testing.T, s *store.Store, t0 int64) []string {
	t.Helper()
	rows, err := store.DBForTest(s).Query("SELECT uuid, span_start, span_end FROM node_spans ORDER BY uuid, span_start")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var uuid string
		var a, b int64
		if err := rows.Scan(&uuid, &a, &b); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%q [%d,%d)", uuid, a-t0, b-t0))
	}
	return out
}

// TestNodeSpans: the write path keeps each node's and GPU's covered spans,
// merging a report's span with the one it continues and the one that
// follows it, cut at UTC days; a GPU listed without samples has no span.
func TestNodeSpans(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := storetest.Open(t, dsn)
		day := hourT0 - hourT0%86400 + 86400 // a UTC midnight
		store1 := func(end, interval int64, uuids ...string) {
			t.Helper()
			r := wholeReport("n1", end, interval, uuids...)
			if len(uuids) > 1 {
				r.Instances[1].Samples = 0
			}
			if _, err := s.StoreNodeReport(ctx, r, store.DefaultNodeRetire); err != nil {
				t.Fatal(err)
			}
		}
		store1(day-1200, 600, "GPU-a")         // [-1800, -1200)
		store1(day-600, 600, "GPU-a", "GPU-b") // [-1200, -600): GPU-b without samples
		store1(day+600, 600, "GPU-a")          // [0, 600) after a gap
		store1(day, 600, "GPU-a")              // [-600, 0): fills the gap, cut at midnight
		store1(day+1800, 600, "GPU-a")         // [1200, 1800)
		store1(day+1200, 600, "GPU-a")         // [600, 1200): joins both sides
		got := spansOf(t, s, day)
		want := []string{`"" [-1800,0)`, `"" [0,1800)`, `"GPU-a" [-1800,0)`, `"GPU-a" [0,1800)`}
		if !slices.Equal(got, want) {
			t.Errorf("spans:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
}

// TestMigrateSpansFromVersion11: a store of the schema before node_spans
// upgrades with the spans of the raw reports it holds (the node's, and
// each GPU listed with samples) and, for hours older than them, of the
// hourly roll-ups (covered from the hour's start).
func TestMigrateSpansFromVersion11(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		old, err := store.OpenAtVersionForTest(ctx, dsn, 11)
		if err != nil {
			t.Fatal(err)
		}
		db := store.DBForTest(old)
		for _, q := range []string{
			fmt.Sprintf(`INSERT INTO node_reports (node, time, interval_seconds, span_start, span_end, body, received_at)
				VALUES ('n1', %d, 600, %d, %d, '{"instances":[{"uuid":"GPU-a","samples":6},{"uuid":"GPU-b","samples":0}]}', 1)`,
				hourT0+3600+600, hourT0+3600, hourT0+3600+600),
			fmt.Sprintf(`INSERT INTO node_gpu_hours (hour, node, uuid, observed_s) VALUES (%d, 'n1', 'GPU-a', 1200)`, hourT0),
			fmt.Sprintf(`INSERT INTO node_gpu_hours (hour, node, uuid, observed_s) VALUES (%d, 'n1', 'GPU-a', 600)`, hourT0+3600),
		} {
			if _, err := db.Exec(q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		old.Close()
		s := storetest.Open(t, dsn)
		got := spansOf(t, s, hourT0)
		want := []string{`"" [0,1200)`, `"" [3600,4200)`, `"GPU-a" [0,1200)`, `"GPU-a" [3600,4200)`}
		if !slices.Equal(got, want) {
			t.Errorf("spans after the upgrade:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
}
