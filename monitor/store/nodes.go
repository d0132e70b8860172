package store

import (
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
)

// DefaultNodeRetire is how long after its last covered instant a node's
// GPU stops counting in the capacity, and how long a GPU UUID stays held
// by the node that reported it (--node-retire).
const DefaultNodeRetire = 168 * time.Hour

// DefaultRawRetention is how long raw node reports are kept
// (--raw-retention); the hourly roll-ups are kept for good.
const DefaultRawRetention = 48 * time.Hour

// Node report outcomes (NodeWrite.Status).
const (
	NodeCreated = "created" // stored whole
	NodeExists  = "exists"  // a report of this node and time was stored before
	NodeClipped = "clipped" // stored, clipped to the part no stored report covered
	NodeTooOld  = "too_old" // not stored: its span reaches days retention trimmed (MONITOR.md 20.14)
)

// NodeWrite is what StoreNodeReport did.
type NodeWrite struct {
	Status string
	// Different: a report of this node and time with another body was
	// stored before (the first is kept).
	Different bool
	// Kept is the part of the report's span stored: [KeptStart, KeptEnd)
	// (empty when other reports covered all of it).
	KeptStart, KeptEnd int64
	// Conflicts are the report's GPUs that another node holds (their
	// entries kept out of every state and capacity).
	Conflicts []GPUConflict
}

// GPUConflict is a GPU UUID of a report that another node holds (it
// reported the UUID within --node-retire and was not retired): the report
// is stored, but that GPU's entries stay out of every state and capacity
// until `node retire` of one of the two nodes (NODE.md 12.3).
type GPUConflict struct {
	Node   string `json:"node"`
	UUID   string `json:"uuid"`
	HeldBy string `json:"held_by"`
	// FirstTime and LastTime are the conflicting reports' times, Seconds
	// the seconds their kept spans covered (GPUConflicts only).
	FirstTime int64   `json:"first_time"`
	LastTime  int64   `json:"last_time"`
	Seconds   float64 `json:"observed_seconds"`
}

// ErrUnknownNode is RetireNode's answer for a node that never reported.
var ErrUnknownNode = errors.New("store: no report of this node")

// StoreNodeReport stores a validated report (wire.NodeReport.Validate):
// the raw row, the lives of its GPUs and its hourly roll-ups, in one
// transaction (SQLite: the batcher's group commit; PostgreSQL: under the
// node's advisory lock). retire is --node-retire.
func (s *Store) StoreNodeReport(ctx context.Context, r *wire.NodeReport, retire time.Duration) (NodeWrite, error) {
	return s.StoreNodeReportFrom(ctx, r, "", retire)
}

// StoreNodeReportFrom is StoreNodeReport of a report whose sender the
// cluster reviewed as the Node object of UID nodeUID ("": a static node
// token, NODE.md 12.10): a UID other than the node's last ends the old
// machine's GPUs (nodes_uid.go).
func (s *Store) StoreNodeReportFrom(ctx context.Context, r *wire.NodeReport, nodeUID string, retire time.Duration) (NodeWrite, error) {
	body, err := json.Marshal(r)
	if err != nil {
		return NodeWrite{}, fmt.Errorf("store: node report %s: %w", r.Node, err)
	}
	var out NodeWrite
	op := func(ctx context.Context, tx *sql.Tx) (bool, error) {
		out = NodeWrite{}
		if err := s.replacedNode(ctx, tx, r, nodeUID); err != nil {
			return false, fmt.Errorf("store: node report %s at %d: %w", r.Node, r.Time, err)
		}
		wrote, err := s.nodeReportTx(ctx, tx, r, body, retire, &out)
		if err == nil && wrote {
			err = s.setNodeUID(ctx, tx, r.Node, nodeUID)
		}
		if err != nil {
			return false, fmt.Errorf("store: node report %s at %d: %w", r.Node, r.Time, err)
		}
		return wrote, nil
	}
	if s.batch != nil {
		return out, s.batch.run(ctx, "node report "+r.Node, false, op)
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return out, fmt.Errorf("store: node report %s: %w", r.Node, err)
	}
	defer tx.Rollback()
	if _, err := s.exec(ctx, tx, stmtLockTask, "node:"+r.Node); err != nil {
		return out, fmt.Errorf("store: node report %s: %w", r.Node, err)
	}
	wrote, err := op(ctx, tx)
	if err != nil || !wrote {
		return out, err
	}
	if err := tx.Commit(); err != nil {
		return out, fmt.Errorf("store: node report %s: %w", r.Node, err)
	}
	return out, nil
}

