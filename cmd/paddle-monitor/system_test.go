package main

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // "pgx", to drop the database

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// TestEntrypointForgedProjectIsDeadLettered: the real entrypoint, with a
// token scoped to search_*, starts a task claiming project=admin. The
// monitor answers 403, the entrypoint moves the registration to its dead
// letters (and still runs the command), and nothing is stored.
func TestEntrypointForgedProjectIsDeadLettered(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, storetest.SQLiteDSN(t), "--tokens", tokensFile(t, dir))
	tokenFile := filepath.Join(dir, "token")
	writeFile(t, tokenFile, "s-secret\n")
	env := []string{
		"PATH=/usr/bin:/bin",
		"PADDLE_MONITOR_URL=" + s.URL,
		"PADDLE_MONITOR_TOKEN_FILE=" + tokenFile,
		"PADDLE_SPOOL_PATH=" + filepath.Join(dir, "spool.db"),
		"PADDLE_LABELS_FILE=" + filepath.Join(dir, "labels"),
		"PADDLE_OWNER=ann@example.com",
	}
	run := func(extra []string, args ...string) ran {
		t.Helper()
		c := execCommand(bin.entrypoint, args...)
		c.Env = append(append([]string{}, env...), extra...)
		var out, errb strings.Builder
		c.Stdout, c.Stderr = &out, &errb
		c.Run()
		return ran{c.ProcessState.ExitCode(), out.String(), errb.String()}
	}
	r := run([]string{"PADDLE_PROJECT=admin", "PADDLE_TASK_ID=forged-1"}, "/bin/sh", "-c", "echo ran")
	if r.code != 0 || r.stdout != "ran\n" {
		t.Fatalf("the command did not run as asked: exit %d, stdout %q\n%s", r.code, r.stdout, r.stderr)
	}
	r = run(nil, "spool", "list", "--dead")
	if r.code != 0 || !strings.Contains(r.stdout, "forged-1") || !strings.Contains(r.stdout, "403") {
		t.Fatalf("spool list --dead: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// An allowed project from the same node is stored.
	r = run([]string{"PADDLE_PROJECT=search_ranking", "PADDLE_TASK_ID=fair-1"}, "/bin/true")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	m := s.do(t, get("/v1/tasks", "a-secret")).JSON(t)
	tasks := m["tasks"].([]any)
	if len(tasks) != 1 || tasks[0].(map[string]any)["task_id"] != "fair-1" {
		t.Fatalf("stored: %v", m)
	}
}

// burst sends n registrations at once (ids prefix-0 …) and returns the ids
// answered 2xx and the count of other answers (errors included).
func burst(x *exchanges, base, prefix string, n int) (ok []string, failed int) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("%s-%04d", prefix, i)
			a, err := x.send(base, registerReq(regBody(id, "burst", "ann@example.com", int64(1794700000+i)), ""))
			mu.Lock()
			defer mu.Unlock()
			if err == nil && a.Status/100 == 2 {
				ok = append(ok, id)
			} else {
				failed++
			}
		}()
	}
	wg.Wait()
	return ok, failed
}

// allIDs lists every stored task id through the API's pages.
func allIDs(t *testing.T, s *server) map[string]bool {
	t.Helper()
	ids := map[string]bool{}
	path := "/v1/tasks?limit=1000"
	for {
		a := s.do(t, get(path, ""))
		if a.Status != 200 {
			t.Fatalf("listing: %d %s", a.Status, a.Body)
		}
		var page struct {
			Tasks []struct {
				TaskID string `json:"task_id"`
			} `json:"tasks"`
			Next *string `json:"next_cursor"`
		}
		if err := json.Unmarshal(a.Body, &page); err != nil {
			t.Fatal(err)
		}
		for _, task := range page.Tasks {
			if ids[task.TaskID] {
				t.Fatalf("task %s listed twice", task.TaskID)
			}
			ids[task.TaskID] = true
		}
		if page.Next == nil {
			return ids
		}
		path = "/v1/tasks?limit=1000&cursor=" + *page.Next
	}
}

// TestBurst1000: 1,000 concurrent registrations are all answered 201 and
// all stored, on both stores.
func TestBurst1000(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := startServer(t, dsn)
		var x exchanges
		ok, failed := burst(&x, s.URL, "b", 1000)
		x.check(t)
		if failed != 0 || len(ok) != 1000 {
			t.Fatalf("%d answered 2xx, %d not:\n%s", len(ok), failed, s.Log())
		}
		if ids := allIDs(t, s); len(ids) != 1000 {
			t.Fatalf("%d stored, want 1000", len(ids))
		}
	})
}

