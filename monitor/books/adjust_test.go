package books

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/report"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
)

func i64(v int64) *int64 { return &v }

// TestAdjust: each late task's change of the closed month, priced by the
// report's rules; figures by hand (prices: A100 12/h, H200 whole 21/h, its
// 1g.18gb profile 2.5 an instance-hour, default 2/h).
func TestAdjust(t *testing.T) {
	prices, err := report.ParsePrices(strings.NewReader(`{"currency":"CNY","default":2,"models":{"NVIDIA A100*":12,"NVIDIA H200*":21,"NVIDIA H200 1g.18gb":2.5}}`))
	if err != nil {
		t.Fatal(err)
	}
	nov := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC).Unix()
	dec := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).Unix()
	a100 := []store.LateGPU{{Model: "NVIDIA A100-SXM4-80GB", Share: 1}}
	for _, c := range []struct {
		name string
		task store.LateTask
		want string // the adjustments' JSON
	}{
		{"late registration, 2 h on an A100", store.LateTask{TaskID: "a", Project: "p", Owner: "o", Start: nov + 3600,
			End: i64(nov + 3*3600), GPUs: a100, RegisteredLate: true},
			`[{"adjustment_of":"2026-11","project":"p","gpu_hours":2,"cost":24,"tasks":[{"task_id":"a","owner":"o","change":"late_registration","gpu_hours":2,"cost":24}]}]`},
		{"completed after the close: counted to its heartbeat (1 h), now to its end (4 h)", store.LateTask{TaskID: "b", Project: "p", Owner: "o",
			Start: nov, End: i64(nov + 4*3600), LastSeen: i64(nov + 3600), Before: true, BeforeLastSeen: i64(nov + 3600), GPUs: a100, CompletedAfterClose: true},
			`[{"adjustment_of":"2026-11","project":"p","gpu_hours":3,"cost":36,"tasks":[{"task_id":"b","owner":"o","change":"completed_after_close","gpu_hours":3,"cost":36}]}]`},
		{"a heartbeat past the month's end: only November's part counts (Nov 30 23:00 to Dec 1)", store.LateTask{TaskID: "c", Project: "p", Owner: "o",
			Start: dec - 3600, LastSeen: i64(dec + 5*3600), Before: true, GPUs: a100},
			`[{"adjustment_of":"2026-11","project":"p","gpu_hours":1,"cost":12,"tasks":[{"task_id":"c","owner":"o","change":"seen_after_close","gpu_hours":1,"cost":12}]}]`},
		{"unchanged: left out", store.LateTask{TaskID: "d", Project: "p", Owner: "o", Start: nov, LastSeen: i64(nov + 3600),
			Before: true, BeforeLastSeen: i64(nov + 3600), GPUs: a100}, `[]`},
		{"a MIG instance at its profile's price, 2 h; a device node at the default", store.LateTask{TaskID: "e", Project: "q", Owner: "o",
			Start: nov, End: i64(nov + 2*3600), GPUUnlisted: 1, GPUs: []store.LateGPU{{Model: "NVIDIA H200", Profile: "1g.18gb", MIG: true, Share: 1.0 / 7}},
			RegisteredLate: true},
			`[{"adjustment_of":"2026-11","project":"q","gpu_hours":2.285714,"cost":9,"tasks":[{"task_id":"e","owner":"o","change":"late_registration","gpu_hours":2.285714,"cost":9}]}]`},
		{"a task of another month: nothing", store.LateTask{TaskID: "f", Project: "p", Owner: "o", Start: dec + 3600, End: i64(dec + 7200),
			GPUs: a100, RegisteredLate: true}, `[]`},
	} {
		t.Run(c.name, func(t *testing.T) {
			adj, err := Adjust("2026-11", []store.LateTask{c.task}, prices)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := json.Marshal(adj)
			if string(got) != c.want {
				t.Errorf("got  %s\nwant %s", got, c.want)
			}
		})
	}
	if _, err := Adjust("2026-13", nil, prices); err == nil {
		t.Error("a month 13 was accepted")
	}
}

// TestScoped: a team's view of a closed month keeps its rows and adds
// them up; shares and means it cannot add are null.
func TestScoped(t *testing.T) {
	cost := func(v float64) *float64 { return &v }
	cny := "CNY"
	r := &report.Report{Currency: &cny, Rows: []report.Row{
		{Key: map[string]string{"project": "a", "owner": "x"}, Figures: report.Figures{Tasks: 2, GPUHours: 1.5, Cost: cost(3), UtilMean: cost(50)}},
		{Key: map[string]string{"project": "b", "owner": "x"}, Figures: report.Figures{Tasks: 1, GPUHours: 4, Cost: cost(8)}},
		{Key: map[string]string{"project": "a", "owner": "y"}, Figures: report.Figures{Tasks: 3, GPUHours: 0.25, Cost: cost(0.5)}},
	}, Total: report.Figures{Tasks: 6, GPUHours: 5.75, Cost: cost(11.5)}}
	got := scoped(r, func(p, _ string) bool { return p == "a" })
	if len(got.Rows) != 2 || got.Total.Tasks != 5 || got.Total.GPUHours != 1.75 || *got.Total.Cost != 3.5 || got.Total.UtilMean != nil {
		t.Errorf("scoped: %+v", got)
	}
	if len(r.Rows) != 3 || r.Total.Tasks != 6 {
		t.Errorf("the statement's report changed: %+v", r)
	}
}
