package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"time"
)

var (
	yearTasks  = flag.Int("year-tasks", 1000000, "year: tasks a month, over 12 closed months and the open one")
	yearMonths = flag.Int("year-months", 13, "year: months stored, all closed but the last")
)

var yearScenario = scenario{
	name:  "year",
	title: "A year of data: closed months and the open one",
	header: []string{"stored tasks (GPU rows)", "bulk load", "closing all but the last", "closed month's `report` (median of 3)",
		"open month's `report` (median of 3)", "the open month's tasks"},
	run: runYear,
}

// The year: -year-months months from January 2025 (13: to January 2026),
// -year-tasks a month, start times spread evenly over each month; every
// tenth task has no completion (half of those with a heartbeat), a fifth of
// the completed ones failed. All months but the last are closed
// (`paddle-monitor close`), the last is the open month; the reports ask for
// the first month (closed) and the last.
var yearStart = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func runYear(e *env) ([][]string, error) {
	dsn, err := e.emptyStore()
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	fmt.Fprintf(os.Stderr, "monitorbench: bulk-loading %d months of %d tasks on %s\n", *yearMonths, *yearTasks, e.store)
	started := time.Now()
	rows, tasks := 0, 0
	rng := rand.New(rand.NewPCG(3, 4))
	for m := range *yearMonths {
		b, err := openBulk(ctx, dsn)
		if err != nil {
			return nil, err
		}
		from := yearStart.AddDate(0, m, 0).Unix()
		span := yearStart.AddDate(0, m+1, 0).Unix() - from
		for i := range *yearTasks {
			t := yearTask(rng, tasks, from+int64(i)*span/int64(*yearTasks))
			tasks++
			n, err := addTask(b, t)
			if err != nil {
				b.close()
				return nil, err
			}
			rows += n
		}
		if err := b.finish(); err != nil {
			b.close()
			return nil, err
		}
		b.close()
		fmt.Fprintf(os.Stderr, "monitorbench: month %d loaded (%s)\n", m+1, time.Since(started).Round(time.Second))
	}
	load := time.Since(started).Round(time.Second)

	started = time.Now()
	for m := range *yearMonths - 1 {
		month := yearStart.AddDate(0, m, 0).Format("2006-01")
		if out, err := exec.Command(e.opts.monitor, "close", "--db", dsn, "--month", month, "--as", "bench").CombinedOutput(); err != nil {
			return nil, fmt.Errorf("close --month %s: %v: %s", month, err, out)
		}
	}
	closing := time.Since(started).Round(100 * time.Millisecond)

	timeReport := func(month string) (time.Duration, []byte, error) {
		wall, _, out, err := e.median3("report", "--db", dsn, "--month", month, "--format", "json")
		return wall, out, err
	}
	closed, out, err := timeReport(yearStart.Format("2006-01"))
	if err != nil {
		return nil, err
	}
	var rep struct {
		Closed any `json:"closed"`
		Total  struct {
			Tasks int64 `json:"tasks"`
		} `json:"total"`
	}
	if json.Unmarshal(out, &rep) != nil || rep.Closed == nil {
		return nil, fmt.Errorf("the closed month's report is not its statement: %.200s", out)
	}
	open, out, err := timeReport(yearStart.AddDate(0, *yearMonths-1, 0).Format("2006-01"))
	if err != nil {
		return nil, err
	}
	rep.Closed = nil
	if err := json.Unmarshal(out, &rep); err != nil || rep.Closed != nil {
		return nil, fmt.Errorf("the open month's report: %v %.200s", err, out)
	}
	e.result("year.closed", closed.Seconds())
	e.result("year.open", open.Seconds())
	return [][]string{{
		fmt.Sprintf("%d (%d)", tasks, rows), load.String(), closing.String(), ms(closed), ms(open), fmt.Sprint(rep.Total.Tasks),
	}}, nil
}

// yearTask is the task number i, starting at start.
func yearTask(rng *rand.Rand, i int, start int64) *benchTask {
	return randomTask(rng, fmt.Sprintf("year-%08d", i), i, start)
}

// randomTask is the task number i of a generated fleet, named id and
// starting at start: its project, owner, node, GPUs and length drawn from
// rng in one fixed order (so that a seed gives the same fleet), and its
// end by i (one task in ten still running, half of those lost).
func randomTask(rng *rand.Rand, id string, i int, start int64) *benchTask {
	t := &benchTask{
		id:      id,
		key:     int64(i) + 1,
		project: fmt.Sprintf("project-%02d", rng.IntN(50)),
		owner:   fmt.Sprintf("user%03d@example.com", rng.IntN(500)),
		host:    fmt.Sprintf("node-%03d", rng.IntN(200)),
		start:   start,
		gpus:    int64(benchGPUs[rng.IntN(len(benchGPUs))]),
		est:     int64(1+rng.IntN(12)) * 3600,
	}
	length := int64(600 + rng.IntN(10*3600))
	switch {
	case i%10 == 9 && i%20 == 19:
		seen := t.start + length
		t.lastSeen = &seen
	case i%10 == 9:
	default:
		end := t.start + length
		exit := int64(0)
		if rng.IntN(5) == 0 {
			exit = 1
		}
		t.end, t.exit, t.dur = &end, &exit, float64(length)
	}
	for range t.gpus {
		t.models = append(t.models, benchModel[rng.IntN(len(benchModel))])
		t.util = append(t.util, rng.Float64()*100)
		t.idle = append(t.idle, rng.Float64()/2)
	}
	return t
}

// addTask queues a task and its GPUs (no UUID: the year's reports do not
// read claims) and returns the GPU rows.
func addTask(b *bulk, t *benchTask) (int, error) {
	var completion any
	if t.end != nil {
		completion = "{}"
	}
	seen := t.start
	if t.lastSeen != nil && *t.lastSeen > seen {
		seen = *t.lastSeen
	}
	if _, err := b.add("tasks", map[string]any{"id": t.key, "task_id": t.id, "task_name": "train", "project": t.project,
		"owner": t.owner, "hostname": t.host, "start_time": t.start, "gpu_count": t.gpus, "duration_est": t.est,
		"registration": "{}", "registered_at": t.start, "last_seen": t.lastSeen, "seen_at": seen, "end_time": t.end,
		"duration_seconds": nullIfOpen(t), "exit_code": t.exit, "completion": completion, "completed_at": t.end}); err != nil {
		return 0, err
	}
	for i, m := range t.models {
		samples, util, idle := sampled(t, i)
		if _, err := b.add("task_gpus", map[string]any{"task_key": t.key, "position": int64(i),
			"gpu_index": int64(i), "uuid": "", "model": m, "samples": samples, "util_mean": util,
			"idle_share": idle, "task_start": t.start, "task_end": t.end, "claim_ended": nil}); err != nil {
			return 0, err
		}
	}
	return len(t.models), nil
}