func (s *Store) nodeReportTx(ctx context.Context, tx *sql.Tx, r *wire.NodeReport, body []byte, retire time.Duration, out *NodeWrite) (bool, error) {
	// The GPUs another node holds, whether or not the report is new: a
	// conflict is answered every time (NODE.md 12.3).
	all := reportGPUs(r)
	since := r.Time - int64(retire/time.Second)
	var uuids []reportGPU
	var lives []*life
	held := map[string]bool{}
	open, err := s.openLives(ctx, tx, all)
	if err != nil {
		return false, err
	}
	for _, u := range all {
		own, holder := ownAndHolder(open[u.uuid], r.Node, since)
		if holder != "" {
			out.Conflicts = append(out.Conflicts, GPUConflict{Node: r.Node, UUID: u.uuid, HeldBy: holder})
			held[u.uuid] = true
			continue
		}
		uuids, lives = append(uuids, u), append(lives, own)
	}
	var stored string
	switch err := s.queryRow(ctx, tx, stmtNodeReportStored, r.Node, r.Time).Scan(&stored); {
	case err == nil:
		out.Status, out.Different = NodeExists, !bytes.Equal([]byte(stored), body)
		return false, nil
	case !errors.Is(err, sql.ErrNoRows):
		return false, err
	}
	start, end := r.Time-r.IntervalSeconds, r.Time
	spans, err := s.nodeSpans(ctx, tx, r.Node, start, end)
	if err != nil {
		return false, err
	}
	out.KeptStart, out.KeptEnd = uncovered(start, end, firmSpans(spans))
	if err := s.clipProvisional(ctx, tx, r.Node, spans, out.KeptStart, out.KeptEnd, held); err != nil {
		return false, err
	}
	out.Status = NodeCreated
	if out.KeptStart != start || out.KeptEnd != end {
		out.Status = NodeClipped
	}
	final := int64(0)
	if r.Final {
		final = 1
	}
	if _, err := s.exec(ctx, tx, stmtInsertNodeReport, r.Node, r.Time, r.IntervalSeconds, out.KeptStart, out.KeptEnd, final, string(body),
		s.now().Unix()); err != nil {
		return false, err
	}
	var last sql.NullInt64
	if err := s.queryRow(ctx, tx, stmtNodeLastTime, r.Node).Scan(&last); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return false, err
	}
	if _, err := s.exec(ctx, tx, stmtUpsertNode, r.Node, r.Time, r.IntervalSeconds, string(body)); err != nil {
		return false, err
	}
	// The held GPUs' entries are left out of what follows.
	counted := withoutGPUs(r, held)
	if err := s.observedTasks(ctx, tx, counted, !last.Valid || r.Time > last.Int64, out.KeptStart, out.KeptEnd); err != nil {
		return false, err
	}
	for _, c := range out.Conflicts {
		if _, err := s.exec(ctx, tx, stmtUpsertConflict, c.Node, c.UUID, c.HeldBy, r.Time, r.Time,
			float64(out.KeptEnd-out.KeptStart)); err != nil {
			return false, err
		}
	}
	if out.KeptEnd > out.KeptStart {
		if err := s.storeSpans(ctx, tx, r, out.KeptStart, out.KeptEnd); err != nil {
			return false, err
		}
		for i, u := range uuids {
			if err := s.extendLife(ctx, tx, r.Node, u, lives[i], out.KeptStart, out.KeptEnd, int64(retire/time.Second)); err != nil {
				return false, err
			}
		}
		gpus, users := Rollup(counted, out.KeptStart, out.KeptEnd)
		if err := s.keepFacts(ctx, tx, gpus, users, 1); err != nil {
			return false, err
		}
	}
	if r.Final {
		if _, err := s.exec(ctx, tx, stmtEndLives, r.Time, r.Time, r.Node); err != nil {
			return false, err
		}
	}
	return true, nil
}

