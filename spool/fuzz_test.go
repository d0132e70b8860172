package spool

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// FuzzRecord: any bytes under any key are either a sendable entry (a task
// id and a JSON object payload) or stored as a dead letter whose payload is
// a JSON object; nothing panics, and updating a sendable record keeps it
// sendable.
func FuzzRecord(f *testing.F) {
	f.Add(itob(1), []byte(`{"record_version":1,"task_id":"a","payload":{"x":1},"queued_at":"2025-01-01T00:00:00Z","attempts":2}`))
	f.Add(itob(2), []byte(`{"record_version":9,"task_id":"b","payload":{},"attempts":"x","new":[1]}`))
	f.Add([]byte("k"), []byte(`{"task_id":"c","payload":{"a":"b"}}`))
	f.Add(itob(3), []byte("\x00\xff"))
	f.Add(itob(4), []byte(`null`))
	f.Add(itob(5), []byte(`{"task_id":"d","payload":"{}"}`))
	f.Fuzz(func(t *testing.T, k, v []byte) {
		if e, ok := decode(k, v); ok {
			if e.TaskID == "" || !isObject(e.Payload) || len(k) != 8 {
				t.Fatalf("decode accepted %q as %+v", v, e)
			}
			nv, err := patch(v, map[string]any{"attempts": e.Attempts + 1, "last_error": "x", "last_attempt": time.Unix(0, 0)})
			if err != nil {
				t.Fatalf("patching a sendable record: %v", err)
			}
			e2, ok := decode(k, nv)
			if !ok || e2.TaskID != e.TaskID || !bytes.Equal(compact(e2.Payload), compact(e.Payload)) || e2.Attempts != e.Attempts+1 {
				t.Fatalf("patch changed %+v into %+v", e, e2)
			}
		}
		if _, ok := decodeLenient(k, v); !ok {
			d := undecodableEntry(k, v, time.Unix(0, 0))
			if !isObject(d.Payload) || d.Answer != AnswerUndecodable {
				t.Fatalf("undecodable %q kept as %+v", v, d)
			}
		}
	})
}

func compact(b []byte) []byte {
	var buf bytes.Buffer
	_ = json.Compact(&buf, b)
	return buf.Bytes()
}

// FuzzCheckMeta: the meta page check never panics on any file content, and
// accepts a file bbolt just initialised.
func FuzzCheckMeta(f *testing.F) {
	path := filepath.Join(f.TempDir(), "spool-0.db")
	s := New(Options{Path: path})
	if _, err := s.Registrations().Enqueue(f.Context(), Entry{TaskID: "a", Payload: []byte(`{}`)}); err != nil {
		f.Fatal(err)
	}
	valid, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	if err := checkMeta(bytes.NewReader(valid), int64(len(valid))); err != nil {
		f.Fatalf("a valid file fails the check: %v", err)
	}
	f.Add(valid[:2*pageSizeOf(valid)])
	f.Add(valid[:100])
	f.Add([]byte("garbage"))
	f.Fuzz(func(t *testing.T, data []byte) {
		_ = checkMeta(bytes.NewReader(data), int64(len(data)))
	})
}
