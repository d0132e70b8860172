package spool

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Salvage reads a corrupt file's bytes, not through bbolt: bbolt stops (or
// panics) at the first bad page, and a truncated file has no pages past its
// end. It walks the B+tree from the newest valid meta page and keeps every
// record of every leaf it can read; then it scans the file for leaf pages
// the walk could not reach (under a damaged branch page, or with both meta
// pages gone) that are not on the free list, and keeps their records too,
// as pending or dead by their content. It never writes to the file.
//
// The layout is bbolt's (go.etcd.io/bbolt/internal/common): a 16-byte page
// header (id, flags, count, overflow); leaf elements of 16 bytes (flags,
// pos, ksize, vsize) and branch elements of 16 bytes (pos, ksize, pgid),
// pos counted from the element; a bucket value is its root page id and
// sequence, followed by the page itself when the bucket is inline.
const (
	flagBranch   = 0x01
	flagLeaf     = 0x02
	flagMeta     = 0x04
	flagFreelist = 0x10
	elemSize     = 16
	bucketLeaf   = 0x01
	maxDepth     = 64
)

// pageReader reads pages out of a file's bytes, checking every bound.
type pageReader struct {
	data     []byte
	pageSize int
	visited  map[uint64]bool
}

// page returns the bytes of page id (with its overflow pages), or nil when
// it is out of the file or its header does not claim to be page id.
func (r *pageReader) page(id uint64) []byte {
	off := id * uint64(r.pageSize)
	if id < 2 || off+pageHeaderSize > uint64(len(r.data)) {
		return nil
	}
	p := r.data[off:]
	if binary.NativeEndian.Uint64(p) != id {
		return nil
	}
	span := (uint64(binary.NativeEndian.Uint32(p[12:])) + 1) * uint64(r.pageSize)
	if span > uint64(len(p)) {
		span = uint64(len(p)) // truncated: what is there may still hold whole elements
	}
	return p[:span]
}

type leafElem struct {
	bucket     bool
	key, value []byte
}

// leafElems decodes a leaf page's elements; a damaged element ends it.
func leafElems(p []byte) []leafElem {
	if len(p) < pageHeaderSize || binary.NativeEndian.Uint16(p[8:])&flagLeaf == 0 {
		return nil
	}
	count := int(binary.NativeEndian.Uint16(p[10:]))
	var out []leafElem
	for i := 0; i < count; i++ {
		at := pageHeaderSize + i*elemSize
		if at+elemSize > len(p) {
			break
		}
		e := p[at:]
		flags := binary.NativeEndian.Uint32(e)
		pos := int(binary.NativeEndian.Uint32(e[4:]))
		ksize := int(binary.NativeEndian.Uint32(e[8:]))
		vsize := int(binary.NativeEndian.Uint32(e[12:]))
		start := at + pos
		if pos < 0 || ksize < 0 || vsize < 0 || start < 0 || start+ksize+vsize > len(p) || start+ksize+vsize < start {
			continue
		}
		out = append(out, leafElem{bucket: flags&bucketLeaf != 0, key: p[start : start+ksize], value: p[start+ksize : start+ksize+vsize]})
	}
	return out
}

// walk collects the leaf elements under page id, skipping what it cannot
// read.
func (r *pageReader) walk(id uint64, depth int, fn func(leafElem)) {
	if depth > maxDepth || r.visited[id] {
		return
	}
	p := r.page(id)
	if p == nil {
		return
	}
	r.visited[id] = true
	flags := binary.NativeEndian.Uint16(p[8:])
	count := int(binary.NativeEndian.Uint16(p[10:]))
	switch {
	case flags&flagLeaf != 0:
		for _, e := range leafElems(p) {
			fn(e)
		}
	case flags&flagBranch != 0:
		for i := 0; i < count; i++ {
			at := pageHeaderSize + i*elemSize
			if at+elemSize > len(p) {
				break
			}
			r.walk(binary.NativeEndian.Uint64(p[at+8:]), depth+1, fn)
		}
	}
}

