package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
	"sync"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/access"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

var ctx = context.Background()

// fixedNow is the clock of these tests.
func fixedNow() time.Time { return time.Unix(1794700800, 0) }

func open(t *testing.T, dsn string) *store.Store {
	return storetest.OpenWith(t, dsn, store.Options{Now: fixedNow})
}

// registration is a registration as the API passes it to the store: the
// decoded body, the body as sent and its sender.
type registration struct {
	*wire.Registration
	Body []byte
	From store.Sender
}

// register stores r in s.
func register(s *store.Store, r *registration) (bool, error) {
	return s.Register(ctx, r.Registration, r.Body, r.From)
}

// reg builds a registration whose Body is its JSON, as the API would pass it.
func reg(id, project, owner string, start int64, gpus ...wire.RegisteredGPU) *registration {
	r := &registration{Registration: &wire.Registration{TaskID: id, TaskName: "train", Project: project, Owner: owner, StartTime: &start,
		GPUs: gpus, Labels: wire.Labels{"team": "a"}}}
	r.Body = []byte(fmt.Sprintf(`{"task_id":%q,"project":%q,"owner":%q,"start_time":%d}`, id, project, owner, start))
	return r
}

func completion(id string, exit int64, end int64, gpus ...wire.GPUUsage) (*wire.Completion, []byte) {
	c := &wire.Completion{TaskID: id, EndTime: &end, DurationSeconds: ptrOf(100.5), ExitCode: &exit, GPUs: gpus}
	b, _ := json.Marshal(c)
	return c, b
}

func f64(v float64) *float64 { return &v }

func mustRegister(t *testing.T, s *store.Store, r *registration) {
	t.Helper()
	if _, err := register(s, r); err != nil {
		t.Fatalf("register %s: %v", r.TaskID, err)
	}
}

func mustComplete(t *testing.T, s *store.Store, c *wire.Completion, body []byte) {
	t.Helper()
	if _, err := s.Complete(ctx, c, body, store.Sender{}); err != nil {
		t.Fatalf("complete %s: %v", c.TaskID, err)
	}
}

func TestRegisterIdempotency(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := open(t, dsn)
		r := reg("t1", "search", "ann", 1000)
		created, err := register(s, r)
		if err != nil || !created {
			t.Fatalf("first: created=%v err=%v", created, err)
		}
		same := *r
		same.Body = []byte(`{ "start_time": 1000, "owner":"ann", "project":"search", "task_id":"t1" }`)
		created, err = register(s, &same)
		if err != nil || created {
			t.Fatalf("same JSON value again: created=%v err=%v, want false nil", created, err)
		}
		other := reg("t1", "admin", "ann", 1000)
		if _, err := register(s, other); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("different body: %v, want ErrConflict", err)
		}
		got, err := s.Task(ctx, "t1", "", nil)
		if err != nil || got == nil {
			t.Fatalf("Task: %v %v", got, err)
		}
		if got.Project != "search" || got.State != "running" || got.RegisteredAt != fixedNow().Unix() || got.Labels["team"] != "a" {
			t.Fatalf("stored task changed or wrong: %+v", got)
		}
		if got, err := s.Task(ctx, "nope", "", nil); got != nil || err != nil {
			t.Fatalf("unknown task: %v %v, want nil nil", got, err)
		}
	})
}

