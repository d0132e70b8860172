package drain

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/paddle-entrypoint/paddle-entrypoint/spool"
)

// monitor is a real HTTP server on 127.0.0.1 that answers every
// registration with status and records its Idempotency-Keys.
func monitor(t *testing.T, status int) (url string, keys func() []string) {
	t.Helper()
	var mu sync.Mutex
	var got []string
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		got = append(got, r.Header.Get("Idempotency-Key"))
		mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(s.Close)
	return s.URL, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Sorted(slices.Values(got))
	}
}

// fill writes registrations of the given task ids into the spool file at
// path, written without a token (as the drainer's own client sends none).
func fill(t *testing.T, path string, ids ...string) {
	t.Helper()
	s := spool.New(spool.Options{Path: path})
	for _, id := range ids {
		e := spool.Entry{TaskID: id, Payload: json.RawMessage(`{"task_id":"` + id + `","project":"vision"}`), Fingerprint: spool.FingerprintNone}
		if _, err := s.Registrations().Enqueue(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}
}

func drainer(t *testing.T, url, spoolPath string) *Drainer {
	st := Settings{MonitorURL: url, SpoolPath: spoolPath, NodeMax: DefaultMax, NodeMaxAge: DefaultMaxAge}
	return &Drainer{Node: Node{Settings: st, Log: slog.New(slog.DiscardHandler), UserAgent: "drain-test"}}
}

// Pass, as a node agent calls it every interval: with All, every per-UID
// spool file of the directory is drained, one Result per file, and a
// second pass finds nothing left.
func TestDrainerPassAll(t *testing.T) {
	url, keys := monitor(t, http.StatusCreated)
	dir := t.TempDir()
	fill(t, filepath.Join(dir, "spool-1000.db"), "a-1", "a-2")
	fill(t, filepath.Join(dir, "spool-1001.db"), "b-1")
	d := drainer(t, url, filepath.Join(dir, "spool-0.db"))
	d.All, d.Watch = true, true

	results, err := d.Pass(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	delivered := map[string]int{}
	for _, r := range results {
		if r.Error != "" || r.Pending == nil || *r.Pending != 0 {
			t.Errorf("%s: error %q, pending %v", r.Spool, r.Error, r.Pending)
		}
		delivered[filepath.Base(r.Spool)] = r.Delivered
	}
	if want := map[string]int{"spool-1000.db": 2, "spool-1001.db": 1}; !maps.Equal(delivered, want) {
		t.Errorf("delivered per file %v, want %v", delivered, want)
	}
	if got, want := keys(), []string{"a-1", "a-2", "b-1"}; !slices.Equal(got, want) {
		t.Errorf("monitor got %v, want %v", got, want)
	}

	results, err = d.Pass(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		if r.Delivered != 0 {
			t.Errorf("second pass: %s delivered %d again", r.Spool, r.Delivered)
		}
	}
}

// A refusal for good (400) makes the entry a dead letter, counted, and the
// flush still complete: nothing it may send is left pending.
func TestDrainerFlushDeadLetter(t *testing.T) {
	url, _ := monitor(t, http.StatusBadRequest)
	path := filepath.Join(t.TempDir(), "spool-1000.db")
	fill(t, path, "bad-1")
	d := drainer(t, url, path)
	var out jsonLines
	if code := d.Flush(context.Background(), json.NewEncoder(&out), 0); code != 0 {
		t.Fatalf("exit %d, want 0", code)
	}
	if len(out) != 1 || out[0].Dead != 1 || out[0].Delivered != 0 || out[0].Pending == nil || *out[0].Pending != 0 {
		t.Errorf("results %+v", out)
	}
}

// A token directory that cannot be read ends a one-off flush with
// ExitIncomplete; a watching drainer's Pass goes on without it.
func TestDrainerTokenDirUnreadable(t *testing.T) {
	url, _ := monitor(t, http.StatusCreated)
	path := filepath.Join(t.TempDir(), "spool-1000.db")
	fill(t, path, "t-1")
	d := drainer(t, url, path)
	d.TokenDir = filepath.Join(t.TempDir(), "missing")
	if code := d.Flush(context.Background(), json.NewEncoder(io.Discard), 0); code != ExitIncomplete {
		t.Errorf("one-off flush: exit %d, want %d", code, ExitIncomplete)
	}
	d.Watch = true
	results, err := d.Pass(context.Background())
	if err != nil || len(results) != 1 || results[0].Delivered != 1 {
		t.Errorf("watching pass: %+v, %v; want t-1 delivered", results, err)
	}
}

// jsonLines collects the Results Flush writes.
type jsonLines []Result

func (j *jsonLines) Write(b []byte) (int, error) {
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		return 0, err
	}
	*j = append(*j, r)
	return len(b), nil
}
