package spool

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestSpoolQueueOrderAndDelivery(t *testing.T) {
	ctx := context.Background()
	s, _ := testSpool(t, Options{})
	var ids []uint64
	for _, id := range []string{"a", "b", "c"} {
		ids = append(ids, enqueue(t, s, id))
	}
	if !slices.IsSorted(ids) || ids[0] == 0 {
		t.Fatalf("ids %v: want increasing, non-zero", ids)
	}
	es, err := s.Registrations().Oldest(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if got := taskIDs(es); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("Oldest(2) = %v, want [a b]", got)
	}
	if string(es[0].Payload) != string(body("a", 64)) {
		t.Errorf("payload = %s, want %s", es[0].Payload, body("a", 64))
	}
	if es[0].Version != RecordVersion || es[0].QueuedAt.IsZero() || es[0].Attempts != 0 {
		t.Errorf("entry = %+v, want version %d, a queued time, no attempts", es[0], RecordVersion)
	}

	if err := s.Registrations().Attempted(ctx, ids[0], "503 Service Unavailable"); err != nil {
		t.Fatal(err)
	}
	if err := s.Registrations().Attempted(ctx, ids[0], "connection refused"); err != nil {
		t.Fatal(err)
	}
	es, _ = s.Registrations().Oldest(ctx, 1)
	if es[0].Attempts != 2 || es[0].LastError != "connection refused" || es[0].LastAttempt.IsZero() {
		t.Errorf("after two attempts: %+v", es[0])
	}

	if err := s.Registrations().Delete(ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	if err := s.Registrations().Delete(ctx, ids[0]); err != nil {
		t.Errorf("deleting an entry already gone: %v, want nil (another process may have delivered it)", err)
	}
	if err := s.Registrations().Attempted(ctx, ids[0], "x"); err != nil {
		t.Errorf("Attempted on an entry gone: %v, want nil", err)
	}
	if err := s.Registrations().DeleteMany(ctx, ids[1:]); err != nil {
		t.Fatal(err)
	}
	if st := stats(t, s); st != (Stats{}) {
		t.Errorf("stats after delivering all = %+v, want zero", st)
	}
	es, err = s.Registrations().Oldest(ctx, 0)
	if err != nil || len(es) != 0 {
		t.Errorf("Oldest after delivering all = %v, %v", es, err)
	}
}

func TestSpoolOldestAll(t *testing.T) {
	s, _ := testSpool(t, Options{})
	for i := range 5 {
		enqueue(t, s, string(rune('a'+i)))
	}
	es, err := s.Registrations().Oldest(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(taskIDs(es), ""); got != "abcde" {
		t.Errorf("Oldest(0) = %q, want abcde", got)
	}
}

func TestSpoolMissingFileReadsEmptyAndCreatesNothing(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "not-yet")
	path := filepath.Join(dir, "spool-1000.db")
	s, _ := testSpool(t, Options{Path: path})
	if es, err := s.Registrations().Oldest(ctx, 10); err != nil || es != nil {
		t.Errorf("Oldest = %v, %v", es, err)
	}
	for _, dead := range []bool{false, true} {
		if es, err := s.Registrations().List(ctx, dead); err != nil || es != nil {
			t.Errorf("List(%v) = %v, %v", dead, es, err)
		}
	}
	if st, err := s.Registrations().Stats(ctx); err != nil || st != (Stats{}) {
		t.Errorf("Stats = %+v, %v", st, err)
	}
	if n, err := s.Registrations().Requeue(ctx); err != nil || n != 0 {
		t.Errorf("Requeue = %d, %v", n, err)
	}
	if n, err := s.Registrations().PurgeDead(ctx); err != nil || n != 0 {
		t.Errorf("PurgeDead = %d, %v", n, err)
	}
	for name, err := range map[string]error{
		"Attempted":  s.Registrations().Attempted(ctx, 1, "x"),
		"Delete":     s.Registrations().Delete(ctx, 1),
		"DeleteMany": s.Registrations().DeleteMany(ctx, []uint64{1, 2}),
		"Bury":       s.Registrations().Bury(ctx, 1, "400"),
	} {
		if err != nil {
			t.Errorf("%s on a missing spool: %v", name, err)
		}
	}
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("reading a missing spool created %s (%v)", dir, err)
	}

	// An empty file (a writer killed between creating and initialising
	// it) reads as empty too, and is not written to.
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if st, err := s.Registrations().Stats(ctx); err != nil || st != (Stats{}) {
		t.Errorf("Stats of an empty file = %+v, %v", st, err)
	}
	if es, err := s.Registrations().Oldest(ctx, 1); err != nil || es != nil {
		t.Errorf("Oldest of an empty file = %v, %v", es, err)
	}
	if fi, _ := os.Stat(path); fi.Size() != 0 {
		t.Errorf("reading an empty file wrote %d bytes", fi.Size())
	}
}