func TestCompleteAndPending(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := open(t, dsn)
		gpu := wire.RegisteredGPU{Index: ptrOf[int64](0), UUID: "GPU-a", Name: "Tesla T4", MemoryTotalBytes: 16 << 30}
		mustRegister(t, s, reg("t1", "search", "ann", 1000, gpu))
		c, body := completion("t1", 0, 1200, wire.GPUUsage{UUID: "GPU-a", Samples: 10, Busy: wire.Busy{UtilMean: f64(50), IdleShare: f64(0.25)}})
		if res, err := s.Complete(ctx, c, body, store.Sender{}); err != nil || res != store.Completed {
			t.Fatalf("complete: %v %v", res, err)
		}
		if res, err := s.Complete(ctx, c, body, store.Sender{}); err != nil || res != store.AlreadyCompleted {
			t.Fatalf("same again: %v %v", res, err)
		}
		c2, body2 := completion("t1", 1, 1200)
		if _, err := s.Complete(ctx, c2, body2, store.Sender{}); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("different: %v", err)
		}
		got, _ := s.Task(ctx, "t1", "", nil)
		if got.State != "completed" || got.Completion.ExitCode != 0 || *got.GPUs[0].UtilMean != 50 ||
			*got.Efficiency.GPUSeconds != 100.5 || *got.Efficiency.IdleShare != 0.25 {
			t.Fatalf("after completion: %+v %+v", got, got.Completion)
		}

		// Before the registration: kept, joined later within scope.
		scope := &access.Scope{Projects: []string{"search*"}}
		c3, body3 := completion("t2", 3, 2000)
		if res, err := s.Complete(ctx, c3, body3, store.Sender{Scope: scope}); err != nil || res != store.Pending {
			t.Fatalf("pending: %v %v", res, err)
		}
		if res, err := s.Complete(ctx, c3, body3, store.Sender{Scope: scope}); err != nil || res != store.Pending {
			t.Fatalf("pending again: %v %v", res, err)
		}
		if _, err := s.Complete(ctx, c2, []byte(`{"task_id":"t2","end_time":1}`), store.Sender{Scope: scope}); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("different pending: %v", err)
		}
		mustRegister(t, s, reg("t2", "search_x", "bob", 1500))
		got, _ = s.Task(ctx, "t2", "", nil)
		if got.State != "failed" || got.Completion == nil || got.Completion.EndTime != 2000 {
			t.Fatalf("pending completion not joined: %+v", got)
		}
		// Outside the sending token's scope: never joined.
		c4, body4 := completion("t3", 0, 2000)
		if _, err := s.Complete(ctx, c4, body4, store.Sender{Scope: scope}); err != nil {
			t.Fatal(err)
		}
		mustRegister(t, s, reg("t3", "admin", "bob", 1500))
		got, _ = s.Task(ctx, "t3", "", nil)
		if got.Completion != nil {
			t.Fatalf("completion joined across scopes: %+v", got.Completion)
		}
		// A completion of a stored task outside the scope: for that
		// sender the task_id is unused, so the completion waits as its
		// own pending one, and the stored task is untouched.
		c5, body5 := c4, body4
		if res, err := s.Complete(ctx, c5, body5, store.Sender{Scope: scope}); err != nil || res != store.Pending {
			t.Fatalf("out of scope: %v %v, want Pending", res, err)
		}
		if got, _ = s.Task(ctx, "t3", "", nil); got.Completion != nil {
			t.Fatalf("a completion from outside the scope reached the task: %+v", got.Completion)
		}
	})
}

func TestGateFailed(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := open(t, dsn)
		mustRegister(t, s, reg("t1", "p", "o", 1000))
		c := &wire.Completion{TaskID: "t1", EndTime: ptrOf[int64](1100), DurationSeconds: ptrOf(100.0), ExitCode: ptrOf[int64](0),
			Gate:    &wire.Gate{Expr: "acc>=0.95", Passed: ptrOf(false), Reason: "acc=0.9"},
			Metrics: map[string]float64{"acc": 0.9}}
		b, _ := json.Marshal(c)
		mustComplete(t, s, c, b)
		got, _ := s.Task(ctx, "t1", "", nil)
		if got.State != "failed" || got.Completion.Gate == nil || got.Completion.Gate.Reason != "acc=0.9" || got.Completion.Metrics["acc"] != 0.9 {
			t.Fatalf("gate: %+v %+v", got.State, got.Completion)
		}
	})
}

func TestHeartbeatForwardOnly(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := open(t, dsn)
		mustRegister(t, s, reg("t1", "search", "ann", 1000))
		for _, at := range []int64{2000, 1500, 3000, 2500} {
			if err := s.Heartbeat(ctx, "t1", at, nil); err != nil {
				t.Fatal(err)
			}
		}
		got, _ := s.Task(ctx, "t1", "", nil)
		if got.LastSeen == nil || *got.LastSeen != 3000 {
			t.Fatalf("last_seen %v, want 3000", got.LastSeen)
		}
		if err := s.Heartbeat(ctx, "nope", 1, nil); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("unknown: %v", err)
		}
		if err := s.Heartbeat(ctx, "t1", 4000, &access.Scope{Projects: []string{"other"}}); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("out of scope: %v", err)
		}
	})
}

