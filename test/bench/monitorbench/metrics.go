package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"sort"
	"strings"
	"time"
)

var (
	metricsTasks = flag.Int("metrics-tasks", 20000, "metrics: open tasks stored (8 GPUs each)")
	metricsGPUs  = 8
)

var metricsScenario = scenario{
	name:  "metrics",
	title: "/metrics with open tasks of 8 GPUs each",
	header: []string{"open tasks (GPUs)", "bulk load", "`GET /metrics` (median of 3)", "size", "series",
		"`promtool check metrics`", "RSS at rest", "RSS serving /metrics (peak)"},
	run: runMetrics,
}

func runMetrics(e *env) ([][]string, error) {
	dsn, err := e.emptyStore()
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	started := time.Now()
	if err := loadOpenTasks(ctx, dsn, *metricsTasks); err != nil {
		return nil, fmt.Errorf("bulk load: %w", err)
	}
	load := time.Since(started).Round(100 * time.Millisecond)

	srv, err := e.startMonitor(dsn)
	if err != nil {
		return nil, err
	}
	defer srv.Stop()
	time.Sleep(time.Second)
	rest, err := procStatus(srv.Cmd.Process.Pid, "VmRSS")
	if err != nil {
		return nil, err
	}
	var times []time.Duration
	var body []byte
	for range 3 {
		t0 := time.Now()
		resp, err := http.Get(srv.URL + "/metrics")
		if err != nil {
			return nil, err
		}
		body, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != 200 {
			return nil, fmt.Errorf("/metrics: %d", resp.StatusCode)
		}
		times = append(times, time.Since(t0))
	}
	peak, err := procStatus(srv.Cmd.Process.Pid, "VmHWM")
	if err != nil {
		return nil, err
	}
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	gpuSeries := strings.Count(string(body), "\npaddle_task_gpu_info{")
	taskSeries := strings.Count(string(body), "\npaddle_task_info{")
	check := "promtool not installed"
	if _, err := exec.LookPath("promtool"); err == nil {
		cmd := exec.Command("promtool", "check", "metrics")
		cmd.Stdin = bytes.NewReader(body)
		out, err := cmd.CombinedOutput()
		switch {
		case err != nil:
			check = "**failed**: " + strings.ReplaceAll(strings.TrimSpace(firstLine(string(out))), "|", "/")
		case strings.TrimSpace(string(out)) != "":
			check = "**warnings**: " + strings.ReplaceAll(firstLine(string(out)), "|", "/")
		default:
			check = "clean"
		}
	}
	e.result("metrics.seconds", times[1].Seconds())
	return [][]string{{
		fmt.Sprintf("%d (%d)", *metricsTasks, *metricsTasks*metricsGPUs),
		load.String(),
		ms(times[1]),
		fmt.Sprintf("%.1f MiB", float64(len(body))/(1<<20)),
		fmt.Sprintf("%d task, %d GPU", taskSeries, gpuSeries),
		check,
		mib(rest),
		mib(peak),
	}}, nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// loadOpenTasks stores n open tasks of 8 GPUs each, started in the last
// day (inside --open-ttl), each on a node of its own.
func loadOpenTasks(ctx context.Context, dsn string, n int) error {
	now := time.Now().Unix()
	b, err := openBulk(ctx, dsn)
	if err != nil {
		return err
	}
	defer b.close()
	for i := range n {
		start := now - int64(i%86400)
		id := fmt.Sprintf("open-%06d", i)
		if _, err := b.add("tasks", map[string]any{"id": int64(i) + 1, "task_id": id, "task_name": "train",
			"project": fmt.Sprintf("project-%02d", i%50), "owner": fmt.Sprintf("user%03d@example.com", i%500),
			"priority": "normal", "env": "prod", "hostname": fmt.Sprintf("node-%05d", i), "start_time": start,
			"gpu_count": int64(metricsGPUs), "registration": "{}", "registered_at": start, "seen_at": start}); err != nil {
			return err
		}
		for g := range metricsGPUs {
			if _, err := b.add("task_gpus", map[string]any{"task_id": id, "task_key": int64(i) + 1, "position": int64(g),
				"gpu_index": int64(g), "uuid": fmt.Sprintf("GPU-%08d-%d", i, g), "model": "NVIDIA A100-SXM4-80GB",
				"memory_total": int64(85899345920), "task_start": start}); err != nil {
				return err
			}
		}
	}
	return b.finish()
}
