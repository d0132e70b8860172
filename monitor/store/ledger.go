package store

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
)

// GPULife is one life of a (node, GPU): it counts in the capacity from
// FirstStart until the earliest of EndedAt, LastEnd + --node-retire, now
// and the window's end.
type GPULife struct {
	Node, UUID, Model   string
	FirstStart, LastEnd int64
	EndedAt             *int64
}

// LedgerData is what the ledger of a window is computed from: the GPUs'
// lives that reach into it and the hourly roll-ups of its hours.
type LedgerData struct {
	Lives []GPULife
	GPUs  []GPUHour
	Users []UserHour
}

// Ledger SQL (reads; the window's hours are [from, to), whole hours).
// Each names the index that serves it.
var (
	// node_gpus_end: lives whose last covered instant is after the
	// window's start minus --node-retire.
	stmtLedgerLives = &stmt{sql: `SELECT node, uuid, model, first_start, last_end, ended_at FROM node_gpus
		WHERE last_end > ? AND first_start < ? ORDER BY node, uuid, first_start`,
		// Both planners read node_gpus in its key order (the ORDER BY)
		// rather than the range of node_gpus_end: a row per GPU life.
		fullScan: "node_gpus in key order (a row per GPU life), not node_gpus_end's range", example: []any{int64(1796130000), int64(1796133600)}}
	// ledgerRaw: node_reports_time: the raw reports whose span may reach
	// into the window (a span ends at or before its report's time).
	// The bound on time (the window's end plus wire.MaxNodeInterval: a
	// span starts at most that long before its report) lets PostgreSQL
	// read only the partitions of the window's days and the day after.
	stmtLedgerRaw = &stmt{sql: `SELECT node, time, span_start, span_end, body FROM node_reports
		WHERE time > ? AND time < ? AND span_start < ? AND span_end > span_start ORDER BY node, time`,
		// Both planners read node_reports in its key order (node, time:
		// the ORDER BY), not node_reports_time's range: the raw reports
		// kept (--raw-retention bounds them).
		fullScan: "node_reports in key order (the raw reports kept), not node_reports_time's range", example: []any{int64(1796130000), int64(1796133600 + 3600), int64(1796133600)}}
)

// LedgerData reads the lives and the roll-ups of [from, to) (whole hours)
// summed in SQL, each part of the window at its grain (ledger_grains.go):
// per part, one GPUHour per (node, GPU, model), Hour its first bucket, and
// one UserHour per (node, GPU instance, user, model, profile, slices),
// FirstTime and LastTime the earliest and the latest of its report times;
// retire is --node-retire.
func (s *Store) LedgerData(ctx context.Context, from, to, retire int64) (*LedgerData, error) {
	d, err := s.ledgerData(ctx, from, to, retire, s.ledgerSums)
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(d.GPUs, compareGPUHours)
	d.Users = sortUserHours(d.Users)
	return d, nil
}

// ledgerData reads the lives of [from, to) and its hours as sums reads
// them (the stored roll-ups or the raw reports).
func (s *Store) ledgerData(ctx context.Context, from, to, retire int64,
	sums func(ctx context.Context, from, to int64) ([]GPUHour, []UserHour, error)) (*LedgerData, error) {
	d := &LedgerData{}
	var err error
	if d.Lives, err = s.lives(ctx, from, to, retire); err != nil {
		return nil, err
	}
	if d.GPUs, d.Users, err = sums(ctx, from, to); err != nil {
		return nil, err
	}
	return d, nil
}

// LedgerUserHours reads one user of a GPU instance (u's node, UUID,
// instance, identity, model, profile and slices) one grain finer than u,
// bucket by bucket: where a sum of LedgerData (u.Grain over u.Span) spans
// a change of the registration its user is tied to. A month's sum gives
// its days, a day's or hours' sum its hours ([from, to) for a row of no
// grain).
func (s *Store) LedgerUserHours(ctx context.Context, from, to int64, u *UserHour) ([]UserHour, error) {
	st, grain := stmtLedgerUserHours, ""
	if u.Grain != "" {
		from, to = u.Span[0], u.Span[1]
	}
	if u.Grain == "month" {
		st, grain = stmtLedgerUserDays, "day"
	}
	all, err := s.userHours(ctx, st, from, to, u.Node, u.UUID, u.GPUInstanceID, u.UserKey())
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, h := range all {
		if h.Model == u.Model && h.Profile == u.Profile && h.Slices == u.Slices && h.Total == u.Total {
			if grain != "" {
				h.Grain, h.Span = grain, [2]int64{h.Hour, bucketEnd(grain, h.Hour)}
			}
			out = append(out, h)
		}
	}
	return sortUserHours(out), nil
}

// userHours reads st's user rows, in the statement's order: its callers
// sort what they keep, once (LedgerData its parts' rows all together).
func (s *Store) userHours(ctx context.Context, st *stmt, args ...any) ([]UserHour, error) {
	return stmtRows(ctx, s, s.r, "ledger", st, func(rows *sql.Rows, u *UserHour) error {
		var uid sql.NullInt64
		var decl int64
		if err := rows.Scan(&u.Hour, &u.Node, &u.UUID, &u.GPUInstanceID, &u.Model, &u.Profile, &u.Slices, &u.Total, &u.User.Runtime,
			&u.User.ContainerID, &u.User.PodUID, &u.User.Namespace, &u.User.Pod, &u.User.Container, &u.User.SlurmJob, &uid, &u.User.Cgroup,
			&decl, &u.User.DeclaredTaskID, &u.User.DeclaredProject, &u.User.DeclaredOwner, &u.FirstTime, &u.LastTime,
			&u.Equal, &u.Util, &u.BusyEqual, &u.BusyUtil, &u.Energy); err != nil {
			return err
		}
		if uid.Valid {
			v := uid.Int64
			u.User.UID = &v
		}
		u.User.Declared = decl != 0
		u.key = u.User.Key()
		return nil
	}, args...)
}

