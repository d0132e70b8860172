package spool

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// A spool of n pending entries with 1500-byte payloads, several pages of
// leaves under a branch page, and one dead letter (an inline bucket).
func salvageFixture(t *testing.T, n int) []byte {
	t.Helper()
	return validSpool(t, filepath.Join(t.TempDir(), "spool-0.db"), n)
}

func TestSalvageBytes(t *testing.T) {
	valid := salvageFixture(t, 20)
	ps := pageSizeOf(valid)
	ids := func(sv *salvage) []string {
		var out []string
		for _, v := range sv.pending {
			e, _ := decodeLenient(nil, v)
			out = append(out, e.TaskID)
		}
		return out
	}
	all := ids(salvageBytes(valid))
	if len(all) != 20 {
		t.Fatalf("intact file: salvaged %v", all)
	}
	if sv := salvageBytes(valid); len(sv.dead) != 1 {
		t.Errorf("intact file: %d dead letters, want the inline bucket's 1", len(sv.dead))
	}
	// Zero each leaf page in turn: only that page's entries go.
	for id := 2; (id+1)*ps <= len(valid); id++ {
		p := valid[id*ps:]
		if binary.NativeEndian.Uint64(p) != uint64(id) || binary.NativeEndian.Uint16(p[8:]) != flagLeaf {
			continue
		}
		lost := int(binary.NativeEndian.Uint16(p[10:]))
		damaged := slices.Clone(valid)
		clear(damaged[id*ps : (id+1)*ps])
		got := ids(salvageBytes(damaged))
		if len(got) < 20-lost || !slices.IsSorted(got) {
			t.Errorf("page %d (%d elements) zeroed: salvaged %v", id, lost, got)
		}
	}
	// Both meta pages gone: the scan still finds the leaves.
	damaged := slices.Clone(valid)
	clear(damaged[:2*ps])
	if got := ids(salvageBytes(damaged)); len(got) != 20 {
		t.Errorf("both meta pages zeroed: salvaged %v", got)
	}
}

// FuzzSalvageBytes: any bytes salvage without a panic, and every record
// salvaged is one that can be sent.
func FuzzSalvageBytes(f *testing.F) {
	f.Add([]byte{})
	f.Add(make([]byte, 3*4096))
	f.Fuzz(func(t *testing.T, b []byte) {
		sv := salvageBytes(b)
		for _, v := range append(sv.pending, sv.dead...) {
			if _, ok := decodeLenient(nil, v); !ok {
				t.Fatalf("salvaged an undecodable record %q", v)
			}
		}
	})
}

func TestSalvagedReadOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "spool-0.db.corrupt-1")
	s, _ := testSpool(t, Options{Path: filepath.Join(filepath.Dir(path), "spool-0.db")})
	enqueue(t, s, "a")
	if err := os.Rename(s.Path(), path); err != nil {
		t.Fatal(err)
	}
	p, d, err := Salvaged(path)
	if err != nil || len(p) != 1 || p[0].TaskID != "a" || len(d) != 0 {
		t.Errorf("Salvaged = %v, %v, %v", p, d, err)
	}
	if _, err := New(Options{Path: path}).Registrations().Stats(context.Background()); err == nil {
		t.Error("bbolt opened a file renamed aside")
	}
}