func TestSpoolCreatesFileAndDirectoryModes(t *testing.T) {
	base := t.TempDir()
	path := filepath.Join(base, "var", "lib", "spool-0.db")
	s, _ := testSpool(t, Options{Path: path})
	enqueue(t, s, "a")
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("file mode %v, want 0600", fi.Mode().Perm())
	}
	for _, d := range []string{filepath.Join(base, "var"), filepath.Join(base, "var", "lib")} {
		fi, err := os.Stat(d)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o700 {
			t.Errorf("created directory %s mode %v, want 0700", d, fi.Mode().Perm())
		}
	}

	// An existing directory keeps its mode: the image ships a 1777 one.
	shared := filepath.Join(base, "shared")
	if err := os.Mkdir(shared, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o1777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	before, _ := os.Stat(shared)
	s2, _ := testSpool(t, Options{Path: filepath.Join(shared, "spool-0.db")})
	enqueue(t, s2, "a")
	after, _ := os.Stat(shared)
	if before.Mode() != after.Mode() {
		t.Errorf("existing directory mode changed from %v to %v", before.Mode(), after.Mode())
	}
}

func TestSpoolRefusesSymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "elsewhere")
	if err := os.WriteFile(target, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "spool-0.db")
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	s, _ := testSpool(t, Options{Path: path})
	_, err := s.Registrations().Enqueue(context.Background(), Entry{TaskID: "a", Payload: body("a", 1)})
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Enqueue through a symlink: %v, want ErrUnavailable", err)
	}
	if fi, _ := os.Stat(target); fi.Size() != 0 {
		t.Errorf("the symlink's target was written")
	}
	if _, err := os.Lstat(path); err != nil {
		t.Errorf("the symlink was renamed or removed: %v", err)
	}
}

func TestSpoolEnqueueRejectsBadEntries(t *testing.T) {
	s, _ := testSpool(t, Options{})
	for _, e := range []Entry{
		{TaskID: "", Payload: body("a", 1)},
		{TaskID: "a"},
		{TaskID: "a", Payload: json.RawMessage(`[1,2]`)},
		{TaskID: "a", Payload: json.RawMessage(`{"a":`)},
		{TaskID: "a", Payload: json.RawMessage(`"str"`)},
	} {
		if _, err := s.Registrations().Enqueue(context.Background(), e); err == nil {
			t.Errorf("Enqueue(%+v) accepted", e)
		}
		if err := s.Registrations().BuryNew(context.Background(), e, "400"); err == nil {
			t.Errorf("BuryNew(%+v) accepted", e)
		}
	}
	if _, err := os.Stat(s.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("rejected entries created the file")
	}
}

func TestSpoolBoundedDropsOldest(t *testing.T) {
	s, lb := testSpool(t, Options{MaxEntries: 3})
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		enqueue(t, s, id)
	}
	es, err := s.Registrations().List(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(taskIDs(es), ""); got != "cde" {
		t.Errorf("pending = %q, want cde (oldest dropped)", got)
	}
	if st := stats(t, s); st != (Stats{Pending: 3, Dropped: 2, Legacy: 3}) {
		t.Errorf("stats = %+v, want 3 pending, 2 dropped", st)
	}
	if !strings.Contains(lb.String(), "oldest pending entries dropped") {
		t.Errorf("drops not logged: %s", lb)
	}

	// Dead letters are bounded as well, and counted apart.
	for _, id := range []string{"v", "w", "x", "y"} {
		if err := s.Registrations().BuryNew(context.Background(), Entry{TaskID: id, Payload: body(id, 1)}, "400 Bad Request"); err != nil {
			t.Fatal(err)
		}
	}
	if st := stats(t, s); st != (Stats{Pending: 3, Dead: 3, Dropped: 2, DeadDropped: 1, Legacy: 3}) {
		t.Errorf("stats = %+v, want 3 pending, 3 dead, 2 dropped, 1 dead dropped", st)
	}
}

