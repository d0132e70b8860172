package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
)

// The spans each node's reports covered, as intervals (migration 0012,
// node_spans): the instant rule bills an instant of a declared GPU on the
// observed basis exactly when a report of its node covered it, so
// coverage is kept to the second, not as covered seconds per hour (a
// 100-s task in an hour covered for 20 minutes was billed 100 s observed
// plus two thirds of its 100 s declared).
var (
	// spanBefore: the span a new one continues (ends where it starts):
	// it starts the same UTC day, a range of the primary key.
	stmtSpanBefore = &stmt{sql: `SELECT span_start FROM node_spans WHERE node = ? AND uuid = ? AND span_start >= ? AND span_start < ? AND span_end = ?`,
		sqliteIndex: "sqlite_autoindex_node_spans_1", postgresIndex: "node_spans_pkey", example: []any{"node-1", "GPU-9", int64(1796169600), int64(1796216000), int64(1796216000)}}
	// spanAfter: the span that starts where a new one ends.
	stmtSpanAfter = &stmt{sql: `SELECT span_end FROM node_spans WHERE node = ? AND uuid = ? AND span_start = ?`,
		sqliteIndex: "sqlite_autoindex_node_spans_1", postgresIndex: "node_spans_pkey", example: []any{"n", "GPU-1", int64(1)}}
	stmtSpanExtend = &stmt{sql: `UPDATE node_spans SET span_end = ? WHERE node = ? AND uuid = ? AND span_start = ?`,
		sqliteIndex: "sqlite_autoindex_node_spans_1", postgresIndex: "node_spans_pkey", example: []any{int64(2), "n", "GPU-1", int64(1)}}
	stmtSpanDelete = &stmt{sql: `DELETE FROM node_spans WHERE node = ? AND uuid = ? AND span_start = ?`,
		sqliteIndex: "sqlite_autoindex_node_spans_1", postgresIndex: "node_spans_pkey", example: []any{"n", "GPU-1", int64(1)}}
	stmtSpanInsert = &stmt{sql: `INSERT INTO node_spans (node, uuid, span_start, span_end) VALUES (?, ?, ?, ?)
		ON CONFLICT (node, uuid, span_start) DO UPDATE SET span_end = CASE WHEN node_spans.span_end < excluded.span_end
		THEN excluded.span_end ELSE node_spans.span_end END`,
		postgresIndex: "node_spans_pkey", example: []any{"n", "GPU-1", int64(1), int64(2)}}
)

// coveredGPUs are the UUIDs a report observed (an instance with samples:
// its ledger state is not unobserved over the report's span), in the
// order they first appear.
func coveredGPUs(r *wire.NodeReport) []string {
	var out []string
	for _, in := range r.Instances {
		if in.Samples > 0 && in.UUID != "" && !slices.Contains(out, in.UUID) {
			out = append(out, in.UUID)
		}
	}
	return out
}

// spanDay is the longest a stored span is: spans are cut at UTC day
// boundaries, so the spans reaching into a window [from, to) are those
// ending in (from, to + spanDay], a bounded range of node_spans_end.
const spanDay = 86400

// storeSpans records that the report kept [a, b) of node: the node's span
// (uuid "") and each observed GPU's, cut at UTC days.
func (s *Store) storeSpans(ctx context.Context, tx *sql.Tx, r *wire.NodeReport, a, b int64) error {
	for _, uuid := range append([]string{""}, coveredGPUs(r)...) {
		for x := a; x < b; {
			y := min(b, x-mod(x, spanDay)+spanDay)
			if err := s.addSpan(ctx, tx, r.Node, uuid, x, y); err != nil {
				return fmt.Errorf("span of %q: %w", uuid, err)
			}
			x = y
		}
	}
	return nil
}

// addSpan adds [a, b) (within one UTC day) to (node, uuid)'s spans,
// merged with the span of the same day that ends at a and the one that
// starts at b.
func (s *Store) addSpan(ctx context.Context, tx *sql.Tx, node, uuid string, a, b int64) error {
	var before, after sql.NullInt64
	if mod(a, spanDay) != 0 {
		if err := s.queryRow(ctx, tx, stmtSpanBefore, node, uuid, a-mod(a, spanDay), a, a).Scan(&before); err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
	}
	if mod(b, spanDay) != 0 {
		if err := s.queryRow(ctx, tx, stmtSpanAfter, node, uuid, b).Scan(&after); err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
	}
	end := b
	if after.Valid {
		end = after.Int64
		if _, err := s.exec(ctx, tx, stmtSpanDelete, node, uuid, b); err != nil {
			return err
		}
	}
	if before.Valid {
		_, err := s.exec(ctx, tx, stmtSpanExtend, end, node, uuid, before.Int64)
		return err
	}
	_, err := s.exec(ctx, tx, stmtSpanInsert, node, uuid, a, end)
	return err
}

// Spans are the covered spans of each node and GPU in a window: by node,
// then by UUID ("" the node's own), each a sorted union of disjoint
// intervals.
type Spans map[string]map[string][]span

// spansIn: the spans reaching into a window [from, to): ending in
// (from, to + spanDay] (no span is longer than a day) and starting before
// to.
var stmtSpansIn = &stmt{sql: `SELECT node, uuid, span_start, span_end FROM node_spans WHERE span_end > ? AND span_end <= ? AND span_start < ?`,
	sqliteIndex: "node_spans_end", postgresIndex: "node_spans_end", example: []any{int64(1796130000), int64(1796216400), int64(1796133600)}}

