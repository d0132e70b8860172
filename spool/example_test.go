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
	id, err := s.Enqueue(ctx, spool.Entry{
		TaskID:  "0f8fad5b-d9cb-469f-a165-70867728950e",
		Payload: []byte(`{"schema_version":1,"task_id":"0f8fad5b-d9cb-469f-a165-70867728950e","task_name":"resnet50"}`),
	})
	if err != nil {
		fmt.Println("spool unavailable, the start goes on:", err)
		return
	}
	_ = s.Attempted(ctx, id, "503 Service Unavailable")

	pending, _ := s.Oldest(ctx, 10)
	for _, e := range pending {
		fmt.Printf("%s attempts=%d last_error=%q\n", e.TaskID, e.Attempts, e.LastError)
		// ... POST e.Payload with Idempotency-Key: e.TaskID; on 2xx or 409:
		_ = s.Delete(ctx, e.ID)
	}
	st, _ := s.Stats(ctx)
	fmt.Printf("pending=%d dead=%d dropped=%d\n", st.Pending, st.Dead, st.Dropped)
	// Output:
	// 0f8fad5b-d9cb-469f-a165-70867728950e attempts=1 last_error="503 Service Unavailable"
	// pending=0 dead=0 dropped=0
}
