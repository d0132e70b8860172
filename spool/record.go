package spool

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"time"

	bolt "go.etcd.io/bbolt"
)

// bucketMeta holds the counters of every kind (Kind's keys) in the file.
var bucketMeta = []byte("meta")

// Fingerprints that stand for no token.
const (
	// FingerprintNone: the entry was written without a token.
	FingerprintNone = "none"
	// FingerprintUnusable: the token file could not be read safely.
	FingerprintUnusable = "unusable"
)

type buckets struct {
	k               Kind
	pending, dead   *bolt.Bucket // the previous format's, no fingerprint
	pendingT, deadT *bolt.Bucket // with a fingerprint
	meta            *bolt.Bucket
	err             error
}

// createBuckets opens kind k's buckets, creating those that are missing.
func createBuckets(tx *bolt.Tx, k Kind) buckets {
	b := buckets{k: k}
	for _, x := range []struct {
		dst  **bolt.Bucket
		name []byte
	}{{&b.pending, k.pending}, {&b.dead, k.dead}, {&b.pendingT, k.pendingT}, {&b.deadT, k.deadT}, {&b.meta, bucketMeta}} {
		*x.dst, b.err = tx.CreateBucketIfNotExists(x.name)
		if b.err != nil {
			return b
		}
	}
	return b
}

// pendingFor and deadFor are the buckets an entry with fingerprint fp
// belongs in.
func (b buckets) pendingFor(fp string) *bolt.Bucket {
	if fp == "" {
		return b.pending
	}
	return b.pendingT
}

func (b buckets) deadFor(fp string) *bolt.Bucket {
	if fp == "" {
		return b.dead
	}
	return b.deadT
}

// findPending returns the pending bucket holding id, and its record.
func (b buckets) findPending(id uint64) (*bolt.Bucket, []byte) {
	for _, bk := range []*bolt.Bucket{b.pendingT, b.pending} {
		if v := bk.Get(itob(id)); v != nil {
			return bk, v
		}
	}
	return nil, nil
}

// deadOf is the dead-letter bucket of the family the pending bucket bk is in.
func (b buckets) deadOf(bk *bolt.Bucket) *bolt.Bucket {
	if bk == b.pendingT {
		return b.deadT
	}
	return b.dead
}

// changes counts what the bounds did during one operation, logged once it
// is committed.
type changes struct {
	dropped, deadDropped, expired, expiredDropped, undecodable, notAdded int
}

// maxMoves bounds the entries one transaction expires, buries as
// undecodable or drops: a start must fit its budget even on a node whose
// spool holds 10^5 stale entries (a transaction moving them all takes
// seconds). What is left over is moved by the next operations.
const maxMoves = 1000

func (s *Spool) logChanges(k Kind, ch changes) {
	if ch.dropped > 0 {
		s.log.Warn("spool: full, oldest pending entries dropped", "path", s.opt.Path, "kind", k.name, "count", ch.dropped, "max", s.opt.MaxEntries)
	}
	if ch.deadDropped > 0 {
		s.log.Warn("spool: full, oldest dead letters dropped", "path", s.opt.Path, "kind", k.name, "count", ch.deadDropped, "max", s.opt.MaxEntries)
	}
	if ch.expired > 0 {
		s.log.Warn("spool: pending entries expired, moved to dead letters", "path", s.opt.Path, "kind", k.name, "count", ch.expired, "max_age", s.opt.MaxAge.String())
	}
	if ch.expiredDropped > 0 {
		s.log.Warn("spool: pending entries expired, dropped", "path", s.opt.Path, "kind", k.name, "count", ch.expiredDropped, "max_age", s.opt.MaxAge.String())
	}
	if ch.notAdded > 0 {
		s.log.Warn("spool: this task's limit reached (PADDLE_SPOOL_MAX); its entry was not added", "path", s.opt.Path, "limit", s.opt.AddLimit)
	}
	if ch.undecodable > 0 {
		s.log.Error("spool: undecodable records moved to dead letters", "path", s.opt.Path, "kind", k.name, "count", ch.undecodable)
	}
}

// put stores e in dst under a fresh id and returns the id. Ids come from
// the pending bucket's sequence, so they are unique across both buckets.
func (b buckets) put(dst *bolt.Bucket, e Entry) (uint64, error) {
	seq, err := b.pending.NextSequence()
	if err != nil {
		return 0, err
	}
	e.ID = seq
	v, err := marshal(e)
	if err != nil {
		return 0, err
	}
	return seq, dst.Put(itob(seq), v)
}