func userHourArgs(u *UserHour) []any {
	var uid any
	if u.User.UID != nil {
		uid = *u.User.UID
	}
	decl := int64(0)
	if u.User.Declared {
		decl = 1
	}
	return []any{u.Hour, u.Node, u.UUID, u.GPUInstanceID, u.User.Key(), u.Model, u.Profile, u.Slices, u.Total,
		u.User.Runtime, u.User.ContainerID, u.User.PodUID, u.User.Namespace, u.User.Pod, u.User.Container, u.User.SlurmJob, uid,
		u.User.Cgroup, decl, u.User.DeclaredTaskID, u.User.DeclaredProject, u.User.DeclaredOwner, u.LastTime,
		u.Equal, u.Util, u.BusyEqual, u.BusyUtil, u.Energy}
}

type span struct{ start, end int64 }

// storedSpan is a stored report's kept span, with the report's time and
// when it was received: the part after received is provisional (NODE.md
// 12.2).
type storedSpan struct {
	span
	time, received int64
}

func (s *Store) nodeSpans(ctx context.Context, tx *sql.Tx, node string, start, end int64) ([]storedSpan, error) {
	all, err := stmtRows(ctx, s, tx, "node spans", stmtNodeSpans, func(rows *sql.Rows, sp *storedSpan) error {
		return rows.Scan(&sp.start, &sp.end, &sp.time, &sp.received)
	}, node, start, end)
	if err != nil {
		return nil, err
	}
	var out []storedSpan
	for _, sp := range all {
		if sp.end > sp.start {
			out = append(out, sp)
		}
	}
	return out, nil
}

// firmSpans are the spans that clip a new report: each stored span up to
// the time it was received (a span of the future is provisional: the
// node's reports of that time clip it instead).
func firmSpans(spans []storedSpan) []span {
	out := make([]span, 0, len(spans))
	for _, sp := range spans {
		if e := min(sp.end, max(sp.start, sp.received)); e > sp.start {
			out = append(out, span{sp.start, e})
		}
	}
	return out
}

// uncovered returns the part of [start, end) that none of spans covers:
// its latest uncovered stretch when several remain (a report straddling a
// stored span keeps its newer side), an empty one at end when none does.
func uncovered(start, end int64, spans []span) (int64, int64) {
	a, b := start, end
	// Walk back from the end: the newest uncovered stretch.
	for changed := true; changed && a < b; {
		changed = false
		for _, sp := range spans {
			if a >= b {
				break
			}
			if sp.start < b && sp.end > a { // overlaps [a, b)
				if sp.end >= b {
					b = max(a, sp.start)
				} else {
					a = sp.end
				}
				changed = true
			}
		}
	}
	if b <= a {
		return end, end
	}
	return a, b
}

type reportGPU struct{ uuid, model string }

// reportGPUs lists the report's GPUs (its instances' and its gpus'
// UUIDs), in the order they first appear.
func reportGPUs(r *wire.NodeReport) []reportGPU {
	seen := map[string]int{}
	var out []reportGPU
	for _, in := range r.Instances {
		if _, ok := seen[in.UUID]; !ok {
			seen[in.UUID] = len(out)
			out = append(out, reportGPU{in.UUID, in.Name})
		}
	}
	for _, g := range r.GPUs {
		if _, ok := seen[g.UUID]; !ok {
			seen[g.UUID] = len(out)
			out = append(out, reportGPU{g.UUID, ""})
		}
	}
	return out
}

// life is a GPU's open life on a node.
type life struct{ first, last int64 }

// heldLife is an open life of a GPU on a node.
type heldLife struct {
	node string
	life
}

// openLives returns the open lives of the GPUs gpus, on every node, by
// UUID, each UUID's by last covered instant (node_gpus_uuid's order).
func (s *Store) openLives(ctx context.Context, tx *sql.Tx, gpus []reportGPU) (map[string][]heldLife, error) {
	uuids := make([]string, len(gpus))
	for i, g := range gpus {
		uuids[i] = g.uuid
	}
	list := keyListArg(uuids)
	type row struct {
		uuid string
		heldLife
	}
	rows, err := stmtRows(ctx, s, tx, "open lives", stmtOpenLives, func(rows *sql.Rows, h *row) error {
		return rows.Scan(&h.uuid, &h.node, &h.first, &h.last)
	}, list)
	if err != nil {
		return nil, err
	}
	out := make(map[string][]heldLife, len(gpus))
	for _, h := range rows {
		out[h.uuid] = append(out[h.uuid], h.heldLife)
	}
	for _, l := range out {
		slices.SortStableFunc(l, func(a, b heldLife) int { return cmp.Compare(a.last, b.last) })
	}
	return out, nil
}

