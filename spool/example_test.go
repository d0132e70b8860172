package spool_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/spool"
)

// A registration that could not be delivered is spooled at the first failed
// attempt, and deleted once a later attempt (of this start, the next one,
// or `spool flush`) is answered 2xx or 409.
func ExampleSpool() {
	dir, _ := os.MkdirTemp("", "spool-example-")
	defer os.RemoveAll(dir)
	ctx := context.Background()

	s := spool.New(spool.Options{
		Path:        filepath.Join(dir, "spool-1000.db"),
		MaxEntries:  10000,
		MaxAge:      30 * 24 * time.Hour,
		LockTimeout: time.Second,
	})
	regs := s.Registrations()
	id, err := regs.Enqueue(ctx, spool.Entry{
		TaskID:  "0f8fad5b-d9cb-469f-a165-70867728950e",
		Payload: []byte(`{"schema_version":1,"task_id":"0f8fad5b-d9cb-469f-a165-70867728950e","task_name":"resnet50"}`),
	})
	if err != nil {
		fmt.Println("spool unavailable, the start goes on:", err)
		return
	}
	_ = regs.Attempted(ctx, id, "503 Service Unavailable")

	pending, _ := regs.Oldest(ctx, 10)
	for _, e := range pending {
		fmt.Printf("%s attempts=%d last_error=%q\n", e.TaskID, e.Attempts, e.LastError)
		// ... POST e.Payload with Idempotency-Key: e.TaskID; on 2xx or 409:
		_ = regs.Delete(ctx, e.ID)
	}
	st, _ := regs.Stats(ctx)
	fmt.Printf("pending=%d dead=%d dropped=%d\n", st.Pending, st.Dead, st.Dropped)
	// Output:
	// 0f8fad5b-d9cb-469f-a165-70867728950e attempts=1 last_error="503 Service Unavailable"
	// pending=0 dead=0 dropped=0
}

// A node agent keeps its reports in a bbolt file of its own, as a kind of
// its own: written before each send, sent oldest first, and dropped with a
// count once older than its maximum age.
func ExampleNewKind() {
	dir, _ := os.MkdirTemp("", "spool-example-")
	defer os.RemoveAll(dir)
	ctx := context.Background()

	now := time.Date(2026, 12, 1, 14, 30, 0, 0, time.UTC)
	kind, err := spool.NewKind("reports")
	if err != nil {
		panic(err)
	}
	reports := spool.New(spool.Options{
		Path:   filepath.Join(dir, "reports.db"),
		MaxAge: 2 * time.Hour, // --max-report-age
		Now:    func() time.Time { return now },
	}).Queue(kind.DropExpired())
	for _, end := range []int64{1796126400, 1796130000, 1796133600} {
		reports.Enqueue(ctx, spool.Entry{
			TaskID:   fmt.Sprintf("gpu-node-17/%d", end),
			Payload:  []byte(fmt.Sprintf(`{"schema_version":1,"node":"gpu-node-17","time":%d}`, end)),
			QueuedAt: time.Unix(end, 0),
		})
	}
	pending, _ := reports.Oldest(ctx, 0)
	for _, e := range pending {
		fmt.Println(e.TaskID)
	}
	st, _ := reports.Stats(ctx)
	fmt.Printf("pending=%d expired=%d\n", st.Pending, st.Expired)
	// Output:
	// gpu-node-17/1796130000
	// gpu-node-17/1796133600
	// pending=2 expired=1
}