// compareGPUHours orders the ledger's GPU hours: by hour, node, GPU and
// model.
func compareGPUHours(a, b GPUHour) int {
	return cmp.Or(cmp.Compare(a.Hour, b.Hour), cmp.Compare(a.Node, b.Node), cmp.Compare(a.UUID, b.UUID), cmp.Compare(a.Model, b.Model))
}

// sortUserHours returns the ledger's user hours us ordered by hour, node,
// GPU, GPU instance, user (its key), model, profile and slices, stably;
// each user's key is built once (a month of 10,000 GPUs is 300,000
// users), and the rows are moved once, not at every swap (into a new
// slice, not copied back into us).
func sortUserHours(us []UserHour) []UserHour {
	if len(us) == 0 {
		return us
	}
	keys := make([]string, len(us))
	idx := make([]int, len(us))
	for i := range us {
		keys[i], idx[i] = us[i].UserKey(), i
	}
	slices.SortStableFunc(idx, func(i, j int) int {
		a, b := &us[i], &us[j]
		return cmp.Or(cmp.Compare(a.Hour, b.Hour), cmp.Compare(a.Node, b.Node), cmp.Compare(a.UUID, b.UUID),
			cmp.Compare(a.GPUInstanceID, b.GPUInstanceID), cmp.Compare(keys[i], keys[j]), cmp.Compare(a.Model, b.Model),
			cmp.Compare(a.Profile, b.Profile), cmp.Compare(a.Slices, b.Slices), cmp.Compare(a.Total, b.Total))
	})
	sorted := make([]UserHour, len(us))
	for k, i := range idx {
		sorted[k] = us[i]
	}
	return sorted
}

func (s *Store) lives(ctx context.Context, from, to, retire int64) ([]GPULife, error) {
	return stmtRows(ctx, s, s.r, "ledger", stmtLedgerLives, func(rows *sql.Rows, l *GPULife) error {
		var ended sql.NullInt64
		if err := rows.Scan(&l.Node, &l.UUID, &l.Model, &l.FirstStart, &l.LastEnd, &ended); err != nil {
			return err
		}
		if ended.Valid {
			v := ended.Int64
			l.EndedAt = &v
		}
		return nil
	}, from-retire, to)
}

// LedgerDataRaw is LedgerData computed from the raw reports instead of the
// stored roll-ups (each kept span rolled up again, the same way): the
// same answer while the raw reports of the window are kept.
func (s *Store) LedgerDataRaw(ctx context.Context, from, to, retire int64) (*LedgerData, error) {
	return s.ledgerData(ctx, from, to, retire, s.rawRollup)
}

// rawRollup rolls the raw reports' spans up again over [from, to), any
// second: one GPUHour per (hour, node, GPU) and one UserHour per (hour,
// node, GPU instance, user), FirstTime its LastTime, in LedgerData's
// orders. A report's figures are spread evenly over its span, so the part
// of a span inside the window counts in proportion.
func (s *Store) rawRollup(ctx context.Context, from, to int64) ([]GPUHour, []UserHour, error) {
	rows, err := s.query(ctx, s.r, stmtLedgerRaw, from, to+wire.MaxNodeInterval, to)
	if err != nil {
		return nil, nil, fmt.Errorf("store: ledger: %w", err)
	}
	defer rows.Close()
	type gk struct {
		hour       int64
		node, uuid string
	}
	type uk struct {
		gk
		gi  int64
		key string
	}
	var gs []GPUHour
	var us []UserHour
	gi, ui := map[gk]int{}, map[uk]int{}
	if err := eachRow(rows, "ledger", func() error {
		var node, body string
		var t, a, b int64
		if err := rows.Scan(&node, &t, &a, &b, &body); err != nil {
			return err
		}
		var r nodeReportBody
		if err := json.Unmarshal([]byte(body), &r.NodeReport); err != nil {
			return fmt.Errorf("the stored report of %s at %d: %w", node, t, err)
		}
		gpus, users := Rollup(&r.NodeReport, max(a, from), min(b, to))
		for _, g := range gpus {
			k := gk{g.Hour, g.Node, g.UUID}
			if i, ok := gi[k]; ok {
				gs[i].add(g)
				continue
			}
			gi[k] = len(gs)
			gs = append(gs, g)
		}
		for _, u := range users {
			k := uk{gk{u.Hour, u.Node, u.UUID}, u.GPUInstanceID, u.User.Key()}
			if i, ok := ui[k]; ok {
				x := &us[i]
				x.add(u)
				x.LastTime = max(x.LastTime, u.LastTime)
				x.FirstTime = x.LastTime
				continue
			}
			ui[k] = len(us)
			u.FirstTime = u.LastTime
			us = append(us, u)
		}
		return nil
	}); err != nil {
		return nil, nil, err
	}
	// LedgerData's orders: gk and uk are unique here, so the orders' later
	// fields (a GPU's model; a user's model, profile and slices) never
	// decide.
	slices.SortStableFunc(gs, compareGPUHours)
	return gs, sortUserHours(us), nil
}

type nodeReportBody struct{ NodeReport wire.NodeReport }