// bucket collects the leaf elements of the bucket whose value is v.
func (r *pageReader) bucket(v []byte, fn func(leafElem)) {
	if len(v) < 16 {
		return
	}
	root := binary.NativeEndian.Uint64(v)
	if root == 0 { // inline: the page follows the bucket header
		for _, e := range leafElems(v[16:]) {
			fn(e)
		}
		return
	}
	r.walk(root, 0, fn)
}

// freePages reads the free list page id; nil when it cannot.
func (r *pageReader) freePages(id uint64) map[uint64]bool {
	p := r.page(id)
	if p == nil || binary.NativeEndian.Uint16(p[8:])&flagFreelist == 0 {
		return nil
	}
	count, at := int(binary.NativeEndian.Uint16(p[10:])), pageHeaderSize
	if count == 0xFFFF && len(p) >= pageHeaderSize+8 {
		count, at = int(binary.NativeEndian.Uint64(p[pageHeaderSize:])), pageHeaderSize+8
	}
	free := map[uint64]bool{}
	for i := 0; i < count && at+8*(i+1) <= len(p); i++ {
		free[binary.NativeEndian.Uint64(p[at+8*i:])] = true
	}
	return free
}

// salvageBytes reads what it can from the bytes of a corrupt spool file.
func salvageBytes(data []byte) *salvage {
	sv := &salvage{}
	r := &pageReader{data: data, pageSize: 4096, visited: map[uint64]bool{}}
	// The newest meta page that passes its checksum.
	var best *meta
	for i := 0; i < 2; i++ {
		off := i * r.pageSize
		if best != nil {
			off = i * int(best.pageSize)
		}
		if off+pageHeaderSize+metaSize > len(data) {
			continue
		}
		m, err := parseMeta(data[off:])
		if err == nil && (best == nil || m.txid > best.txid) {
			best = &m
		}
	}
	seen := map[uint64]bool{}
	var pending, dead []byID
	keep := func(dst *[]byID, k, v []byte) {
		if len(k) != 8 || seen[btoi(k)] {
			return
		}
		if _, ok := decode(k, v); !ok {
			return
		}
		seen[btoi(k)] = true
		*dst = append(*dst, byID{btoi(k), clone(v)})
	}
	var free map[uint64]bool
	if best != nil {
		r.pageSize = int(best.pageSize)
		if best.freelist != noFreelist {
			free = r.freePages(best.freelist)
		}
		r.walk(best.root, 0, func(top leafElem) {
			if !top.bucket {
				return
			}
			switch string(top.key) {
			case string(Registrations.pending), string(Registrations.pendingT):
				r.bucket(top.value, func(e leafElem) { keep(&pending, e.key, e.value) })
			case string(Registrations.dead), string(Registrations.deadT):
				r.bucket(top.value, func(e leafElem) { keep(&dead, e.key, e.value) })
			case string(bucketMeta):
				r.bucket(top.value, func(e leafElem) {
					switch string(e.key) {
					case string(Registrations.keyDropped):
						sv.dropped[0] = btoi(e.value)
					case string(Registrations.keyDeadDrop):
						sv.dropped[1] = btoi(e.value)
					}
				})
			}
		})
	}
	// Leaves the walk could not reach.
	for id := uint64(2); id*uint64(r.pageSize) < uint64(len(data)); id++ {
		if r.visited[id] || free[id] {
			continue
		}
		p := r.page(id)
		if p == nil || binary.NativeEndian.Uint16(p[8:]) != flagLeaf {
			continue
		}
		for _, e := range leafElems(p) {
			if e.bucket {
				continue
			}
			var probe struct {
				Answer  string `json:"answer"`
				Payload struct {
					EndTime json.RawMessage `json:"end_time"`
				} `json:"payload"`
			}
			json.Unmarshal(e.value, &probe)
			switch {
			case probe.Payload.EndTime != nil:
				// A completion (its own bucket, which this scan cannot
				// tell): never resent as a registration; it stays in
				// the file renamed aside.
			case probe.Answer != "":
				keep(&dead, e.key, e.value)
			default:
				keep(&pending, e.key, e.value)
			}
		}
	}
	sv.pending, sv.dead = records(pending), records(dead)
	return sv
}

