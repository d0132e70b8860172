package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/paddle-entrypoint/paddle-entrypoint/access"
)

// Sampled is a heartbeat that carries the last interval's GPU samples
// (ENTRYPOINT.md section 12): what the monitor keeps to see idle GPUs while
// they are idle.
type Sampled struct {
	TaskID string
	// Time is the heartbeat's time (Unix seconds, the sender's clock,
	// already bounded by the API).
	Time int64
	// Interval is interval_seconds rounded to the second; nil when the
	// body had none.
	Interval *int64
	GPUs     []SampledGPU
}

// SampledGPU is one entry of a heartbeat's gpus: the GPU (uuid, and
// mig_uuid for a MIG instance) and its samples over the interval.
type SampledGPU struct {
	UUID, MIGUUID string
	Samples       int64
	// UtilMean is the interval's mean utilisation (percent); nil without
	// samples.
	UtilMean *float64
}

// IdleBelow is the utilisation (percent) under which a sampled GPU counts
// as idle.
const IdleBelow = 1.0

// HeartbeatSampled applies a heartbeat with gpus: it moves last_seen like
// Heartbeat, and when it is newer than the newest heartbeat with gpus
// stored so far, it sets the matched GPUs' latest utilisation and the
// task's idle_since. Entries that match none of the task's GPUs (by uuid
// and mig_uuid) are ignored; a heartbeat none of whose matched entries has
// samples changes nothing but last_seen. A heartbeat is idle when every
// matched entry with samples has util_mean below IdleBelow: idle_since is
// then kept, or set to Time − Interval (Time without an interval) when the
// task was not idle; a busy heartbeat clears it. A completed task's
// heartbeat changes nothing. ErrNotFound as for Heartbeat.
func (s *Store) HeartbeatSampled(ctx context.Context, hb *Sampled, scope *access.Scope) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: heartbeat: %w", err)
	}
	defer tx.Rollback()
	if err := s.lockTask(ctx, tx, hb.TaskID); err != nil {
		return fmt.Errorf("store: heartbeat: %w", err)
	}
	var project, owner string
	var end, seen, idleSince sql.NullInt64
	err = tx.QueryRowContext(ctx, s.bind("SELECT project, owner, end_time, gpus_seen, idle_since FROM tasks WHERE task_id = ?"),
		hb.TaskID).Scan(&project, &owner, &end, &seen, &idleSince)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && !scope.Allows(project, owner)) {
		return ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("store: heartbeat %s: %w", hb.TaskID, err)
	}
	if end.Valid {
		return nil // completed: the heartbeat is answered and ignored
	}
	if _, err := tx.ExecContext(ctx, s.bind("UPDATE tasks SET last_seen = ? WHERE task_id = ? AND (last_seen IS NULL OR last_seen < ?)"),
		hb.Time, hb.TaskID, hb.Time); err != nil {
		return fmt.Errorf("store: heartbeat %s: %w", hb.TaskID, err)
	}
	if seen.Valid && hb.Time <= seen.Int64 {
		return s.commit(tx, hb.TaskID) // late or spooled: moves no GPU data back
	}
	positions, err := s.matchSampled(ctx, tx, hb)
	if err != nil {
		return err
	}
	sampled, idle := 0, true
	for i, pos := range positions {
		g := hb.GPUs[i]
		if pos < 0 || g.Samples <= 0 || g.UtilMean == nil {
			continue
		}
		sampled++
		if *g.UtilMean >= IdleBelow {
			idle = false
		}
	}
	if sampled == 0 {
		return s.commit(tx, hb.TaskID)
	}
	for i, pos := range positions {
		g := hb.GPUs[i]
		if pos < 0 {
			continue
		}
		var util *float64
		if g.Samples > 0 {
			util = g.UtilMean
		}
		if _, err := tx.ExecContext(ctx, s.bind("UPDATE task_gpus SET latest_samples = ?, latest_util_mean = ? WHERE task_id = ? AND position = ?"),
			g.Samples, util, hb.TaskID, pos); err != nil {
			return fmt.Errorf("store: heartbeat %s: gpu %d: %w", hb.TaskID, i, err)
		}
	}
	var since *int64
	switch {
	case idle && idleSince.Valid:
		since = &idleSince.Int64
	case idle:
		v := hb.Time
		if hb.Interval != nil {
			v -= *hb.Interval
		}
		since = &v
	}
	if _, err := tx.ExecContext(ctx, s.bind("UPDATE tasks SET gpus_seen = ?, heartbeat_interval = ?, idle_since = ? WHERE task_id = ?"),
		hb.Time, hb.Interval, since, hb.TaskID); err != nil {
		return fmt.Errorf("store: heartbeat %s: %w", hb.TaskID, err)
	}
	return s.commit(tx, hb.TaskID)
}

func (s *Store) commit(tx *sql.Tx, taskID string) error {
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: heartbeat %s: %w", taskID, err)
	}
	return nil
}

// matchSampled returns, for each of the heartbeat's entries, the position
// of the task's GPU it names (-1: none). A GPU is matched once, by its
// first entry.
func (s *Store) matchSampled(ctx context.Context, tx *sql.Tx, hb *Sampled) ([]int, error) {
	rows, err := tx.QueryContext(ctx, s.bind("SELECT position, uuid, "+migUUIDColumn+" FROM task_gpus WHERE task_id = ? AND uuid <> '' ORDER BY position"), hb.TaskID)
	if err != nil {
		return nil, fmt.Errorf("store: heartbeat %s: GPUs: %w", hb.TaskID, err)
	}
	defer rows.Close()
	type key struct{ uuid, mig string }
	byKey := map[key]int{}
	for rows.Next() {
		var pos int
		var k key
		if err := rows.Scan(&pos, &k.uuid, &k.mig); err != nil {
			return nil, fmt.Errorf("store: heartbeat %s: GPUs: %w", hb.TaskID, err)
		}
		if _, dup := byKey[k]; !dup {
			byKey[k] = pos
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: heartbeat %s: GPUs: %w", hb.TaskID, err)
	}
	out := make([]int, len(hb.GPUs))
	for i, g := range hb.GPUs {
		k := key{g.UUID, g.MIGUUID}
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

// migUUIDColumn is the task_gpus column of a MIG instance's UUID (”
// for a whole GPU) once the schema has one; until then every GPU is whole.
const migUUIDColumn = "''"
