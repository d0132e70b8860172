package spool

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// helperEnv makes the test binary act as a helper process (a spool writer
// to kill, a concurrent writer, an unprivileged user) instead of running the
// tests: the usual Go pattern for tests that need more than one process.
const helperEnv = "SPOOL_TEST_HELPER"

func TestMain(m *testing.M) {
	if h := os.Getenv(helperEnv); h != "" {
		os.Exit(runHelper(h))
	}
	os.Exit(m.Run())
}

func runHelper(name string) int {
	switch name {
	case "crash-writer":
		return crashWriter(os.Getenv("SPOOL_TEST_PATH"), os.Getenv("SPOOL_TEST_PREFIX"))
	case "writer":
		return concurrentWriter(os.Getenv("SPOOL_TEST_PATH"), os.Getenv("SPOOL_TEST_PREFIX"))
	case "unprivileged":
		return unprivileged(os.Getenv("SPOOL_TEST_DIR"))
	}
	fmt.Fprintf(os.Stderr, "unknown helper %q\n", name)
	return 2
}

// logBuffer collects a spool's log lines; safe for concurrent writers.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// testSpool returns a spool in a fresh directory, with its log captured.
func testSpool(t testing.TB, opt Options) (*Spool, *logBuffer) {
	t.Helper()
	if opt.Path == "" {
		opt.Path = filepath.Join(t.TempDir(), "spool-1000.db")
	}
	if opt.MaxEntries == 0 {
		opt.MaxEntries = 10000
	}
	lb := &logBuffer{}
	opt.Logger = slog.New(slog.NewTextHandler(lb, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return New(opt), lb
}

// body is the registration body the tests spool for a task.
func body(taskID string, pad int) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"task_id": taskID, "task_name": "t-" + taskID, "pad": strings.Repeat("x", pad)})
	return b
}

func enqueue(t testing.TB, s *Spool, taskID string) uint64 {
	t.Helper()
	id, err := s.Registrations().Enqueue(context.Background(), Entry{TaskID: taskID, Payload: body(taskID, 64)})
	if err != nil {
		t.Fatalf("Enqueue(%s): %v", taskID, err)
	}
	return id
}

func taskIDs(es []Entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.TaskID)
	}
	return out
}

func stats(t testing.TB, s *Spool) Stats {
	t.Helper()
	st, err := s.Registrations().Stats(context.Background())
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	return st
}

// putRaw writes a record as another version of the entrypoint (or a bug)
// could have left it, bypassing the spool's encoder.
func putRaw(t testing.TB, path, bucket string, key, value []byte) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte(bucket))
		if err != nil {
			return err
		}
		if key == nil {
			seq, _ := b.NextSequence()
			key = itob(seq)
		}
		return b.Put(key, value)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// asideFiles lists the files a corrupt spool was renamed to.
func asideFiles(t testing.TB, path string) []string {
	t.Helper()
	m, err := filepath.Glob(path + ".corrupt-*")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// rawRecord reads a record's bytes as stored.
func rawRecord(t testing.TB, path, bucket string, id uint64) []byte {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v []byte
	_ = db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket([]byte(bucket)); b != nil {
			v = clone(b.Get(itob(id)))
		}
		return nil
	})
	if v == nil {
		t.Fatalf("no record %d in %s", id, bucket)
	}
	return v
}
