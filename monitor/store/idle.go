package store

import (
	"context"
	"database/sql"
	"fmt"
	"math"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/access"
)

// IdleBelow is the utilisation (percent) under which a sampled GPU counts
// as idle.
const IdleBelow = 1.0

// HeartbeatSampled applies a heartbeat with gpus (decoded and checked by
// wire.DecodeHeartbeat) at time t (Unix seconds, the sender's clock,
// already bounded by the API); its interval_seconds counts rounded to the
// second. It it moves last_seen like
// Heartbeat, and when it is newer than the newest heartbeat with gpus
// stored so far, it sets the matched GPUs' latest utilisation and the
// task's idle_since. Entries that match none of the task's GPUs (by uuid
// and mig_uuid) are ignored; a heartbeat none of whose matched entries has
// samples changes nothing but last_seen. A heartbeat is idle when every
// matched entry with samples has util_mean below IdleBelow: idle_since is
// then kept, or set to t − the interval (t without an interval) when the
// task was not idle; a busy heartbeat clears it. When every task under the
// id is completed, the newest one's last_seen moves, as Heartbeat does,
// and nothing else. ErrNotFound as for Heartbeat.
//
// Like every write it runs in a transaction of its own on PostgreSQL and in
// the batcher's group commit on SQLite. With several tasks under the id
// within scope, each is updated, and the server's receipt time recorded
// as when each was last seen.
func (s *Store) HeartbeatSampled(ctx context.Context, hb *wire.Heartbeat, t int64, scope *access.Scope) error {
	var interval *int64
	if hb.IntervalSeconds != nil {
		v := int64(math.Round(*hb.IntervalSeconds))
		interval = &v
	}
	return s.write(ctx, "heartbeat "+hb.TaskID, hb.TaskID, false, func(ctx context.Context, tx *sql.Tx) (bool, error) {
		same, err := s.visible(ctx, tx, hb.TaskID, scope)
		if err != nil {
			return false, fmt.Errorf("store: heartbeat %s: %w", hb.TaskID, err)
		}
		if len(same) == 0 {
			return false, ErrNotFound
		}
		wrote := false
		for _, task := range same {
			w, err := s.heartbeatSampledTx(ctx, tx, hb, t, interval, task.key)
			if err != nil {
				return false, err
			}
			wrote = wrote || w
		}
		if !wrote {
			// All completed: the newest (visible lists the oldest first).
			if _, err := s.exec(ctx, tx, stmtHeartbeatDone, t, t, same[len(same)-1].key); err != nil {
				return false, fmt.Errorf("store: heartbeat %s: %w", hb.TaskID, err)
			}
		}
		return true, nil
	})
}

// heartbeatSampledTx is HeartbeatSampled's work on one task (key) in a
// transaction, at time t with the interval rounded to the second (nil:
// none); wrote tells whether it wrote anything.
func (s *Store) heartbeatSampledTx(ctx context.Context, tx *sql.Tx, hb *wire.Heartbeat, t int64, interval *int64, key int64) (wrote bool, _ error) {
	var end, seen, idleSince, observed sql.NullInt64
	if err := s.queryRow(ctx, tx, stmtSampledTask, key).Scan(&end, &seen, &idleSince, &observed); err != nil {
		return false, fmt.Errorf("store: heartbeat %s: %w", hb.TaskID, err)
	}
	if end.Valid {
		return false, nil // completed: no GPU data; HeartbeatSampled moves last_seen
	}
	now := s.now().Unix()
	if _, err := s.exec(ctx, tx, stmtHeartbeat, t, t, now, now, key); err != nil {
		return false, fmt.Errorf("store: heartbeat %s: %w", hb.TaskID, err)
	}
	if seen.Valid && t <= seen.Int64 {
		return true, nil // late or spooled: moves no GPU data back
	}
	positions, err := s.matchSampled(ctx, tx, hb, key)
	if err != nil {
		return false, err
	}
	sampled, idle := 0, true
	for i, pos := range positions {
		g := hb.GPUs[i]
		if pos < 0 || samplesOf(g) <= 0 || g.UtilMean == nil {
			continue
		}
		sampled++
		if *g.UtilMean >= IdleBelow {
			idle = false
		}
	}
	if sampled == 0 {
		return true, nil
	}
	for i, pos := range positions {
		g := hb.GPUs[i]
		if pos < 0 {
			continue
		}
		var util *float64
		if samplesOf(g) > 0 {
			util = g.UtilMean
		}
		if _, err := s.exec(ctx, tx, stmtLatestSample, samplesOf(g), util, key, pos); err != nil {
			return false, fmt.Errorf("store: heartbeat %s: gpu %d: %w", hb.TaskID, i, err)
		}
	}
	var since *int64
	switch {
	case observed.Valid:
		// Node reports observe the task: its idleness follows them
		// (nodes.go, observedIdleness), never its heartbeats.
		if idleSince.Valid {
			since = &idleSince.Int64
		}
	case idle && idleSince.Valid:
		since = &idleSince.Int64
	case idle:
		v := t
		if interval != nil {
			v -= *interval
		}
		since = &v
	}
	if _, err := s.exec(ctx, tx, stmtIdleState, t, interval, since, key); err != nil {
		return false, fmt.Errorf("store: heartbeat %s: %w", hb.TaskID, err)
	}
	return true, nil
}

// matchSampled returns, for each of the heartbeat's entries, the position
// of the task's GPU it names (-1: none). A GPU is matched once, by its
// first entry.
func (s *Store) matchSampled(ctx context.Context, tx *sql.Tx, hb *wire.Heartbeat, taskKey int64) ([]int, error) {
	type key struct{ uuid, mig string }
	type gpu struct {
		pos int
		key
	}
	gpus, err := stmtRows(ctx, s, tx, "heartbeat "+hb.TaskID+": GPUs", stmtSampledGPUs, func(rows *sql.Rows, g *gpu) error {
		return rows.Scan(&g.pos, &g.uuid, &g.mig)
	}, taskKey)
	if err != nil {
		return nil, err
	}
	byKey := map[key]int{}
	for _, g := range gpus {
		if _, dup := byKey[g.key]; !dup {
			byKey[g.key] = g.pos
		}
	}
	out := make([]int, len(hb.GPUs))
	for i, g := range hb.GPUs {
		k := key{valueOf(g.UUID), g.MIGUUID}
		pos, ok := byKey[k]
		if !ok {
			out[i] = -1
			continue
		}
		out[i] = pos
		delete(byKey, k)
	}
	return out, nil
}

// samplesOf is a heartbeat entry's samples (0 when absent).
func samplesOf(g wire.HeartbeatGPU) int64 { return valueOf(g.Samples) }

// valueOf is *p, or T's zero value for nil.
func valueOf[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}