// spansIn reads the covered spans reaching into [from, to), clipped to it.
func (s *Store) spansIn(ctx context.Context, from, to int64) (Spans, error) {
	rows, err := s.query(ctx, s.r, stmtSpansIn, from, to+spanDay, to)
	if err != nil {
		return nil, fmt.Errorf("store: spans: %w", err)
	}
	defer rows.Close()
	out := Spans{}
	if err := eachRow(rows, "spans", func() error {
		var node, uuid string
		var sp span
		if err := rows.Scan(&node, &uuid, &sp.start, &sp.end); err != nil {
			return err
		}
		sp.start, sp.end = max(sp.start, from), min(sp.end, to)
		if out[node] == nil {
			out[node] = map[string][]span{}
		}
		out[node][uuid] = append(out[node][uuid], sp)
		return nil
	}); err != nil {
		return nil, err
	}
	for _, byGPU := range out {
		for uuid, l := range byGPU {
			byGPU[uuid] = union(l)
		}
	}
	return out, nil
}

// CoveredSpans are the spans each node's reports covered in [from, to)
// (spansIn): by node, then by GPU UUID ("" the node's own), each a sorted
// union of disjoint [start, end) intervals clipped to the window. The
// FOCUS export intersects them with declared tasks, GPU-second by
// GPU-second (monitor/focus).
func (s *Store) CoveredSpans(ctx context.Context, from, to int64) (map[string]map[string][][2]int64, error) {
	spans, err := s.spansIn(ctx, from, to)
	if err != nil {
		return nil, err
	}
	out := make(map[string]map[string][][2]int64, len(spans))
	for node, byGPU := range spans {
		out[node] = make(map[string][][2]int64, len(byGPU))
		for uuid, l := range byGPU {
			list := make([][2]int64, len(l))
			for i, sp := range l {
				list[i] = [2]int64{sp.start, sp.end}
			}
			out[node][uuid] = list
		}
	}
	return out, nil
}

// union sorts l and merges its overlapping and adjacent spans (a store
// migrated from hourly roll-ups, or clipped late reports, can hold
// overlapping ones).
func union(l []span) []span {
	slices.SortFunc(l, func(a, b span) int {
		switch {
		case a.start < b.start:
			return -1
		case a.start > b.start:
			return 1
		}
		return 0
	})
	out := l[:0]
	for _, sp := range l {
		if sp.end <= sp.start {
			continue
		}
		if n := len(out); n > 0 && sp.start <= out[n-1].end {
			out[n-1].end = max(out[n-1].end, sp.end)
			continue
		}
		out = append(out, sp)
	}
	return out
}

// covered is the length of [a, b) ∩ l (l a union, sorted).
func covered(l []span, a, b int64) int64 {
	var n int64
	for _, sp := range l {
		if sp.start >= b {
			break
		}
		if lo, hi := max(sp.start, a), min(sp.end, b); hi > lo {
			n += hi - lo
		}
	}
	return n
}

// stmtRawSince: the earliest start of the raw reports kept
// (--raw-retention prunes reports by time, so every report after the
// oldest is kept). It is not the oldest report's own start: a later report
// of another node may start earlier (a longer interval). A report's span
// is at most wire.MaxNodeInterval (86400 s) long, so the earliest start is
// among the reports within that of the oldest's time (node_reports_time:
// a range after the first of its rows).
var stmtRawSince = &stmt{sql: `SELECT MIN(span_start) FROM node_reports WHERE time <= (SELECT MIN(time) FROM node_reports) + 86400`,
	sqliteIndex: "node_reports_time", postgresIndex: "node_reports_time"}

// nodeFactsIn: whether a node report covered some of [from, to).
var stmtNodeFactsIn = &stmt{sql: `SELECT 1 FROM node_spans WHERE span_end > ? AND span_end <= ? AND span_start < ? LIMIT 1`,
	sqliteIndex: "node_spans_end", postgresIndex: "node_spans_end", example: []any{int64(1796130000), int64(1796216400), int64(1796133600)}}

// RawComplete says whether the raw reports still kept answer [from, to)
// exactly: no node report covered any of it before the oldest raw report
// kept (--raw-retention pruned nothing the window needs). nodeFacts says
// whether any node report covered some of the window at all.
func (s *Store) RawComplete(ctx context.Context, from, to int64) (complete, nodeFacts bool, err error) {
	facts := func(a, b int64) (bool, error) {
		if b <= a {
			return false, nil
		}
		var one int64
		err := s.queryRow(ctx, s.r, stmtNodeFactsIn, a, b+spanDay, b).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return false, nil
		}
		return err == nil, err
	}
	if nodeFacts, err = facts(from, to); err != nil || !nodeFacts {
		return true, false, wrapSpans(err)
	}
	var oldest sql.NullInt64
	if err := s.queryRow(ctx, s.r, stmtRawSince).Scan(&oldest); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return false, true, wrapSpans(err)
	}
	if !oldest.Valid {
		return false, true, nil
	}
	// The raw reports before the oldest were pruned: the window needs none
	// of them when no report covered [from, oldest).
	before, err := facts(from, min(to, oldest.Int64))
	return !before, true, wrapSpans(err)
}

func wrapSpans(err error) error {
	if err != nil {
		return fmt.Errorf("store: spans: %w", err)
	}
	return nil
}
