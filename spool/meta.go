package spool

import (
	"encoding/binary"
	"errors"
	"hash/fnv"
	"io"
)

// bbolt's file format (version 2, as written by bbolt v1.4): pages 0 and 1
// each hold a meta record after a 16-byte page header; bbolt writes them
// alternately, each with an FNV-64a checksum of its fields, in the host's
// byte order. The layout is go.etcd.io/bbolt/internal/common.Meta.
const (
	pageHeaderSize = 16
	metaSize       = 64 // magic, version, page size, flags, root bucket (root, sequence), freelist, pgid, txid, checksum
	metaSummed     = 56 // every field before the checksum
	boltMagic      = 0xED0CDAED
	boltVersion    = 2
	noFreelist     = ^uint64(0)
	minPageSize    = 1024
	maxPageSize    = 1 << 24
)

// meta is one decoded meta page.
type meta struct {
	pageSize       uint32
	root, freelist uint64
	pgid, txid     uint64
}

// checkMeta validates both meta pages of a non-empty bbolt file of the given
// size. bbolt checks them too, but it silently uses the other page when one
// is damaged; a damaged meta page means the file was damaged (a torn write,
// a disk error, another program), so it counts as corruption here. A file
// shorter than the pages its meta pages claim (truncated) counts too.
// I/O errors are returned as they are: they say nothing about the content.
func checkMeta(f io.ReaderAt, size int64) error {
	buf := make([]byte, pageHeaderSize+metaSize)
	if size < int64(len(buf)) {
		return corrupt("file of %d bytes is too small to be a bbolt file", size)
	}
	if _, err := f.ReadAt(buf, 0); err != nil {
		return err
	}
	m0, err := parseMeta(buf)
	if err != nil {
		return corrupt("meta page 0: %v", err)
	}
	off := int64(m0.pageSize)
	if size < off+int64(len(buf)) {
		return corrupt("file of %d bytes ends before meta page 1", size)
	}
	if _, err := f.ReadAt(buf, off); err != nil {
		return err
	}
	m1, err := parseMeta(buf)
	if err != nil {
		return corrupt("meta page 1: %v", err)
	}
	if m1.pageSize != m0.pageSize {
		return corrupt("meta pages disagree on the page size (%d, %d)", m0.pageSize, m1.pageSize)
	}
	for i, m := range []meta{m0, m1} {
		if need := m.pgid * uint64(m.pageSize); need > uint64(size) {
			return corrupt("meta page %d counts %d pages (%d bytes) but the file has %d bytes: truncated", i, m.pgid, need, size)
		}
	}
	return nil
}

// parseMeta decodes and validates the meta record of a page held in p.
func parseMeta(p []byte) (meta, error) {
	ne := binary.NativeEndian
	r := p[pageHeaderSize : pageHeaderSize+metaSize]
	m := meta{
		pageSize: ne.Uint32(r[8:]),
		root:     ne.Uint64(r[16:]),
		freelist: ne.Uint64(r[32:]),
		pgid:     ne.Uint64(r[40:]),
		txid:     ne.Uint64(r[48:]),
	}
	switch {
	case ne.Uint32(r[0:]) != boltMagic:
		return m, errors.New("not a bbolt file (bad magic)")
	case ne.Uint32(r[4:]) != boltVersion:
		return m, errors.New("unknown bbolt format version")
	}
	h := fnv.New64a()
	h.Write(r[:metaSummed])
	if h.Sum64() != ne.Uint64(r[metaSummed:]) {
		return m, errors.New("checksum mismatch")
	}
	switch {
	case m.pageSize < minPageSize || m.pageSize > maxPageSize || m.pageSize&(m.pageSize-1) != 0:
		return m, errors.New("impossible page size")
	case m.pgid < 4 || m.root < 2 || m.root >= m.pgid:
		return m, errors.New("root page out of range")
	case m.freelist != noFreelist && (m.freelist < 2 || m.freelist >= m.pgid):
		return m, errors.New("freelist page out of range")
	}
	return m, nil
}
