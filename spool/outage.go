package spool

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The outage memory lives in its own bucket of the spool file, so the
// node's tasks (which share the file) share it too, and entrypoints of
// older versions, which never open the bucket, are not disturbed by it.
// Keys are the SHA-256 of the monitor URL: the file never holds the URL
// itself, which may carry credentials.
var bucketOutage = []byte("outage")

// outageRecord is the value stored per monitor URL.
type outageRecord struct {
	Since time.Time `json:"since"`
}

func outageKey(url string) []byte {
	sum := sha256.Sum256([]byte(url))
	return sum[:]
}

// Outage returns when an outage of the monitor at url was recorded, and
// whether one is. It only reads: a missing file, bucket or record is no
// outage. A record that cannot be decoded reads as none.
func (s *Spool) Outage(ctx context.Context, url string) (time.Time, bool, error) {
	if s.missing() {
		return time.Time{}, false, nil
	}
	var rec outageRecord
	var found bool
	err := s.do(ctx, modeRead, func(db *bolt.DB) error {
		found = false
		return db.View(func(tx *bolt.Tx) error {
			b := tx.Bucket(bucketOutage)
			if b == nil {
				return nil
			}
			v := b.Get(outageKey(url))
			found = v != nil && json.Unmarshal(v, &rec) == nil && !rec.Since.IsZero()
			return nil
		})
	})
	if err != nil || !found {
		return time.Time{}, false, err
	}
	return rec.Since, true, nil
}

// RecordOutage records that the monitor at url was found unreachable at
// since, replacing any earlier record for it. It creates the file if need
// be (a start that records an outage has just spooled into it anyway).
func (s *Spool) RecordOutage(ctx context.Context, url string, since time.Time) error {
	v, err := json.Marshal(outageRecord{Since: since.UTC()})
	if err != nil {
		return err
	}
	return s.do(ctx, modeCreate, func(db *bolt.DB) error {
		return db.Update(func(tx *bolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists(bucketOutage)
			if err != nil {
				return err
			}
			return b.Put(outageKey(url), v)
		})
	})
}

// ClearOutage removes the outage record of the monitor at url. It writes
// (and pays a commit) only when there is a record to remove, so a delivery
// that clears nothing costs one read.
func (s *Spool) ClearOutage(ctx context.Context, url string) error {
	if _, found, err := s.Outage(ctx, url); err != nil || !found {
		return err
	}
	return s.do(ctx, modeModify, func(db *bolt.DB) error {
		return db.Update(func(tx *bolt.Tx) error {
			if b := tx.Bucket(bucketOutage); b != nil {
				return b.Delete(outageKey(url))
			}
			return nil
		})
	})
}
