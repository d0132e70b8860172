package main

// Tasks that can never end on their own: an open task that reported
// nothing since its start (exec mode: no heartbeat, no completion) reads
// "no end reported" on the page rather than running, and leaves /metrics
// --exec-ttl after its start unless a heartbeat shows it alive.

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

func TestExecModeTasksLeaveAfterExecTTL(t *testing.T) {
	s := startServer(t, storetest.SQLiteDSN(t), "--exec-ttl", "1h")
	now := time.Now()
	// exec-old: silent for 2 h (past 1 h); beating: as old, but a heartbeat
	// a minute ago; exec-new: silent, started 30 minutes ago.
	for _, c := range []struct {
		id    string
		start time.Time
	}{{"exec-old", now.Add(-2 * time.Hour)}, {"beating", now.Add(-2 * time.Hour)}, {"exec-new", now.Add(-30 * time.Minute)}} {
		expect(t, s.do(t, registerReq(regBody(c.id, "p", "o@example.com", c.start.Unix()), "")), 201, "")
	}
	expect(t, s.do(t, post("/v1/task/heartbeat", `{"task_id":"beating","time":`+strconv.FormatInt(now.Add(-time.Minute).Unix(), 10)+`}`, "")), 200, "")

	m := string(s.do(t, get("/metrics", "")).Body)
	for id, want := range map[string]bool{"exec-old": false, "beating": true, "exec-new": true} {
		if got := strings.Contains(m, `task_id="`+id+`"`); got != want {
			t.Errorf("%s on /metrics: %v, want %v", id, got, want)
		}
	}
	page := string(s.do(t, request{Method: "GET", Path: "/", NoSpecCheck: true}).Body)
	running := page[strings.Index(page, "<h2>Running tasks</h2>"):]
	rows := map[string]string{}
	for _, line := range strings.Split(running, "\n") {
		for _, id := range []string{"exec-old", "beating", "exec-new"} {
			if strings.Contains(line, `title="`+id+`"`) {
				rows[id] = line
			}
		}
	}
	if _, ok := rows["exec-old"]; ok {
		t.Errorf("a silent task past --exec-ttl is on the page: %s", rows["exec-old"])
	}
	if !strings.HasSuffix(rows["exec-new"], "<td>no end reported</td></tr>") {
		t.Errorf("the silent task reads %q, want no end reported", rows["exec-new"])
	}
	if rows["beating"] == "" || strings.Contains(rows["beating"], "no end reported") {
		t.Errorf("the task with a heartbeat reads %q, want its last heartbeat", rows["beating"])
	}
	if !strings.Contains(running, "exec mode") || !strings.Contains(running, "Supervise mode") {
		t.Errorf("the page does not say why and what to do:\n%s", running)
	}
	if r := runMonitor(t, "serve", "--exec-ttl", "0s"); r.code != 2 || !strings.Contains(r.stderr, "exec-ttl") {
		t.Errorf("--exec-ttl 0s: exit %d %s", r.code, r.stderr)
	}
}

// TestExecModeTaskObservedStays: a task that reports nothing itself (exec
// mode) but whose pod a node report tied to it within --exec-ttl stays on
// /metrics past the TTL; a silent task of the same age beside it leaves.
func TestExecModeTaskObservedStays(t *testing.T) {
	s := startServer(t, storetest.SQLiteDSN(t), "--tokens", nodeTokens(t), "--exec-ttl", "1h")
	now := time.Now()
	start := now.Add(-2 * time.Hour).Unix()
	for _, c := range []struct{ id, where string }{
		{"observed", `"hostname":"observed-0","k8s_pod_uid":"pod-obs","k8s_node":"gpu-node-1"`},
		{"silent", `"hostname":"silent-0","k8s_pod_uid":"pod-silent","k8s_node":"gpu-node-2"`},
	} {
		reg := `{"schema_version":1,"task_id":"` + c.id + `","task_name":"train","project":"p","owner":"o@example.com","start_time":` +
			strconv.FormatInt(start, 10) + `,` + c.where + `,"labels":{},"gpu_count":1,"gpus":[]}`
		expect(t, s.do(t, registerReq(reg, "a-secret")), 201, "")
	}
	end := now.Unix() - 60
	rep := `{"schema_version":1,"node":"gpu-node-1","time":` + strconv.FormatInt(end, 10) + `,"interval_seconds":60,"agent_version":"test",
		"samples":6,"final":false,"gpus":[],"instances":[{"uuid":"GPU-obs","gpu_instance_id":null,"name":"NVIDIA H200","samples":6,
		"busy_share":1,"busy_basis":"utilization","occupied_share":1,"energy_joules":null,"users":[{"runtime":"containerd",
		"container_id":"c-obs","pod_uid":"pod-obs","namespace":"team-a","pod":"train-0","container":"paddle","allocated_share":1,
		"seen_share":1,"busy_share":1,"declared":null}]}]}`
	expect(t, s.do(t, post("/v1/nodes/report", rep, "n-secret")), 201, "")

	m := string(s.do(t, get("/metrics", "")).Body)
	for id, want := range map[string]bool{"observed": true, "silent": false} {
		if got := strings.Contains(m, `task_id="`+id+`"`); got != want {
			t.Errorf("%s on /metrics: %v, want %v", id, got, want)
		}
	}
}
