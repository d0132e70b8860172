package spool

import (
	"context"
	"encoding/json"

	bolt "go.etcd.io/bbolt"
)

// RegistrationPending reports whether taskID's registration is pending.
func (s *Spool) RegistrationPending(ctx context.Context, taskID string) (bool, error) {
	if s.missing() {
		return false, nil
	}
	var pending bool
	err := s.do(ctx, modeRead, func(db *bolt.DB) error {
		return db.View(func(tx *bolt.Tx) error {
			pending = pendingTasks(tx, Registrations)[taskID]
			return nil
		})
	})
	return pending, err
}

// pendingTasks returns the task ids of kind k's pending entries. It reads
// only each record's task_id; MaxEntries bounds the walk.
func pendingTasks(tx *bolt.Tx, k Kind) map[string]bool {
	ids := map[string]bool{}
	for _, name := range [][]byte{k.pending, k.pendingT} {
		p := tx.Bucket(name)
		if p == nil {
			continue
		}
		p.ForEach(func(k, v []byte) error {
			if e, ok := decodeLenient(k, v); ok && e.TaskID != "" {
				ids[e.TaskID] = true
			}
			return nil
		})
	}
	return ids
}

// foreign counts kind k's pending entries this process may not send, and
// those of the previous format (no fingerprint).
func (s *Spool) foreign(tx *bolt.Tx, k Kind) (foreign, legacy int) {
	for _, name := range [][]byte{k.pending, k.pendingT} {
		bk := tx.Bucket(name)
		if bk == nil {
			continue
		}
		old := string(name) == string(k.pending)
		if old {
			legacy += bk.Stats().KeyN
		}
		if s.opt.Sendable == nil {
			continue
		}
		bk.ForEach(func(_, v []byte) error {
			var r struct {
				Fingerprint string `json:"fingerprint"`
			}
			json.Unmarshal(v, &r)
			if old {
				r.Fingerprint = ""
			}
			if !s.opt.Sendable(r.Fingerprint) {
				foreign++
			}
			return nil
		})
	}
	return foreign, legacy
}

// LegacyPending counts the pending registrations and completions of the
// previous format (no fingerprint): those only `spool flush --legacy`
// sends. A missing file has none.
func (s *Spool) LegacyPending(ctx context.Context) (int, error) {
	if s.missing() {
		return 0, nil
	}
	n := 0
	err := s.do(ctx, modeRead, func(db *bolt.DB) error {
		n = 0
		return db.View(func(tx *bolt.Tx) error {
			for _, name := range [][]byte{Registrations.pending, Completions.pending} {
				if bk := tx.Bucket(name); bk != nil {
					n += bk.Stats().KeyN
				}
			}
			return nil
		})
	})
	return n, err
}
