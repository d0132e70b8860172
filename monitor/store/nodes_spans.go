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
	// spansNear: the spans of a node's GPUs (a JSON array of UUIDs, ""
	// the node's own) starting in [from, to]: from the start of the UTC
	// day a new span starts in to where it ends, so the spans it continues
	// (of the same day, ending where it starts) and the ones that continue
	// it (starting where it ends); a range of the primary key per UUID.
	stmtSpansNear = perEngine(func(d Dialect) string {
		return `SELECT s.uuid, s.span_start, s.span_end FROM ` + d.keyList("j") + ` JOIN node_spans s
		ON s.node = ? AND s.uuid = j.value AND s.span_start >= ? AND s.span_start <= ?`
	}, &stmt{sqliteIndex: "sqlite_autoindex_node_spans_1", postgresIndex: "node_spans_pkey",
		example: []any{`["", "GPU-9"]`, "node-1", int64(1796169600), int64(1796216000)}})
	stmtSpanDelete = &stmt{sql: `DELETE FROM node_spans WHERE node = ? AND uuid = ? AND span_start = ?`,
		sqliteIndex: "sqlite_autoindex_node_spans_1", postgresIndex: "node_spans_pkey", example: []any{"n", "GPU-1", int64(1)}}
	// insertSpan: a new span, or one continued (the span it continues
	// again, ending later), by rows rows (factRows).
	stmtSpanInsert = spanUpsert(1)
	spanUpserts    = func() []*stmt {
		out := make([]*stmt, len(factRows))
		for k, n := range factRows {
			out[k] = stmtSpanInsert
			if n > 1 {
				out[k] = spanUpsert(n)
			}
		}
		return out
	}()
)

func init() {
	for k, n := range factRows {
		if n > 1 {
			nodeStatements[fmt.Sprintf("insert span, %d rows", n)] = spanUpserts[k]
		}
	}
}

func spanUpsert(rows int) *stmt {
	example := make([]any, 0, 4*rows)
	for r := range rows {
		example = append(example, "n", "GPU-1", int64(r), int64(r+1))
	}
	return &stmt{sql: `INSERT INTO node_spans (node, uuid, span_start, span_end) VALUES ` + valueRows(rows, 4) + `
		ON CONFLICT (node, uuid, span_start) DO UPDATE SET span_end = CASE WHEN node_spans.span_end < excluded.span_end
		THEN excluded.span_end ELSE node_spans.span_end END`,
		postgresIndex: "node_spans_pkey", example: example}
}

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
// (uuid "") and each observed GPU's, cut at UTC days, each merged with the
// span of the same day that ends where it starts and the one that starts
// where it ends. One read finds those of every GPU, one upsert per count
// of factRows writes them.
func (s *Store) storeSpans(ctx context.Context, tx *sql.Tx, r *wire.NodeReport, a, b int64) error {
	uuids := append([]string{""}, coveredGPUs(r)...)
	list := keyListArg(uuids)
	type near struct {
		uuid string
		span
	}
	all, err := stmtRows(ctx, s, tx, "spans near", stmtSpansNear, func(rows *sql.Rows, n *near) error {
		return rows.Scan(&n.uuid, &n.start, &n.end)
	}, list, r.Node, a-mod(a, spanDay), b)
	if err != nil {
		return fmt.Errorf("spans: %w", err)
	}
	byUUID := map[string][]span{}
	for _, n := range all {
		byUUID[n.uuid] = append(byUUID[n.uuid], n.span)
	}
	var rows [][]any
	for _, uuid := range uuids {
		for x := a; x < b; {
			y := min(b, x-mod(x, spanDay)+spanDay)
			start, end, found := x, y, false
			for _, sp := range byUUID[uuid] {
				// The span it continues: the same day's, ending at x (the
				// earliest of several, as the primary key lists them).
				if mod(x, spanDay) != 0 && sp.start >= x-mod(x, spanDay) && sp.start < x && sp.end == x && (!found || sp.start < start) {
					start, found = sp.start, true
				}
			}
			for _, sp := range byUUID[uuid] {
				// The span that continues it, merged into it.
				if mod(y, spanDay) != 0 && sp.start == y {
					end = sp.end
					if _, err := s.exec(ctx, tx, stmtSpanDelete, r.Node, uuid, y); err != nil {
						return fmt.Errorf("span of %q: %w", uuid, err)
					}
					break
				}
			}
			rows = append(rows, []any{r.Node, uuid, start, end})
			x = y
		}
	}
	if err := s.upsertRows(ctx, tx, spanUpserts, rows); err != nil {
		return fmt.Errorf("spans: %w", err)
	}
	return nil
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