// TestHeartbeatsTogether: heartbeats that arrive together (one group
// commit on SQLite, one pipeline on PostgreSQL) keep each one's answer:
// every open task under an id is updated to the latest time, a completed
// task's heartbeat is nil and moves its last_seen to the latest time (its
// counted end), an unknown id is ErrNotFound.
func TestHeartbeatsTogether(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := open(t, dsn)
		for _, p := range []string{"a", "b"} {
			r := reg("t1", p, "ann", 1000)
			r.From = store.Sender{Scope: &access.Scope{Projects: []string{p}}}
			mustRegister(t, s, r)
		}
		mustRegister(t, s, reg("done", "a", "ann", 1000))
		c, b := completion("done", 0, 1100)
		mustComplete(t, s, c, b)
		var wg sync.WaitGroup
		errs := make([]error, 150)
		for i := range 50 {
			wg.Add(3)
			go func() { defer wg.Done(); errs[3*i] = s.Heartbeat(ctx, "t1", int64(2000+i), nil) }()
			go func() { defer wg.Done(); errs[3*i+1] = s.Heartbeat(ctx, "done", int64(2000+i), nil) }()
			go func() { defer wg.Done(); errs[3*i+2] = s.Heartbeat(ctx, "nope", int64(2000+i), nil) }()
		}
		wg.Wait()
		for i, err := range errs {
			if i%3 == 2 {
				if !errors.Is(err, store.ErrNotFound) {
					t.Fatalf("unknown: %v", err)
				}
			} else if err != nil {
				t.Fatalf("heartbeat %d: %v", i, err)
			}
		}
		for _, p := range []string{"a", "b"} {
			got, _ := s.Task(ctx, "t1", p, nil)
			if got.LastSeen == nil || *got.LastSeen != 2049 {
				t.Fatalf("t1 of %s: last_seen %v, want 2049", p, got.LastSeen)
			}
		}
		if got, _ := s.Task(ctx, "done", "", nil); got.LastSeen == nil || *got.LastSeen != 2049 {
			t.Fatalf("completed task: last_seen %v, want 2049", got.LastSeen)
		}
	})
}

func TestTasksFiltersPagesScope(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := open(t, dsn)
		for i := range 25 {
			project := []string{"search", "vision", "Search_ads"}[i%3]
			owner := []string{"ann@x.com", "bob@y.com"}[i%2]
			mustRegister(t, s, reg(fmt.Sprintf("t%02d", i), project, owner, int64(1000+i/2)))
		}
		c, b := completion("t00", 0, 1100)
		mustComplete(t, s, c, b)
		c, b = completion("t03", 2, 1100)
		mustComplete(t, s, c, b)

		// Pages of 7 walk every task once, newest first.
		var seen []string
		cursor := ""
		for {
			page, next, err := s.Tasks(ctx, store.Filter{Limit: 7, Cursor: cursor}, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, task := range page {
				seen = append(seen, task.TaskID)
			}
			if next == "" {
				break
			}
			cursor = next
		}
		if len(seen) != 25 || seen[0] != "t24" || seen[1] != "t23" || seen[24] != "t00" {
			t.Fatalf("pages: %v", seen)
		}
		from, to := int64(1002), int64(1004)
		for _, tc := range []struct {
			name  string
			f     store.Filter
			scope *access.Scope
			want  int
		}{
			{"project", store.Filter{Project: "search"}, nil, 9},
			{"owner", store.Filter{Owner: "bob@y.com"}, nil, 12},
			{"running", store.Filter{State: "running"}, nil, 23},
			{"completed", store.Filter{State: "completed"}, nil, 1},
			{"failed", store.Filter{State: "failed"}, nil, 1},
			{"window", store.Filter{From: &from, To: &to}, nil, 4},
			{"scope case-insensitive glob", store.Filter{}, &access.Scope{Projects: []string{"SEARCH*"}}, 17},
			{"scope owners", store.Filter{}, &access.Scope{Projects: []string{"*"}, Owners: []string{"*@x.com"}}, 13},
			{"scope nothing", store.Filter{}, &access.Scope{Projects: []string{"nope"}}, 0},
			{"scope and filter", store.Filter{Project: "vision"}, &access.Scope{Projects: []string{"search"}}, 0},
		} {
			page, _, err := s.Tasks(ctx, tc.f, tc.scope)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if len(page) != tc.want {
				t.Errorf("%s: %d tasks, want %d", tc.name, len(page), tc.want)
			}
		}
		if _, _, err := s.Tasks(ctx, store.Filter{Cursor: "!!"}, nil); !errors.Is(err, store.ErrBadCursor) {
			t.Errorf("bad cursor: %v", err)
		}
		if got, _ := s.Task(ctx, "t01", "", &access.Scope{Projects: []string{"search"}}); got != nil {
			t.Errorf("Task out of scope returned %v", got.TaskID)
		}
	})
}

