package main

// A request its client cancels while the database works on it is not a
// store error: paddle_monitor_requests_cancelled_total counts it, the
// log has it at debug, and paddle_monitor_store_errors_total stays 0 (so
// PaddleMonitorStoreErrors means the database).

import (
	"context"
	"database/sql"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

func TestClientCancelledHeartbeatIsNoStoreError(t *testing.T) {
	dsn := storetest.PostgresDSN(t)
	s := startServer(t, dsn, "--log-level", "debug")
	expect(t, s.do(t, registerReq(regBody("c-1", "p", "o", time.Now().Unix()-60), "")), 201, "")

	// Another session holds the tasks table: the heartbeat's statement
	// (one with GPU samples: its transaction runs under the request's
	// context) waits on the lock, in flight, until the client gives up.
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.Exec("LOCK TABLE tasks IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", s.URL+"/v1/task/heartbeat",
		strings.NewReader(`{"task_id":"c-1","time":`+strconv.FormatInt(time.Now().Unix(), 10)+
			`,"interval_seconds":60,"gpus":[{"uuid":"GPU-c-1","samples":6,"util_mean":50}]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "c-1/heartbeat/1")
	done := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	// Wait until the heartbeat's statement is waiting on the lock.
	u, _ := url.Parse(dsn)
	name := strings.TrimPrefix(u.Path, "/")
	deadline := time.Now().Add(20 * time.Second)
	for {
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND wait_event_type = 'Lock'`, name).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the heartbeat never waited on the lock:\n%s", s.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatal("the cancelled request got an answer")
	}
	s.waitLog(t, `"msg":"request cancelled by the client"`)
	tx.Rollback()

	m := string(s.do(t, get("/metrics", "")).Body)
	for _, want := range []string{
		`paddle_monitor_requests_cancelled_total{operation="heartbeat"} 1`,
		`paddle_monitor_store_errors_total{operation="heartbeat"} 0`,
		`paddle_monitor_requests_cancelled_total{operation="register"} 0`,
		"# TYPE paddle_monitor_requests_cancelled_total counter",
	} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	log := s.Log()
	if strings.Contains(log, `"msg":"store error"`) {
		t.Errorf("a cancelled request logged as a store error:\n%s", log)
	}
	if !strings.Contains(log, `"level":"DEBUG","msg":"request cancelled by the client","logger":"paddle-monitor","operation":"heartbeat"`) {
		t.Errorf("the cancellation is not logged at debug with its operation:\n%s", log)
	}
	// The same heartbeat, not cancelled, goes through.
	expect(t, s.do(t, post("/v1/task/heartbeat", `{"task_id":"c-1","time":`+strconv.FormatInt(time.Now().Unix(), 10)+`}`, "")), 200, "")
}