func TestSpoolExpiry(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	s, lb := testSpool(t, Options{MaxAge: 24 * time.Hour, Now: clock})
	enqueue(t, s, "old1")
	enqueue(t, s, "old2")
	now = now.Add(23 * time.Hour)
	enqueue(t, s, "young")

	now = now.Add(2 * time.Hour) // old ones are 25h old, young 2h
	es, err := s.Registrations().Oldest(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if got := taskIDs(es); !slices.Equal(got, []string{"young"}) {
		t.Errorf("Oldest = %v, want [young]", got)
	}
	dead, err := s.Registrations().List(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if got := taskIDs(dead); !slices.Equal(got, []string{"old1", "old2"}) {
		t.Fatalf("dead = %v, want [old1 old2]", got)
	}
	for _, e := range dead {
		if e.Answer != AnswerExpired || !e.DeadAt.Equal(now) {
			t.Errorf("dead letter %+v: want answer %q at %v", e, AnswerExpired, now)
		}
	}
	if !strings.Contains(lb.String(), "expired") {
		t.Errorf("expiry not logged: %s", lb)
	}

	// Enqueue sweeps too.
	now = now.Add(24 * time.Hour)
	enqueue(t, s, "new")
	if st := stats(t, s); st.Pending != 1 || st.Dead != 3 {
		t.Errorf("after enqueue past young's age: %+v, want 1 pending, 3 dead", st)
	}
}

func TestSpoolBuryRequeuePurge(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	s, _ := testSpool(t, Options{MaxAge: time.Hour, Now: func() time.Time { return now }})
	a := enqueue(t, s, "a")
	enqueue(t, s, "b")
	if err := s.Registrations().Attempted(ctx, a, "400 Bad Request"); err != nil {
		t.Fatal(err)
	}
	if err := s.Registrations().Bury(ctx, a, "400 Bad Request: unknown project"); err != nil {
		t.Fatal(err)
	}
	if err := s.Registrations().Bury(ctx, a, "again"); err != nil {
		t.Errorf("burying an entry no longer pending: %v", err)
	}
	if err := s.Registrations().BuryNew(ctx, Entry{TaskID: "c", Payload: body("c", 1)}, "422 Unprocessable Entity"); err != nil {
		t.Fatal(err)
	}
	dead, _ := s.Registrations().List(ctx, true)
	if len(dead) != 2 || dead[0].TaskID != "a" || dead[0].Answer != "400 Bad Request: unknown project" || dead[0].ID != a ||
		dead[0].Attempts != 1 || dead[1].TaskID != "c" || dead[1].Answer != "422 Unprocessable Entity" {
		t.Fatalf("dead letters = %+v", dead)
	}
	if dead[1].ID == a || dead[1].ID == 0 {
		t.Errorf("BuryNew id %d: want a fresh id", dead[1].ID)
	}

	// Requeued entries go to the back of the queue, tried again as new;
	// they are two hours old by their first queued time but do not expire
	// at once.
	now = now.Add(2 * time.Hour)
	n, err := s.Registrations().Requeue(ctx)
	if err != nil || n != 2 {
		t.Fatalf("Requeue = %d, %v; want 2", n, err)
	}
	pending, err := s.Registrations().Oldest(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := taskIDs(pending); !slices.Equal(got, []string{"a", "c"}) {
		t.Fatalf("pending after requeue = %v, want [a c] (b expired)", got)
	}
	r := pending[0]
	if r.Attempts != 0 || r.Answer != "" || !r.DeadAt.IsZero() || !r.RequeuedAt.Equal(now) || r.ID <= a ||
		r.LastError != "400 Bad Request" || string(r.Payload) != string(body("a", 64)) {
		t.Errorf("requeued entry = %+v", r)
	}
	if st := stats(t, s); st.Pending != 2 || st.Dead != 1 {
		t.Errorf("stats = %+v, want 2 pending, 1 dead (b expired)", st)
	}

	n, err = s.Registrations().PurgeDead(ctx)
	if err != nil || n != 1 {
		t.Fatalf("PurgeDead = %d, %v; want 1", n, err)
	}
	if st := stats(t, s); st.Pending != 2 || st.Dead != 0 {
		t.Errorf("stats after purge = %+v", st)
	}
}

func TestSpoolRecordVersions(t *testing.T) {
	ctx := context.Background()
	s, lb := testSpool(t, Options{MaxAge: time.Hour})
	enqueue(t, s, "ours")
	// A newer entrypoint's record: an unknown field, a field whose type
	// changed, a higher version. Still sendable.
	newer := `{"record_version":7,"task_id":"newer","payload":{"task_id":"newer","x":1},` +
		`"queued_at":"` + time.Now().UTC().Format(time.RFC3339Nano) + `","attempts":"three","route":{"shard":2}}`
	putRaw(t, s.Path(), "pending", nil, []byte(newer))
	putRaw(t, s.Path(), "pending", nil, []byte("\x00\x01 not json"))
	putRaw(t, s.Path(), "pending", nil, []byte(`{"record_version":1,"payload":{"a":1}}`)) // no task id
	putRaw(t, s.Path(), "pending", []byte("short"), []byte(`{"task_id":"k","payload":{}}`))
	enqueue(t, s, "last")

	es, err := s.Registrations().Oldest(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := taskIDs(es); !slices.Equal(got, []string{"ours", "newer", "last"}) {
		t.Fatalf("Oldest = %v, want [ours newer last]", got)
	}
	nw := es[1]
	if nw.Version != 7 || string(nw.Payload) != `{"task_id":"newer","x":1}` {
		t.Errorf("newer record read as %+v", nw)
	}
	if err := s.Registrations().Attempted(ctx, nw.ID, "timeout"); err != nil {
		t.Fatal(err)
	}
	raw := rawRecord(t, s.Path(), "pending", nw.ID)
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(m["route"], map[string]any{"shard": float64(2)}) || m["record_version"] != float64(7) ||
		m["last_error"] != "timeout" || m["attempts"] != float64(1) {
		t.Errorf("updating a newer record lost or broke fields: %s", raw)
	}

	dead, err := s.Registrations().List(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) != 3 {
		t.Fatalf("dead = %+v, want the 3 undecodable records", dead)
	}
	for _, d := range dead {
		if d.Answer != AnswerUndecodable || !isObject(d.Payload) {
			t.Errorf("undecodable record buried as %+v", d)
		}
	}
	if want := `{"raw_base64":"AAEgbm90IGpzb24="}`; string(dead[0].Payload) != want {
		t.Errorf("garbage record kept as %s, want %s", dead[0].Payload, want)
	}
	if !strings.Contains(lb.String(), "undecodable") {
		t.Errorf("undecodable records not logged: %s", lb)
	}
	// They cannot be sent, so requeue leaves them dead.
	if n, err := s.Registrations().Requeue(ctx); err != nil || n != 0 {
		t.Errorf("Requeue = %d, %v; want 0", n, err)
	}
}

func TestFiles(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"spool-1000.db", "spool-0.db", "spool-0.db.corrupt-1700000000", "spool-0.db.corrupt-1600000000.drained", "other.db", "spool-x.db.tmp"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "spool-dir.db"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "spool-link.db")); err != nil {
		t.Fatal(err)
	}
	got, err := Files(dir)
	if err != nil {
		t.Fatal(err)
	}
	// A corrupt file renamed aside is there for the drainer to deliver what
	// it holds; once drained, it is not.
	want := []string{filepath.Join(dir, "spool-0.db"), filepath.Join(dir, "spool-0.db.corrupt-1700000000"), filepath.Join(dir, "spool-1000.db")}
	if !slices.Equal(got, want) {
		t.Errorf("Files = %v, want %v", got, want)
	}
	if got, err := Files(filepath.Join(dir, "missing")); err != nil || got != nil {
		t.Errorf("Files(missing dir) = %v, %v", got, err)
	}
}

func TestSpoolPayloadBytesKept(t *testing.T) {
	ctx := context.Background()
	s, _ := testSpool(t, Options{})
	payload := json.RawMessage(`{"task_name":"a&b","note":"<x>","owner":"ä@example.com"}`)
	id, err := s.Registrations().Enqueue(ctx, Entry{TaskID: "a", Payload: payload})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Registrations().Attempted(ctx, id, "timeout"); err != nil {
		t.Fatal(err)
	}
	es, err := s.Registrations().Oldest(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if string(es[0].Payload) != string(payload) {
		t.Errorf("payload came back as %s, want %s", es[0].Payload, payload)
	}
}
