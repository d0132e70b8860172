package store_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// TestReportTasksByDay: the month's tasks split by day are, day by day,
// what ReportTasks of that day lists (the same tasks, order, seconds,
// GPUs and labels), on both stores: the report fixture's November and
// random tasks around it (started before the month or in it, completed
// within a day, across days or after the month, open with heartbeats or
// none, seen after their completion), so the export may read the month's
// tasks once.
func TestReportTasksByDay(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := storetest.Open(t, dsn)
		loadFixture(t, s)
		rng := rand.New(rand.NewPCG(38, 20))
		from := november.From.Unix()
		for i := range 120 {
			id := fmt.Sprint("d", i)
			start := from - 5*86400 + rng.Int64N(37*86400)
			var gpus []wire.RegisteredGPU
			for j := range rng.IntN(3) {
				gpus = append(gpus, wire.RegisteredGPU{Index: ptrOf(int64(j)), UUID: fmt.Sprint("GPU-", i, "-", j), Name: "Tesla T4", Share: ptrOf(0.5)})
			}
			mustRegister(t, s, reg(id, fmt.Sprint("p", i%4), "ann", start, gpus...))
			switch rng.IntN(4) {
			case 0: // completed, up to three days on
				c, b := completionAt(id, 0, start, start+rng.Int64N(3*86400))
				mustComplete(t, s, c, b)
				if rng.IntN(2) == 0 {
					if err := s.Heartbeat(ctx, id, *c.EndTime+rng.Int64N(86400), nil); err != nil {
						t.Fatal(err)
					}
				}
			case 1: // open, seen up to two days on
				if err := s.Heartbeat(ctx, id, start+rng.Int64N(2*86400), nil); err != nil {
					t.Fatal(err)
				}
			case 2: // completed at its start
				c, b := completionAt(id, 1, start, start)
				mustComplete(t, s, c, b)
			} // else open, never seen again
		}
		days, err := s.ReportTasksByDay(ctx, november)
		if err != nil {
			t.Fatal(err)
		}
		if len(days) != 30 {
			t.Fatalf("%d days, want 30", len(days))
		}
		listed := 0
		for i, got := range days {
			day := facts.Window{From: november.From.AddDate(0, 0, i), To: november.From.AddDate(0, 0, i+1)}
			want, err := s.ReportTasks(ctx, day)
			if err != nil {
				t.Fatal(err)
			}
			listed += len(want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s: by day %d tasks, by its own read %d:\n got %+v\nwant %+v", day.From.Format(time.DateOnly), len(got), len(want), got, want)
			}
		}
		if listed < 100 {
			t.Errorf("only %d task-days listed: the test checks too little", listed)
		}
		for _, bad := range []facts.Window{
			{From: november.From.Add(time.Hour), To: november.To},
			{From: november.From, To: november.To.AddDate(0, 0, 2)},
		} {
			if _, err := s.ReportTasksByDay(ctx, bad); err == nil {
				t.Errorf("%v: no error", bad)
			}
		}
	})
}

// completionAt is a completion at end of a task started at start.
func completionAt(id string, exit, start, end int64) (*wire.Completion, []byte) {
	c := &wire.Completion{TaskID: id, EndTime: &end, DurationSeconds: ptrOf(float64(end - start)), ExitCode: &exit}
	b, _ := json.Marshal(c)
	return c, b
}
