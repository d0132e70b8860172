package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // "pgx", for the bulk load

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/monitorproc"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
)

var (
	nodeDays  = flag.Int("node-days", 30, "nodes: days of hourly roll-ups bulk-loaded before the second measurement")
	nodeCount = flag.Int("node-count", 1000, "nodes: nodes of 8 GPUs whose roll-ups are bulk-loaded")
)

var nodesScenario = scenario{
	name:  "nodes",
	title: "Node reports (8 instances × 2 users) from 50 clients",
	header: []string{"floor: reports/s", "reports/s (empty store)", "vs floor", "p50 / p99", "monitor CPU per report", "roll-ups stored",
		"reports/s (with them)", "monitor CPU per report", "vs empty", "errors"},
	run: runNodes,
}

// nodeReportBody is a report of node (one of the clients) at the n-th
// minute after base: 8 whole GPUs, each used by two pods.
func nodeReportBody(node string, t int64) string {
	var ins []string
	for g := range 8 {
		ins = append(ins, fmt.Sprintf(`{"uuid":"GPU-%s-%d","gpu_instance_id":null,"name":"NVIDIA H200","samples":12,"busy_share":0.9,`+
			`"busy_basis":"utilization","occupied_share":1,"energy_joules":30000,"users":[`+
			`{"runtime":"containerd","container_id":"%s%d0a","pod_uid":"pod-%s-%d-a","namespace":"team-a","pod":"train-%d","container":"paddle","allocated_share":1,"seen_share":1,"busy_share":0.9,"sm_util_mean":80,"declared":null},`+
			`{"runtime":"containerd","container_id":"%s%d0b","pod_uid":"pod-%s-%d-b","namespace":"team-b","pod":"eval-%d","container":"paddle","allocated_share":0.5,"seen_share":0.5,"busy_share":0.4,"sm_util_mean":20,"declared":null}]}`,
			node, g, node, g, node, g, g, node, g, node, g, g))
	}
	var gpus []string
	for g := range 8 {
		gpus = append(gpus, fmt.Sprintf(`{"uuid":"GPU-%s-%d","energy_joules":30000}`, node, g))
	}
	return fmt.Sprintf(`{"schema_version":1,"node":%q,"time":%d,"interval_seconds":60,"agent_version":"bench","samples":12,"final":false,`+
		`"gpus":[%s],"instances":[%s]}`, node, t, strings.Join(gpus, ","), strings.Join(ins, ","))
}

// nodeReports sends each client's node's reports, a minute apart from
// base (every report new: 201).
func nodeReports(url, prefix string, base int64) writeLoad {
	return sustain(url, *writeClients, *writeDuration, http.StatusCreated, func(c, n int) (string, string, string) {
		node := fmt.Sprintf("%s-%02d", prefix, c)
		return "/v1/nodes/report", nodeReportBody(node, base+int64(n)*60), node
	})
}

func runNodes(e *env) ([][]string, error) {
	dsn, err := e.newDSN()
	if err != nil {
		return nil, err
	}
	// Reports end up to a day before now (within the 24 h the monitor
	// accepts ahead, whatever the rate).
	base := time.Now().Unix()/60*60 - 86400
	start := func(dsn string) (*monitorproc.Proc, error) {
		return e.startMonitor(dsn)
	}
	floorURL, stopFloor, err := startFloor()
	if err != nil {
		return nil, err
	}
	floor := nodeReports(floorURL, "bench-node", base)
	stopFloor()
	srv, err := start(dsn)
	if err != nil {
		return nil, err
	}
	cpu0 := cpuTime(srv.Cmd.Process.Pid)
	empty := nodeReports(srv.URL, "bench-node", base)
	emptyCPU := cpuPer(cpuTime(srv.Cmd.Process.Pid)-cpu0, empty)
	srv.Stop()

	loaded, err := e.emptyStore()
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "monitorbench: bulk-loading %d days of %d nodes' roll-ups on %s\n", *nodeDays, *nodeCount, e.store)
	rows, err := loadRollups(loaded, *nodeDays, *nodeCount, base)
	if err != nil {
		return nil, fmt.Errorf("bulk load of roll-ups: %w", err)
	}
	srv, err = start(loaded)
	if err != nil {
		return nil, err
	}
	cpu0 = cpuTime(srv.Cmd.Process.Pid)
	full := nodeReports(srv.URL, "bench-node", base)
	fullCPU := cpuPer(cpuTime(srv.Cmd.Process.Pid)-cpu0, full)
	srv.Stop()
	e.result("nodes.floor", floor.rate)
	e.result("nodes.empty", empty.rate)
	e.result("nodes.full", full.rate)
	return [][]string{append(empty.againstFloor(floor),
		emptyCPU,
		fmt.Sprintf("%d", rows),
		fmt.Sprintf("%.0f (p50 %s, p99 %s)", full.rate, ms(full.p50), ms(full.p99)),
		fullCPU,
		fmt.Sprintf("%+.0f %%", (full.rate/empty.rate-1)*100),
		fmt.Sprint(empty.errors+full.errors),
	)}, nil
}