// TestKill9DuringBurst: every registration answered 2xx before kill -9 of
// the server is there after a restart, on both stores.
func TestKill9DuringBurst(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := startServer(t, dsn)
		var x exchanges
		var answered sync.Map
		var count atomic.Int64
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					id := fmt.Sprintf("k%02d-%05d", w, i)
					a, err := x.send(s.URL, registerReq(regBody(id, "durable", "ann", int64(1794700000+i)), ""))
					if err != nil {
						return // the server is gone
					}
					if a.Status/100 == 2 {
						answered.Store(id, true)
						count.Add(1)
					}
				}
			}()
		}
		// Kill while the burst is in full flow.
		deadline := time.Now().Add(20 * time.Second)
		for count.Load() < 200 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		s.Signal(syscall.SIGKILL)
		s.wait(t)
		close(stop)
		wg.Wait()
		if count.Load() == 0 {
			t.Fatal("nothing was answered before the kill")
		}
		x.check(t)
		again := startServer(t, dsn)
		stored := allIDs(t, again)
		missing := 0
		answered.Range(func(k, _ any) bool {
			if !stored[k.(string)] {
				missing++
			}
			return true
		})
		if missing > 0 {
			t.Fatalf("%d of %d registrations answered 2xx are lost after kill -9", missing, count.Load())
		}
		t.Logf("%d answered before kill -9, all present after restart (%d stored)", count.Load(), len(stored))
	})
}

// TestTwoServersOnePostgres: two serve processes on one database, the same
// 300 registrations sent to both at once: no errors, no duplicates, and
// exactly one 201 per task.
func TestTwoServersOnePostgres(t *testing.T) {
	dsn := storetest.PostgresDSN(t)
	a, b := startServer(t, dsn), startServer(t, dsn)
	var x exchanges
	const n = 300
	created := make([]atomic.Int32, n)
	var bad atomic.Int32
	var wg sync.WaitGroup
	for i := range n {
		for _, s := range []*server{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				id := fmt.Sprintf("two-%03d", i)
				ans, err := x.send(s.URL, registerReq(regBody(id, "p", "o", int64(1794700000+i)), ""))
				switch {
				case err != nil || (ans.Status != 201 && ans.Status != 200):
					bad.Add(1)
					t.Errorf("%s: %v %d %s", id, err, ans.Status, ans.Body)
				case ans.Status == 201:
					created[i].Add(1)
				}
				c, err := x.send(s.URL, post("/v1/task/complete", completeBody(id, 0, 1794703999), ""))
				if err != nil || c.Status != 200 {
					bad.Add(1)
					t.Errorf("complete %s: %v %d %s", id, err, c.Status, c.Body)
				}
			}()
		}
	}
	wg.Wait()
	x.check(t)
	for i := range created {
		if c := created[i].Load(); c != 1 {
			t.Errorf("two-%03d answered 201 %d times, want once", i, c)
		}
	}
	ids := allIDs(t, a)
	if len(ids) != n || bad.Load() != 0 {
		t.Fatalf("%d stored (want %d), %d bad answers", len(ids), n, bad.Load())
	}
	for _, s := range []*server{a, b} {
		if strings.Contains(s.Log(), `"level":"ERROR"`) {
			t.Errorf("a server logged errors:\n%s", s.Log())
		}
	}
	m := a.do(t, get("/v1/tasks?state=completed&limit=1000", "")).JSON(t)
	if got := len(m["tasks"].([]any)); got != n {
		t.Errorf("%d completed, want %d", got, n)
	}
}

// TestDatabaseLost: when the database goes away under a running server,
// writes answer 500 (the entrypoint retries them), /healthz 503, the error
// is counted on /metrics, and nothing is answered 2xx.
func TestDatabaseLost(t *testing.T) {
	dsn := storetest.PostgresDSN(t)
	s := startServer(t, dsn)
	expect(t, s.do(t, registerReq(regBody("l-1", "p", "o", 1), "")), 201, "")

	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.TrimPrefix(u.Path, "/")
	u.Path = "/postgres"
	admin, err := sql.Open("pgx", u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.Exec("DROP DATABASE " + name + " WITH (FORCE)"); err != nil {
		t.Fatal(err)
	}

	expect(t, s.do(t, registerReq(regBody("l-2", "p", "o", 1), "")), 500, "the database failed; try again")
	expect(t, s.do(t, get("/v1/tasks", "")), 500, "")
	expect(t, s.do(t, get("/healthz", "")), 503, "does not answer")
	m := string(s.do(t, get("/metrics", "")).Body)
	for _, want := range []string{
		`paddle_monitor_store_errors_total{operation="register"} 1`,
		`paddle_monitor_store_errors_total{operation="tasks"} 1`,
		`paddle_monitor_store_errors_total{operation="ping"} 1`,
		`paddle_monitor_store_errors_total{operation="complete"} 0`,
		`paddle_monitor_http_requests_total{code="500",endpoint="POST /v1/task/register"} 1`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if !strings.Contains(s.Log(), `"msg":"store error","logger":"paddle-monitor","operation":"register"`) {
		t.Errorf("the store error was not logged:\n%s", s.Log())
	}
}