// byID is a salvaged record and the id of its key.
type byID struct {
	id uint64
	v  []byte
}

// records returns the records oldest first, as they were queued.
func records(rs []byID) [][]byte {
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].id < rs[j].id })
	out := make([][]byte, len(rs))
	for i, r := range rs {
		out[i] = r.v
	}
	return out
}

// maxSalvage bounds what is read of a corrupt file; errSalvageCut says a
// file was larger (its records past the bound stay in the file aside).
const maxSalvage = 256 << 20

var errSalvageCut = errors.New("file larger than 256 MiB: only its start was read")

// salvageFile reads what it can of the corrupt file at path.
func salvageFile(path string) *salvage {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return &salvage{err: err}
	}
	defer f.Close()
	return salvageOpen(f)
}

// salvageOpen reads what it can of an open corrupt file, up to maxSalvage
// bytes.
func salvageOpen(f *os.File) *salvage {
	st, err := f.Stat()
	if err != nil {
		return &salvage{err: err}
	}
	data := make([]byte, min(st.Size(), maxSalvage))
	n, _ := f.ReadAt(data, 0)
	var sv *salvage
	if gerr := guard(func() error { sv = salvageBytes(data[:n]); return nil }); gerr != nil {
		return &salvage{err: gerr}
	}
	if st.Size() > maxSalvage {
		sv.err = errSalvageCut
	}
	return sv
}

// IsAside reports whether path names a corrupt file renamed aside
// (<spool>.corrupt-<unix-time>[-n]), which is only ever read by salvage:
// never opened with bbolt, never renamed again.
func IsAside(path string) bool {
	return strings.Contains(filepath.Base(path), ".db.corrupt-") && !strings.HasSuffix(path, DrainedSuffix)
}

// DrainedSuffix marks a file renamed aside whose entries were all
// delivered by a drainer (Files leaves it out from then on).
const DrainedSuffix = ".drained"

// Salvaged returns the pending entries and dead letters that can be read
// from a corrupt file renamed aside, oldest first. The file must be one
// this process trusts as a spool file; it is opened without following a
// symbolic link and without blocking, and never written.
func Salvaged(path string) (pending, dead []Entry, err error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, unavailable(err)
	}
	defer f.Close()
	if err := trusted(f, path); err != nil {
		return nil, nil, unavailable(err)
	}
	sv := salvageOpen(f)
	for _, x := range []struct {
		recs [][]byte
		dst  *[]Entry
	}{{sv.pending, &pending}, {sv.dead, &dead}} {
		for _, v := range x.recs {
			if e, ok := decodeLenient(nil, v); ok {
				*x.dst = append(*x.dst, e)
			}
		}
	}
	return pending, dead, sv.err
}