func itob(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// btoi reads a counter; anything but 8 bytes counts as zero.
func btoi(b []byte) uint64 {
	if len(b) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}

// clone copies a key out of bbolt's memory map, which is gone once the
// transaction ends.
func clone(b []byte) []byte { return append([]byte(nil), b...) }

func isObject(raw []byte) bool {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	return len(raw) > 0 && raw[0] == '{' && json.Valid(raw)
}

// decodeLenient reads a record as far as this version understands it:
// unknown fields are ignored and a field whose type changed is left zero.
// It fails only when the record is not a JSON object.
func decodeLenient(k, v []byte) (Entry, bool) {
	var e Entry
	err := json.Unmarshal(v, &e)
	var te *json.UnmarshalTypeError
	if err != nil && !errors.As(err, &te) {
		return Entry{}, false
	}
	if len(k) == 8 {
		e.ID = binary.BigEndian.Uint64(k)
	}
	return e, true
}

// decode reads a record that can be sent: a task id and a JSON object
// payload, under an 8-byte key. Records of newer versions qualify.
func decode(k, v []byte) (Entry, bool) {
	e, ok := decodeLenient(k, v)
	if !ok || len(k) != 8 || e.TaskID == "" || !isObject(e.Payload) {
		return Entry{}, false
	}
	return e, true
}

// undecodableEntry stands for a record that cannot be read as an entry. Its
// bytes are kept in the payload: as they are when they are a JSON object,
// else base64-encoded under "raw_base64".
func undecodableEntry(k, v []byte, now time.Time) Entry {
	e := Entry{Version: RecordVersion, Answer: AnswerUndecodable, DeadAt: now}
	if len(k) == 8 {
		e.ID = binary.BigEndian.Uint64(k)
	}
	if isObject(v) {
		e.Payload = clone(v)
	} else {
		e.Payload, _ = json.Marshal(map[string]string{"raw_base64": base64.StdEncoding.EncodeToString(v)})
	}
	return e
}

// patch sets fields of a JSON record and keeps every other field, including
// those a newer version wrote. A nil value removes the field.
func patch(v []byte, set map[string]any) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(v, &m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, errors.New("spool: record is null")
	}
	for name, val := range set {
		if val == nil {
			delete(m, name)
			continue
		}
		raw, err := marshal(val)
		if err != nil {
			return nil, err
		}
		m[name] = raw
	}
	return marshal(m)
}

// bury moves the record under k of the pending bucket src to its family's
// dead letters with answer.
func bury(b buckets, src *bolt.Bucket, k, v []byte, answer string, now time.Time) error {
	dk := k
	nv, err := patch(v, map[string]any{"answer": answer, "dead_at": now})
	if _, ok := decode(k, v); !ok || err != nil {
		e := undecodableEntry(k, v, now)
		if len(k) != 8 {
			seq, err := b.pending.NextSequence()
			if err != nil {
				return err
			}
			e.ID, dk = seq, itob(seq)
		}
		if answer != AnswerUndecodable {
			e.LastError = answer
		}
		if nv, err = marshal(e); err != nil {
			return err
		}
	}
	if err := b.deadOf(src).Put(dk, nv); err != nil {
		return err
	}
	return src.Delete(k)
}

// ageClock is when an entry's age starts: first queued, or last requeued.
func ageClock(e Entry) time.Time {
	if e.RequeuedAt.After(e.QueuedAt) {
		return e.RequeuedAt
	}
	return e.QueuedAt
}

func (s *Spool) isExpired(e Entry, now time.Time) bool {
	if !e.ExpiresAt.IsZero() && now.After(e.ExpiresAt) && e.RequeuedAt.IsZero() {
		return true // the bound its own task set
	}
	t := ageClock(e)
	// An entry without a time (a newer version's record) cannot be aged;
	// MaxEntries still bounds it.
	return s.opt.MaxAge > 0 && !t.IsZero() && now.Sub(t) > s.opt.MaxAge
}

// expire moves expired entries at the front of the queue to the dead
// letters. Ids grow with the time entries are queued (and requeued), so the
// walk stops at the first entry still young: it costs one decode when
// nothing expired. Undecodable records met on the way are buried too.
func (s *Spool) expire(b buckets, now time.Time, ch *changes) error {
	if s.opt.MaxAge <= 0 {
		return nil
	}
	for _, bk := range []*bolt.Bucket{b.pending, b.pendingT} {
		if err := s.expireBucket(b, bk, now, ch); err != nil {
			return err
		}
	}
	return nil
}

