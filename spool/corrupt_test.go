package spool

import (
	"bytes"
	"context"
	"encoding/binary"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// validSpool writes a spool with n pending entries and one dead letter, and
// returns its bytes. Payloads are big enough to span several pages.
func validSpool(t *testing.T, path string, n int) []byte {
	t.Helper()
	s, _ := testSpool(t, Options{Path: path})
	for i := range n {
		id := "old-" + string(rune('a'+i))
		if _, err := s.Registrations().Enqueue(context.Background(), Entry{TaskID: id, Payload: body(id, 1500)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Registrations().BuryNew(context.Background(), Entry{TaskID: "dead-1", Payload: body("dead-1", 10)}, "400"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func pageSizeOf(b []byte) int {
	return int(binary.NativeEndian.Uint32(b[pageHeaderSize+8:]))
}

func TestSpoolCorruptFileRenamedAside(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	garbage := make([]byte, 64<<10)
	for i := range garbage {
		garbage[i] = byte(rng.Uint32())
	}
	cases := []struct {
		name string
		// damage returns the file's new content from a valid spool's.
		damage func(valid []byte) []byte
		// salvaged: the old pending entries that must survive; with
		// partial, those that can (what a truncated file still holds).
		salvaged []string
		partial  bool
		renamed  bool
	}{
		{name: "random garbage", damage: func([]byte) []byte { return garbage }, renamed: true},
		{name: "text file", damage: func([]byte) []byte { return []byte("hello\n") }, renamed: true},
		{name: "cut to 100 bytes", damage: func(v []byte) []byte { return v[:100] }, renamed: true},
		{name: "cut in half", damage: func(v []byte) []byte { return v[:len(v)/2] }, salvaged: []string{"old-a", "old-b", "old-c", "old-d", "old-e", "old-f"}, partial: true, renamed: true},
		{name: "cut after the meta pages", damage: func(v []byte) []byte { return v[:2*pageSizeOf(v)] }, salvaged: []string{"old-a", "old-b", "old-c", "old-d", "old-e", "old-f"}, partial: true, renamed: true},
		{name: "meta page 0 damaged", damage: func(v []byte) []byte {
			v = slices.Clone(v)
			v[pageHeaderSize+48] ^= 0xff // txid: checksum no longer matches
			return v
		}, salvaged: []string{"old-a", "old-b", "old-c", "old-d", "old-e", "old-f"}, renamed: true},
		{name: "meta page 1 damaged", damage: func(v []byte) []byte {
			v = slices.Clone(v)
			ps := pageSizeOf(v)
			copy(v[ps+pageHeaderSize:], "garbage!")
			return v
		}, salvaged: []string{"old-a", "old-b", "old-c", "old-d", "old-e", "old-f"}, renamed: true},
		{name: "both meta pages damaged", damage: func(v []byte) []byte {
			v = slices.Clone(v)
			ps := pageSizeOf(v)
			v[pageHeaderSize+60] ^= 1
			v[ps+pageHeaderSize+60] ^= 1
			return v
			// The leaves are found by scanning the pages.
		}, salvaged: []string{"old-a", "old-b", "old-c", "old-d", "old-e", "old-f"}, renamed: true},
		{name: "data pages overwritten", damage: func(v []byte) []byte {
			v = slices.Clone(v)
			ps := pageSizeOf(v)
			copy(v[2*ps:], garbage)
			return v
		}, salvaged: []string{"old-a", "old-b", "old-c", "old-d", "old-e", "old-f"}, partial: true, renamed: true},
		{name: "zero-length file", damage: func([]byte) []byte { return nil }, renamed: false},
	}
	for _, tc := range cases {
		for _, op := range []string{"Enqueue", "Stats", "Oldest"} {
			t.Run(tc.name+"/"+op, func(t *testing.T) {
				ctx := context.Background()
				path := filepath.Join(t.TempDir(), "spool-1000.db")
				damaged := tc.damage(validSpool(t, path, 6))
				if err := os.WriteFile(path, damaged, 0o600); err != nil {
					t.Fatal(err)
				}
				s, lb := testSpool(t, Options{Path: path})

				var err error
				switch op {
				case "Enqueue":
					_, err = s.Registrations().Enqueue(ctx, Entry{TaskID: "new", Payload: body("new", 10)})
				case "Stats":
					_, err = s.Registrations().Stats(ctx)
				case "Oldest":
					_, err = s.Registrations().Oldest(ctx, 0)
				}
				if err != nil {
					t.Fatalf("%s on the damaged file: %v, want the fresh spool used", op, err)
				}

				aside := asideFiles(t, path)
				if !tc.renamed {
					if len(aside) != 0 {
						t.Fatalf("renamed aside: %v", aside)
					}
				} else {
					if len(aside) != 1 {
						t.Fatalf("files renamed aside: %v, want one %s.corrupt-<unix-time>", aside, path)
					}
					got, _ := os.ReadFile(aside[0])
					if !bytes.Equal(got, damaged) {
						t.Errorf("%s does not hold the damaged file's bytes", aside[0])
					}
					log := lb.String()
					if !strings.Contains(log, "level=ERROR") || !strings.Contains(log, "renamed aside") || !strings.Contains(log, aside[0]) {
						t.Errorf("no error logged naming %s:\n%s", aside[0], log)
					}
				}

				// The fresh spool works, and holds what was salvaged.
				if op != "Enqueue" {
					enqueue(t, s, "new")
				}
				es, err := s.Registrations().Oldest(ctx, 0)
				if err != nil {
					t.Fatal(err)
				}
				want := append(slices.Clone(tc.salvaged), "new")
				if !tc.renamed {
					want = []string{"new"}
				}
				got := taskIDs(es)
				if tc.partial {
					// Whatever was read must be old entries, in order.
					want = slices.DeleteFunc(want, func(id string) bool { return !slices.Contains(got, id) })
				}
				if !slices.Equal(got, want) {
					t.Errorf("pending in the fresh spool = %v, want %v", got, want)
				}
				for _, e := range es {
					if e.TaskID != "new" && !bytes.Equal(e.Payload, body(e.TaskID, 1500)) {
						t.Errorf("salvaged %s with a different payload", e.TaskID)
					}
				}
				if tc.salvaged != nil && !tc.partial && !strings.Contains(lb.String(), "salvaged_pending=6") {
					t.Errorf("salvage not logged:\n%s", lb)
				}
				t.Logf("salvaged %d of %d\n%s", len(got)-1, len(tc.salvaged), lb)
				if len(asideFiles(t, path)) != len(aside) {
					t.Errorf("the fresh spool was renamed too: %v", asideFiles(t, path))
				}
			})
		}
	}
}

// Two corrupt files in one second must not overwrite each other aside.
func TestSpoolCorruptAsideNamesDoNotClobber(t *testing.T) {
	path := filepath.Join(t.TempDir(), "spool-0.db")
	s, _ := testSpool(t, Options{Path: path})
	for i := range 3 {
		if err := os.WriteFile(path, []byte(strings.Repeat("garbage", i+1)), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Registrations().Stats(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if aside := asideFiles(t, path); len(aside) != 3 {
		t.Errorf("aside files %v, want 3", aside)
	}
}

// Another process renamed the corrupt file aside and put a fresh spool in
// its place: the fresh one must not be renamed in turn.
func TestSpoolQuarantineOnlyTheRejectedFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "spool-0.db")
	if err := os.WriteFile(path, []byte("corrupt, seen by this process"), 0o600); err != nil {
		t.Fatal(err)
	}
	rejected, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	// Meanwhile, another process:
	if err := os.Rename(path, path+".corrupt-1"); err != nil {
		t.Fatal(err)
	}
	s, _ := testSpool(t, Options{Path: path})
	enqueue(t, s, "fresh")

	sv, err := s.quarantine(context.Background(), time.Now().Add(time.Second), rejected, corrupt("test"))
	if err != nil || !sv.empty() {
		t.Fatalf("quarantine = %v, %v", sv, err)
	}
	if aside := asideFiles(t, path); len(aside) != 1 {
		t.Errorf("the fresh spool was renamed aside: %v", aside)
	}
	if st := stats(t, s); st.Pending != 1 {
		t.Errorf("fresh spool: %+v", st)
	}
}

// Root draining a user's spool (spool flush --all) gives the fresh file
// that replaces a corrupt one back to that user.
func TestSpoolFreshFileKeepsOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to own files as another user")
	}
	path := filepath.Join(t.TempDir(), "spool-1000.db")
	valid := validSpool(t, path, 2)
	valid[pageHeaderSize+60] ^= 1 // meta page 0's checksum
	if err := os.WriteFile(path, valid, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, 1000, 1000); err != nil {
		t.Fatal(err)
	}
	s, _ := testSpool(t, Options{Path: path})
	es, err := s.Registrations().Oldest(context.Background(), 0)
	if err != nil || len(es) != 2 {
		t.Fatalf("Oldest = %v, %v; want the 2 salvaged entries", taskIDs(es), err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 1000 || st.Gid != 1000 {
		t.Errorf("fresh spool owned by %d:%d, want 1000:1000", st.Uid, st.Gid)
	}
}
