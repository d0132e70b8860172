package ledger

import (
	"strings"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/report"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
)

// The excess declared on over-committed GPUs, by hand (MONITOR.md 20.22),
// over [0, 5 h) at 10 a GPU-hour:
//   - GPU-s: a 0.5 [0, 4 h), b 0.5 [1 h, 5 h), c 0.25 [2 h, 3 h): 1.25 in
//     [2 h, 3 h) only, 0.25 GPU-hours above 1, 2.50 at stake;
//   - GPU-w: x 1 [0, 2 h), y 1 [1 h, open: to now = 3 h): 2 in [1 h, 2 h),
//     1 GPU-hour above 1, 10.00;
//   - GPU-k: three tasks at a third each, 1 but for rounding: not over,
//     no excess;
//   - GPU-u: x2 1 [0, 1 h), unpriced model: 0.5 GPU-hours above 1 with
//     y2 0.5 [0, 1 h), no money.
func TestExcessShares(t *testing.T) {
	const h = 3600
	end := func(v int64) *int64 { return &v }
	gpu := func(uuid, model string, share float64) []store.DeclaredGPU {
		return []store.DeclaredGPU{{UUID: uuid, Share: share, Model: model}}
	}
	tasks := []store.DeclaredTask{
		{TaskID: "a", Start: 0, End: end(4 * h), GPUs: gpu("GPU-s", "NVIDIA H200", 0.5)},
		{TaskID: "b", Start: h, End: end(5 * h), GPUs: gpu("GPU-s", "NVIDIA H200", 0.5)},
		{TaskID: "c", Start: 2 * h, End: end(3 * h), GPUs: gpu("GPU-s", "NVIDIA H200", 0.25)},
		{TaskID: "x", Start: 0, End: end(2 * h), GPUs: gpu("GPU-w", "NVIDIA H200", 1)},
		{TaskID: "y", Start: h, GPUs: gpu("GPU-w", "NVIDIA H200", 1)},
		{TaskID: "k1", Start: 0, End: end(5 * h), GPUs: gpu("GPU-k", "NVIDIA H200", 1.0/3)},
		{TaskID: "k2", Start: 0, End: end(5 * h), GPUs: gpu("GPU-k", "NVIDIA H200", 1.0/3)},
		{TaskID: "k3", Start: 0, End: end(5 * h), GPUs: gpu("GPU-k", "NVIDIA H200", 1.0/3)},
		{TaskID: "x2", Start: 0, End: end(h), GPUs: gpu("GPU-u", "Tesla T4", 1)},
		{TaskID: "y2", Start: 0, End: end(h), GPUs: gpu("GPU-u", "Tesla T4", 0.5)},
	}
	prices, err := report.ParsePrices(strings.NewReader(`{"currency":"CNY","models":{"NVIDIA H200":10}}`))
	if err != nil {
		t.Fatal(err)
	}
	xs := excessShares(tasks, 0, 5*h, 3*h, prices)
	for _, c := range []struct {
		uuid  string
		hours float64
		money *float64
	}{{"GPU-s", 0.25, ptr(2.5)}, {"GPU-w", 1, ptr(10)}, {"GPU-k", 0, nil}, {"GPU-u", 0.5, nil}} {
		o := Overcommit{UUID: c.uuid}
		o.stakeOf(xs, true)
		if o.ExcessGPUHours != c.hours || (o.MoneyAtStake == nil) != (c.money == nil) || (c.money != nil && *o.MoneyAtStake != *c.money) {
			t.Errorf("%s: excess %v GPU-hours, money %v; want %v, %v", c.uuid, o.ExcessGPUHours, o.MoneyAtStake, c.hours, c.money)
		}
	}
	// In the finance list: each over-committed GPU is an entry with its
	// money, sorted with the others (10 before 2.50 before the unpriced).
	d := &Discrepancies{From: time.Unix(0, 0), To: time.Unix(5*h, 0),
		Tasks: []TaskDiscrepancy{{TaskID: "t", Declared: 2, Observed: 1.5, MoneyAtStake: ptr(5), Differences: []string{"share or duration"}}}}
	for _, u := range []string{"GPU-s", "GPU-w", "GPU-u"} {
		o := Overcommit{UUID: u, Share: 1.25, Time: time.Unix(2*h, 0), Tasks: []TaskName{{TaskID: "a"}, {TaskID: "b"}}}
		o.stakeOf(xs, true)
		d.Overcommitted = append(d.Overcommitted, o)
	}
	var got []string
	for _, e := range d.Entries() {
		got = append(got, strings.Join(e.cells(), ","))
	}
	want := []string{
		"overcommitted,a b,,,,,,,,1,10.00,GPU-w declared 1.25 of itself from 1970-01-01T02:00:00Z",
		"task,t,,,,,,2,1.5,0.5,5.00,share or duration",
		"overcommitted,a b,,,,,,,,0.25,2.50,GPU-s declared 1.25 of itself from 1970-01-01T02:00:00Z",
		"overcommitted,a b,,,,,,,,0.5,,GPU-u declared 1.25 of itself from 1970-01-01T02:00:00Z",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("entries:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