func (s *Spool) expireBucket(b buckets, bk *bolt.Bucket, now time.Time, ch *changes) error {
	type move struct {
		k      []byte
		answer string
	}
	var moves []move
	c := bk.Cursor()
	for k, v := c.First(); k != nil && len(moves) < maxMoves; k, v = c.Next() {
		e, ok := decode(k, v)
		if !ok {
			moves = append(moves, move{clone(k), AnswerUndecodable})
			continue
		}
		if ageClock(e).IsZero() {
			continue
		}
		if !s.isExpired(e, now) {
			break
		}
		moves = append(moves, move{clone(k), AnswerExpired})
	}
	for _, m := range moves {
		if err := s.expireOne(b, bk, m.k, m.answer, now, ch); err != nil {
			return err
		}
	}
	return nil
}

// expireOne moves the record under k of pending bucket bk to the dead
// letters with answer; an expired one of a kind made with DropExpired is
// deleted and counted instead.
func (s *Spool) expireOne(b buckets, bk *bolt.Bucket, k []byte, answer string, now time.Time, ch *changes) error {
	v := bk.Get(k)
	if v == nil {
		return nil
	}
	switch {
	case answer == AnswerExpired && b.k.keyExpired != nil:
		if err := bk.Delete(k); err != nil {
			return err
		}
		ch.expiredDropped++
		return b.meta.Put(b.k.keyExpired, itob(btoi(b.meta.Get(b.k.keyExpired))+1))
	case answer == AnswerExpired:
		ch.expired++
	default:
		ch.undecodable++
	}
	return bury(b, bk, k, v, answer, now)
}

// atLeast reports whether bk holds at least n keys, walking at most n.
//
// Cursor.Last is asked only once First found a key: on a bucket whose
// every key was deleted in the same transaction (its leaf pages empty but
// not yet rebalanced), bbolt's Last never returns.
func atLeast(bk *bolt.Bucket, n int) bool {
	c := bk.Cursor()
	first, _ := c.First()
	if first == nil {
		return false
	}
	// Ids only grow: a span shorter than n holds fewer than n keys.
	if last, _ := c.Last(); len(first) == 8 && len(last) == 8 && btoi(last)-btoi(first)+1 < uint64(n) {
		return false
	}
	i := 0
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		if i++; i >= n {
			return true
		}
	}
	return false
}

// bound drops the oldest pending entries and dead letters past MaxEntries,
// and counts them.
func (s *Spool) bound(b buckets, ch *changes) error {
	for _, x := range []struct {
		bk      *bolt.Bucket
		counter []byte
		n       *int
	}{{b.pending, b.k.keyDropped, &ch.dropped}, {b.pendingT, b.k.keyDropped, &ch.dropped}, {b.dead, b.k.keyDeadDrop, &ch.deadDropped}, {b.deadT, b.k.keyDeadDrop, &ch.deadDropped}} {
		n, err := trim(x.bk, b.meta, x.counter, s.opt.MaxEntries)
		if err != nil {
			return err
		}
		*x.n += n
	}
	return nil
}

// trim drops the oldest keys of bk past max and counts them under counter.
// It walks forward only: bbolt's Cursor.Last loops forever on a bucket
// whose keys were all deleted in the same transaction (requeue and bury
// empty a bucket and then bound it), and Cursor.Prev stops early at a leaf
// page such deletes left empty, so neither may count here. Last is asked
// only once First found a key, where it is safe.
func trim(bk, meta *bolt.Bucket, counter []byte, max int) (int, error) {
	if max <= 0 {
		return 0, nil
	}
	c := bk.Cursor()
	first, _ := c.First()
	if first == nil {
		return 0, nil
	}
	// Ids only grow, so the span of the keys bounds their count: no walk
	// while the bucket is well under its bound.
	if last, _ := c.Last(); len(first) == 8 && len(last) == 8 && btoi(last)-btoi(first) < uint64(max) {
		return 0, nil
	}
	// (Bucket.Stats cannot count here: it does not see this transaction's
	// own writes.)
	n := 0
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		n++
	}
	if n <= max {
		return 0, nil
	}
	// The oldest go first, at most maxMoves per transaction: the rest goes
	// in the next ones.
	over := min(n-max, maxMoves)
	keys := make([][]byte, 0, over)
	for k, _ := c.First(); k != nil && len(keys) < over; k, _ = c.Next() {
		keys = append(keys, clone(k))
	}
	for _, k := range keys {
		if err := bk.Delete(k); err != nil {
			return 0, err
		}
	}
	return over, meta.Put(counter, itob(btoi(meta.Get(counter))+uint64(over)))
}

// marshal encodes a record without json.Marshal's HTML escaping, so that a
// payload keeps its bytes (`&` stays `&`, not `\u0026`).
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