// quarantine renames the corrupt file that was opened as rejected to
// <path>.corrupt-<unix-time>, and returns what could still be read from it
// for the fresh spool. It renames only while it holds the file's exclusive
// lock and the path still names that very file, so it never renames a
// fresh spool another process has just put in its place.
func (s *Spool) quarantine(ctx context.Context, deadline time.Time, rejected os.FileInfo, why error) (*salvage, error) {
	h, err := s.acquire(ctx, deadline, modeModify, nil)
	if errors.Is(err, errNoFile) {
		return nil, nil // renamed by another process already
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w (%w)", ErrCorrupt, err, why)
	}
	defer h.f.Close()
	if !os.SameFile(h.info, rejected) {
		return nil, nil // renamed and replaced by another process already
	}
	aside, err := s.asideName()
	if err == nil {
		err = os.Rename(s.opt.Path, aside)
	}
	if err != nil {
		s.log.Error("spool: corrupt file could not be renamed aside", "path", s.opt.Path, "reason", why.Error(), "err", err)
		return nil, fmt.Errorf("%w: %w: renaming aside: %w", ErrCorrupt, ErrUnavailable, err)
	}
	h.f.Close() // the lock is released only now that the path is free
	sv := salvageFile(aside)
	if st, ok := rejected.Sys().(*syscall.Stat_t); ok && os.Geteuid() == 0 && st.Uid != 0 {
		sv.uid = st
	}
	attrs := []any{"path", s.opt.Path, "renamed_to", aside, "reason", why.Error(),
		"salvaged_pending", len(sv.pending), "salvaged_dead", len(sv.dead)}
	if sv.err != nil {
		attrs = append(attrs, "salvage_stopped_by", sv.err.Error())
	}
	s.log.Error("spool: corrupt file renamed aside, using a fresh spool", attrs...)
	return sv, nil
}

// asideName picks <path>.corrupt-<unix-time>, with a suffix when a file of
// that name exists (two corrupt files within one second).
func (s *Spool) asideName() (string, error) {
	base := s.opt.Path + ".corrupt-" + strconv.FormatInt(s.opt.Now().Unix(), 10)
	name := base
	for i := 1; i < 1000; i++ {
		if _, err := os.Lstat(name); errors.Is(err, os.ErrNotExist) {
			return name, nil
		}
		name = base + "-" + strconv.Itoa(i)
	}
	return "", fmt.Errorf("no free name beside %s", base)
}

// salvage is what could be read from a corrupt file.
type salvage struct {
	pending, dead [][]byte // records, oldest first
	dropped       [2]uint64
	uid           *syscall.Stat_t // the corrupt file's owner, when root must give the fresh file back
	err           error           // why reading stopped early, if it did
}

func (sv *salvage) owner() *syscall.Stat_t {
	if sv == nil {
		return nil
	}
	return sv.uid
}

func (sv *salvage) empty() bool {
	return sv == nil || len(sv.pending)+len(sv.dead) == 0 && sv.dropped == [2]uint64{}
}

// restore writes salvaged records into the fresh spool with new ids, in
// their old order. Failing that, they are still in the file renamed aside.
func (s *Spool) restore(db *bolt.DB, sv *salvage) {
	var ch changes
	err := guard(func() error {
		return db.Update(func(tx *bolt.Tx) error {
			b := createBuckets(tx, Registrations)
			if b.err != nil {
				return b.err
			}
			for _, x := range []struct {
				recs [][]byte
				dst  func(fp string) *bolt.Bucket
			}{{sv.pending, b.pendingFor}, {sv.dead, b.deadFor}} {
				for _, v := range x.recs {
					seq, err := b.pending.NextSequence()
					if err != nil {
						return err
					}
					if nv, err := patch(v, map[string]any{"id": seq}); err == nil {
						v = nv
					}
					// Back into the bucket of its format: an entry with a
					// fingerprint never lands where older versions read.
					e, _ := decodeLenient(nil, v)
					if err := x.dst(e.Fingerprint).Put(itob(seq), v); err != nil {
						return err
					}
				}
			}
			for i, k := range [][]byte{Registrations.keyDropped, Registrations.keyDeadDrop} {
				if err := b.meta.Put(k, itob(btoi(b.meta.Get(k))+sv.dropped[i])); err != nil {
					return err
				}
			}
			return s.bound(b, &ch)
		})
	})
	if err != nil {
		s.log.Error("spool: entries salvaged from a corrupt file could not be written; they stay in the file renamed aside",
			"path", s.opt.Path, "err", err)
		return
	}
	s.logChanges(Registrations, ch)
}