// TestGPUClaims: one GPU runs one task.
func TestGPUClaims(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := open(t, dsn)
		g := func(uuid string) wire.RegisteredGPU { return wire.RegisteredGPU{UUID: uuid, Name: "T4"} }
		mustRegister(t, s, reg("old", "p", "o", 1000, g("GPU-a"), g("GPU-b")))
		mustRegister(t, s, reg("new", "p", "o", 2000, g("GPU-a")))
		// A registration that comes late from a spool: started before "new".
		mustRegister(t, s, reg("late", "p", "o", 1500, g("GPU-a")))
		claim := func(id string, i int) *int64 {
			task, err := s.Task(ctx, id, "", nil)
			if err != nil {
				t.Fatal(err)
			}
			return task.GPUs[i].ClaimEnded
		}
		if c := claim("old", 0); c == nil || *c != 2000 {
			t.Errorf("old GPU-a claim ended %v, want 2000 (new's start)", c)
		}
		if c := claim("old", 1); c != nil {
			t.Errorf("old GPU-b claim ended %v, want open", *c)
		}
		if c := claim("late", 0); c == nil || *c != 2000 {
			t.Errorf("late GPU-a claim ended %v, want 2000", c)
		}
		if c := claim("new", 0); c != nil {
			t.Errorf("new GPU-a claim ended %v, want open", *c)
		}
	})
}

// TestConcurrentRegistrations: registrations arriving together (one batch
// on SQLite, parallel transactions on PostgreSQL) — the same task many
// times, different tasks, a conflicting body — each get their own answer.
func TestConcurrentRegistrations(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := open(t, dsn)
		type result struct {
			created bool
			err     error
		}
		const n = 60
		results := make([]result, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var r *registration
				switch {
				case i%3 == 0:
					r = reg("same", "p", "o", 1000) // 20 times the same
				case i == 1:
					r = reg("same", "other", "o", 1000) // a conflicting body
				default:
					r = reg(fmt.Sprintf("t%02d", i), "p", "o", int64(i))
				}
				results[i].created, results[i].err = register(s, r)
			}()
		}
		wg.Wait()
		createdSame, conflicts := 0, 0
		for i, r := range results {
			switch {
			case i == 1:
				if errors.Is(r.err, store.ErrConflict) {
					conflicts++
				} else if r.err == nil && r.created {
					createdSame++ // the conflicting body came first
				} else {
					t.Errorf("conflicting body: %v %v", r.created, r.err)
				}
			case i%3 == 0:
				if r.err != nil && !errors.Is(r.err, store.ErrConflict) {
					t.Errorf("same %d: %v", i, r.err)
				}
				if r.created {
					createdSame++
				}
			default:
				if !r.created || r.err != nil {
					t.Errorf("t%02d: created=%v err=%v", i, r.created, r.err)
				}
			}
		}
		if createdSame != 1 {
			t.Errorf("task 'same' created %d times, want once", createdSame)
		}
		page, _, err := s.Tasks(ctx, store.Filter{Limit: 1000}, nil)
		if err != nil || len(page) != 1+n-n/3-1 {
			t.Fatalf("%d tasks stored (%v), want %d", len(page), err, 1+n-n/3-1)
		}
	})
}

// TestGPUClaimOfCompletedTask: a newer task on a GPU ends only open tasks'
// claims; a completed task's GPUs are left as they were, and a completion
// that arrived before its registration closes the claim's task as well.
func TestGPUClaimOfCompletedTask(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := open(t, dsn)
		g := wire.RegisteredGPU{UUID: "GPU-a", Name: "T4"}
		mustRegister(t, s, reg("done", "p", "o", 1000, g))
		done, doneBody := completion("done", 0, 1500)
		mustComplete(t, s, done, doneBody)
		c, b := completion("early", 0, 1900)
		if _, err := s.Complete(ctx, c, b, store.Sender{}); err != nil {
			t.Fatal(err)
		}
		mustRegister(t, s, reg("early", "p", "o", 1600, g))
		mustRegister(t, s, reg("new", "p", "o", 2000, g))
		for _, id := range []string{"done", "early", "new"} {
			task, err := s.Task(ctx, id, "", nil)
			if err != nil {
				t.Fatal(err)
			}
			if c := task.GPUs[0].ClaimEnded; c != nil {
				t.Errorf("%s: claim ended %d, want none (completed tasks keep theirs; new is the newest)", id, *c)
			}
		}
	})
}