// loadRollups stores days × 24 hours of roll-ups of nodes nodes of 8 GPUs
// with two users each, ending before base, in one statement per table.
func loadRollups(dsn string, days, nodes int, base int64) (int, error) {
	driver, src := "sqlite", sqliteSource(dsn)
	series := "WITH RECURSIVE h(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM h WHERE i < %d) SELECT i FROM h"
	if store.IsPostgresDSN(dsn) {
		driver, src = "pgx", dsn
		series = "SELECT i FROM generate_series(0, %d) AS h(i)"
	}
	db, err := sql.Open(driver, src)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	first := (base - int64(days)*86400) / 3600 * 3600
	gpus := nodes * 8
	hours := days * 24
	n := gpus * hours
	ctx := context.Background()
	for _, q := range []string{
		fmt.Sprintf(`INSERT INTO node_gpu_hours (hour, node, uuid, model, observed_s, unallocated_s, energy_j)
			SELECT %d + 3600 * (i / %d), 'load-' || ((i %% %d) / 8), 'GPU-load-' || (i %% %d), 'NVIDIA H200', 3600, 0, 1e6
			FROM (`+series+`) x`, first, gpus, gpus, gpus, n-1),
		fmt.Sprintf(`INSERT INTO node_user_hours (hour, node, uuid, gpu_instance_id, user_key, model, pod_uid, namespace, last_time, equal_s, util_s, busy_equal_s, busy_util_s)
			SELECT %d + 3600 * (i / %d), 'load-' || ((i %% %d) / 8), 'GPU-load-' || ((i / 2) %% %d), -1, 'user-' || (i %% 2), 'NVIDIA H200',
			'pod-' || (i %% %d), 'team-a', %d + 3600 * (i / %d), 1800, 1800, 900, 900
			FROM (`+series+`) x`, first, 2*gpus, 2*gpus, gpus, 2*gpus, first, 2*gpus, 2*n-1),
		fmt.Sprintf(`INSERT INTO node_gpus (node, uuid, first_start, last_end, model)
			SELECT 'load-' || (i / 8), 'GPU-load-' || i, %d, %d, 'NVIDIA H200' FROM (`+series+`) x`, first, base, gpus-1),
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return 0, fmt.Errorf("%.60s…: %w", q, err)
		}
	}
	// The day and month facts of those hours, as the write path keeps them
	// (and as migration 17 fills them).
	month := "CAST(strftime('%s', hour, 'unixepoch', 'start of month') AS INTEGER)"
	if store.IsPostgresDSN(dsn) {
		month = "CAST(EXTRACT(EPOCH FROM date_trunc('month', to_timestamp(hour) AT TIME ZONE 'UTC')) AS BIGINT)"
	}
	for _, g := range [][2]string{{"day", "hour - hour % 86400"}, {"month", month}} {
		for _, q := range []string{
			`INSERT INTO node_gpu_` + g[0] + `s (` + g[0] + `, node, uuid, model, observed_s, unallocated_s, energy_j)
				SELECT ` + g[1] + `, node, uuid, MAX(model), SUM(observed_s), SUM(unallocated_s), SUM(energy_j)
				FROM node_gpu_hours GROUP BY 1, node, uuid`,
			`INSERT INTO node_user_` + g[0] + `s (` + g[0] + `, node, uuid, gpu_instance_id, user_key, model, pod_uid, namespace, first_time,
				last_time, equal_s, util_s, busy_equal_s, busy_util_s)
				SELECT ` + g[1] + `, node, uuid, gpu_instance_id, user_key, MAX(model), MAX(pod_uid), MAX(namespace), MIN(last_time),
				MAX(last_time), SUM(equal_s), SUM(util_s), SUM(busy_equal_s), SUM(busy_util_s)
				FROM node_user_hours GROUP BY 1, node, uuid, gpu_instance_id, user_key`,
		} {
			if _, err := db.ExecContext(ctx, q); err != nil {
				return 0, fmt.Errorf("%.60s…: %w", q, err)
			}
		}
	}
	for _, q := range []string{
		"ANALYZE",
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return 0, fmt.Errorf("%.60s…: %w", q, err)
		}
	}
	return 3 * n, nil
}
