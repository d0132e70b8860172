// Package reportqueue is the node agent's report spool and its delivery to
// the monitor (docs/node.md, "The report").
//
// Guarantees:
//   - A report is written to the spool (a bbolt file of its own, mode 0600)
//     before it is sent, and deleted only after the monitor answered 2xx or
//     409: a crash or a restart loses nothing the disk held.
//   - Reports are sent oldest first (keys are the report's time); a pass
//     stops at the first report the monitor could not take (5xx, 429, a
//     network error, 401/403), so the monitor sees them in order.
//   - A 400 or 413 moves that report to the dead bucket (counted) without
//     blocking the rest; a report older than the maximum age is dropped and
//     counted.
//   - The spool remembers the time of the newest report it ever held, so a
//     restarted agent tiles on from it.
package reportqueue

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
)

var (
	bucketPending = []byte("reports")
	bucketDead    = []byte("dead")
	bucketMeta    = []byte("meta")
	keyLast       = []byte("last_time")
	keyDropped    = []byte("dropped")
	keyDeadCount  = []byte("dead_total")
)

// ErrUnusable: the spool file cannot be opened or created.
var ErrUnusable = errors.New("report spool unusable")

// Entry is one spooled report.
type Entry struct {
	Time     int64           `json:"time"` // the report's time: the key
	QueuedAt int64           `json:"queued_at"`
	Attempts int             `json:"attempts"`
	LastErr  string          `json:"last_error,omitempty"`
	Body     json.RawMessage `json:"body"`
}

// Stats counts the spool's reports.
type Stats struct {
	Pending, Dead, Dropped int64
	Oldest                 time.Time // the oldest pending report's QueuedAt (zero: none)
}

// Queue is the bbolt file of the spool.
type Queue struct {
	db *bolt.DB
}

// Open opens (creating it and its directory, 0700) the spool at path.
func Open(path string) (*Queue, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrUnusable, path, err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 2 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrUnusable, path, err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketPending, bucketDead, bucketMeta} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		db.Close()
		return nil, fmt.Errorf("%w: %s: %v", ErrUnusable, path, err)
	}
	return &Queue{db: db}, nil
}

// Close closes the file.
func (q *Queue) Close() error { return q.db.Close() }

func key(t int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(t)) }

// Put spools a report body under its time (a second report of the same
// time replaces the first: it is the same interval).
func (q *Queue) Put(t int64, body []byte, now time.Time) error {
	v, err := json.Marshal(Entry{Time: t, QueuedAt: now.Unix(), Body: body})
	if err != nil {
		return err
	}
	return q.db.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketPending).Put(key(t), v); err != nil {
			return err
		}
		meta := tx.Bucket(bucketMeta)
		if last := meta.Get(keyLast); last == nil || int64(binary.BigEndian.Uint64(last)) < t {
			return meta.Put(keyLast, key(t))
		}
		return nil
	})
}

// Last is the time of the newest report the spool ever held.
func (q *Queue) Last() (int64, bool) {
	var t int64
	var ok bool
	q.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketMeta).Get(keyLast); v != nil {
			t, ok = int64(binary.BigEndian.Uint64(v)), true
		}
		return nil
	})
	return t, ok
}

// Pending returns the pending reports, oldest first.
func (q *Queue) Pending() ([]Entry, error) {
	var out []Entry
	err := q.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketPending).ForEach(func(_, v []byte) error {
			var e Entry
			if err := json.Unmarshal(v, &e); err != nil {
				return nil // an entry this version cannot read stays
			}
			out = append(out, e)
			return nil
		})
	})
	return out, err
}

// Delete removes a delivered report.
func (q *Queue) Delete(t int64) error {
	return q.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketPending).Delete(key(t)) })
}

// Attempted records a failed attempt on a pending report.
func (q *Queue) Attempted(t int64, why string) error {
	return q.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketPending)
		v := b.Get(key(t))
		if v == nil {
			return nil
		}
		var e Entry
		if err := json.Unmarshal(v, &e); err != nil {
			return nil
		}
		e.Attempts++
		e.LastErr = why
		nv, err := json.Marshal(e)
		if err != nil {
			return err
		}
		return b.Put(key(t), nv)
	})
}

// Bury moves a report the monitor refused for good to the dead bucket.
func (q *Queue) Bury(t int64, why string) error {
	return q.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketPending)
		v := b.Get(key(t))
		if v == nil {
			return nil
		}
		var e Entry
		json.Unmarshal(v, &e)
		e.Attempts++
		e.LastErr = why
		nv, _ := json.Marshal(e)
		if err := tx.Bucket(bucketDead).Put(key(t), nv); err != nil {
			return err
		}
		if err := b.Delete(key(t)); err != nil {
			return err
		}
		return add(tx.Bucket(bucketMeta), keyDeadCount, 1)
	})
}

// Drop removes a report too old to send, counted.
func (q *Queue) Drop(t int64) error {
	return q.db.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketPending).Delete(key(t)); err != nil {
			return err
		}
		return add(tx.Bucket(bucketMeta), keyDropped, 1)
	})
}

func add(b *bolt.Bucket, k []byte, n int64) error {
	var v int64
	if old := b.Get(k); old != nil {
		v = int64(binary.BigEndian.Uint64(old))
	}
	return b.Put(k, key(v+n))
}

// Stats counts pending, dead and dropped reports.
func (q *Queue) Stats() (Stats, error) {
	var s Stats
	err := q.db.View(func(tx *bolt.Tx) error {
		p := tx.Bucket(bucketPending)
		s.Pending = int64(p.Stats().KeyN)
		if _, v := p.Cursor().First(); v != nil {
			var e Entry
			if json.Unmarshal(v, &e) == nil {
				s.Oldest = time.Unix(e.QueuedAt, 0)
			}
		}
		s.Dead = int64(tx.Bucket(bucketDead).Stats().KeyN)
		if v := tx.Bucket(bucketMeta).Get(keyDropped); v != nil {
			s.Dropped = int64(binary.BigEndian.Uint64(v))
		}
		return nil
	})
	return s, err
}