// ownAndHolder returns, of a GPU's open lives, its open life on node
// (nil: none), and the node that holds it ("" when none: another node
// that reported it after since).
func ownAndHolder(lives []heldLife, node string, since int64) (own *life, holder string) {
	for _, h := range lives {
		switch {
		case h.node == node:
			own = &life{h.first, h.last}
		case h.last > since && holder == "":
			holder = h.node
		}
	}
	return own, holder
}

// extendLife adds the covered span [a, b) to the GPU's open life l on the
// node, ending that life first when its last covered instant is more than
// retire seconds before a, and starting a new one when none is open.
func (s *Store) extendLife(ctx context.Context, tx *sql.Tx, node string, g reportGPU, l *life, a, b, retire int64) error {
	switch {
	case l != nil && l.last+retire < a:
		if _, err := s.exec(ctx, tx, stmtEndLife, l.last+retire, node, g.uuid, l.first); err != nil {
			return err
		}
	case l != nil:
		_, err := s.exec(ctx, tx, stmtExtendLife, a, a, b, b, g.model, node, g.uuid, l.first)
		return err
	}
	_, err := s.exec(ctx, tx, stmtInsertLife, node, g.uuid, a, b, g.model)
	return err
}

// RetireNode ends the capacity of every GPU of node at `at` (`paddle-monitor
// node retire`): they no longer count, and another node may report them.
// It returns how many GPUs it ended; ErrUnknownNode when the node never
// reported.
func (s *Store) RetireNode(ctx context.Context, node string, at int64) (int64, error) {
	var n int64
	op := func(ctx context.Context, tx *sql.Tx) (bool, error) {
		res, err := s.exec(ctx, tx, stmtRetireNode, at, node)
		if err != nil {
			return false, err
		}
		if k, err := res.RowsAffected(); err != nil || k == 0 {
			if err == nil {
				err = fmt.Errorf("%w: %s", ErrUnknownNode, node)
			}
			return false, err
		}
		res, err = s.exec(ctx, tx, stmtEndLives, at, at, node)
		if err != nil {
			return false, err
		}
		if n, err = res.RowsAffected(); err != nil {
			return false, err
		}
		// The retire resolves the node's conflicts, as holder or not.
		if _, err = s.exec(ctx, tx, stmtResolveHeld, at, node); err != nil {
			return false, err
		}
		_, err = s.exec(ctx, tx, stmtResolveConflicting, at, node)
		return true, err
	}
	if s.batch != nil {
		return n, s.batch.run(ctx, "node retire "+node, false, op)
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("store: node retire %s: %w", node, err)
	}
	defer tx.Rollback()
	if _, err := s.exec(ctx, tx, stmtLockTask, "node:"+node); err != nil {
		return 0, fmt.Errorf("store: node retire %s: %w", node, err)
	}
	if _, err := op(ctx, tx); err != nil {
		return 0, err
	}
	return n, tx.Commit()
}

// PruneNodeReports deletes the raw reports older than before (the
// roll-ups stay); it returns how many it deleted. On a partitioned
// PostgreSQL store it first creates the partitions ahead (it is the
// monitor's maintenance loop), then drops the days ending by before
// whole, and deletes the rest only in the day straddling before and in
// the default partition.
func (s *Store) PruneNodeReports(ctx context.Context, before int64) (int64, error) {
	s.ensurePartitions(ctx)
	dropped, _, err := s.dropPartitions(ctx, "node_reports", before)
	if err != nil {
		return dropped, err
	}
	res, err := s.exec(ctx, s.w, stmtPruneNodeReports, before)
	if err != nil {
		return dropped, fmt.Errorf("store: pruning node reports: %w", err)
	}
	n, err := res.RowsAffected()
	return dropped + n, err
}
