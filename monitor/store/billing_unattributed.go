package store

import (
	"context"
	"database/sql"
	"sort"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
)

// The exception of MONITOR.md 20.2: on the observed basis a task pays what
// was attributed to it, except that where a GPU it declared had use
// nobody could be tied to at that instant it pays its declared figure for
// it, up to that use. The node reports' roll-ups are hourly: an hour's
// row says how much an untied user used a GPU instance in the hour and
// the time of the last report of it (last_time), not when inside the hour.
// So a task claims an hour's untied use only where it is certain that use
// was while the task ran: every second the node's reports covered the GPU
// in [hour, last_time) is inside the task's counted interval. Its claim
// is then min(share × its covered seconds in the hour, the untied use left
// there), the tasks taking in the order of their store keys, so that two
// tasks declaring one GPU never claim more than its untied use. (Untied
// use in an hour the task shares with other covered time of the GPU is
// not claimed: exact to the second would need the raw reports.) The claims are
// by the namespace of the untied user (facts.ObservedTask.Unattributed):
// the report bills those no --namespace-projects maps (a mapped
// namespace's use is undeclared, charged to its project, not claimed).

// billingUntiedHoursSQL: one untied user's use by hour and GPU instance,
// node_user_hours' primary key's hour range (as billingUserTimesSQL).
func billingUntiedHoursSQL(part string) string {
	return `SELECT hour, uuid, gpu_instance_id, MAX(last_time), SUM(equal_s` + part + `), SUM(busy_equal_s` + part + `)
		FROM node_user_hours WHERE hour >= ? AND hour < ? AND node = ? AND user_key = ?
		AND CASE WHEN gpu_instance_id < 0 THEN 0 ELSE 1 END = ? AND model = ? AND profile = ? AND slices = ? AND total_slices = ?
		GROUP BY hour, uuid, gpu_instance_id`
}

// billingUntiedAllSQL: every user's use by hour and GPU instance over the
// window, in the primary key's order (a range of its first column): one
// pass for many untied users instead of one range scan each.
func billingUntiedAllSQL(part string) string {
	return `SELECT hour, node, uuid, gpu_instance_id, user_key, CASE WHEN gpu_instance_id < 0 THEN 0 ELSE 1 END, model, profile, slices,
		total_slices, last_time, equal_s` + part + `, busy_equal_s` + part + `
		FROM node_user_hours WHERE hour >= ? AND hour < ? ORDER BY hour, node, uuid, gpu_instance_id, user_key`
}

// untiedBatch is how many untied users of a segment are read one by one;
// past it, one pass over the segment's hours reads them all (each user's
// read is a range scan of the window's hours: a month of 10,000 GPUs with
// a new pod a day has 150,000 of them).
const untiedBatch = 32

// untiedAll adds the use of the untied groups to u on the GPU instances
// tasks may claim (claimable): by group, or, past untiedBatch in a
// segment, in one pass over its hours. A group on a node without such an
// instance is not read (most of a fleet's untied users, where tasks
// declare no UUIDs or the untied pods run on other GPUs).
func (s *Store) untiedAll(ctx context.Context, groups []billingGroup, claimable map[untiedKey]bool, u untied) error {
	if len(claimable) == 0 {
		return nil
	}
	claimNodes := map[string]bool{}
	for k := range claimable {
		claimNodes[k.node] = true
	}
	bySeg := map[segment][]billingGroup{}
	var order []segment
	for _, g := range groups {
		if !claimNodes[g.node] {
			continue
		}
		if bySeg[g.seg] == nil {
			order = append(order, g.seg)
		}
		bySeg[g.seg] = append(bySeg[g.seg], g)
	}
	for _, sg := range order {
		gs := bySeg[sg]
		if len(gs) <= untiedBatch {
			for _, g := range gs {
				if err := s.untiedHours(ctx, sg, g, u); err != nil {
					return err
				}
			}
			continue
		}
		if err := s.untiedPass(ctx, sg, gs, u); err != nil {
			return err
		}
	}
	return nil
}

// groupKey is what a billing group is grouped by.
type groupKey struct {
	node, key           string
	mig                 bool
	model, profile      string
	slices, totalSlices int64
}

// untiedPass is untiedHours for every group of gs (all of segment sg) in
// one pass over the segment's hours.
func (s *Store) untiedPass(ctx context.Context, sg segment, gs []billingGroup, u untied) error {
	h0, from, to := sg.from-mod(sg.from, 3600), sg.from, sg.to
	want := make(map[groupKey]*billingGroup, len(gs))
	for i := range gs {
		g := &gs[i]
		want[groupKey{g.node, g.key, g.use.MIG, g.use.Model, g.use.Profile, g.use.Slices, g.use.TotalSlices}] = g
	}
	type row struct {
		hour, instance, last int64
		k                    groupKey
		uuid                 string
		sec, busy            float64
	}
	rows, err := builtRows(ctx, s, s.r, "billing", stmtBillingUntiedAll, billingUntiedAllSQL(hourPart(from, to)), func(rows *sql.Rows, r *row) error {
		var mig int64
		err := rows.Scan(&r.hour, &r.k.node, &r.uuid, &r.instance, &r.k.key, &mig, &r.k.model, &r.k.profile, &r.k.slices,
			&r.k.totalSlices, &r.last, &r.sec, &r.busy)
		r.k.mig = mig == 1
		return err
	}, h0, to)
	if err != nil {
		return err
	}
	for _, r := range rows {
		if g := want[r.k]; g != nil {
			u.add(g, r.uuid, r.instance, r.hour, r.last, r.sec, r.busy)
		}
	}
	return nil
}

// add keeps group g's use of one GPU instance in one hour (nothing when
// it used none).
func (u untied) add(g *billingGroup, uuid string, instance, hour, last int64, sec, busy float64) {
	if sec <= 0 {
		return
	}
	k := untiedKey{g.node, uuid, instance}
	if u[k] == nil {
		u[k] = map[int64][]*untiedUse{}
	}
	use := g.use
	use.Seconds, use.BusySeconds, use.EnergyJoules = sec, busy, 0
	u[k][hour] = append(u[k][hour], &untiedUse{namespace: g.user.Namespace, use: use, last: last, left: sec})
}

// untiedKey is one GPU instance of a node (gpu_instance_id -1: the whole
// GPU).
type untiedKey struct {
	node, uuid string
	instance   int64
}

// untiedUse is one untied user's use of one GPU instance in one hour,
// with what tasks have not claimed of it yet.
type untiedUse struct {
	namespace string
	use       facts.InstanceUse // of the hour: Seconds, BusySeconds
	last      int64             // the last report time of it in the hour
	left      float64
}

// untied are the window's untied use by GPU instance and hour.
type untied map[untiedKey]map[int64][]*untiedUse

// untiedHours adds group g's use in segment sg, by hour and GPU instance,
// to u (from the hourly rows: a part of an hour in proportion).
func (s *Store) untiedHours(ctx context.Context, sg segment, g billingGroup, u untied) error {
	h0, from, to := sg.from-mod(sg.from, 3600), sg.from, sg.to
	mig := 0
	if g.use.MIG {
		mig = 1
	}
	type row struct {
		hour, instance, last int64
		uuid                 string
		sec, busy            float64
	}
	rows, err := builtRows(ctx, s, s.r, "billing", stmtBillingUntiedHours, billingUntiedHoursSQL(hourPart(from, to)), func(rows *sql.Rows, r *row) error {
		return rows.Scan(&r.hour, &r.uuid, &r.instance, &r.last, &r.sec, &r.busy)
	}, h0, to, g.node, g.key, mig, g.use.Model, g.use.Profile, g.use.Slices, g.use.TotalSlices)
	if err != nil {
		return err
	}
	for _, r := range rows {
		u.add(&g, r.uuid, r.instance, r.hour, r.last, r.sec, r.busy)
	}
	return nil
}

// claim takes, for a task's declared GPU instance k at share over
// [s0, e1), its declared figure out of the untied use of each hour that
// was certainly while it ran, up to what is left of it: the seconds its
// node's reports covered the GPU in that hour (cover) × share. The claims come back by namespace, hours in
// order.
func (u untied) claim(k untiedKey, share float64, s0, e1 int64, cover []span) []facts.UndeclaredUse {
	hours := u[k]
	if len(hours) == 0 || share <= 0 {
		return nil
	}
	keys := make([]int64, 0, len(hours))
	for h := range hours {
		keys = append(keys, h)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	var out []facts.UndeclaredUse
	for _, h := range keys {
		want := share * float64(covered(cover, max(s0, h), min(e1, h+3600)))
		for _, e := range hours[h] {
			end := min(h+3600, e.last)
			all := covered(cover, h, end)
			if all == 0 || covered(cover, max(s0, h), min(e1, end)) < all {
				continue // some of that use may be outside the task's time
			}
			take := min(want, e.left)
			if take <= 0 {
				continue
			}
			e.left -= take
			want -= take
			use := e.use
			use.Seconds = take
			use.BusySeconds = e.use.BusySeconds * take / e.use.Seconds
			out = append(out, facts.UndeclaredUse{Namespace: e.namespace, Use: use})
		}
	}
	return out
}
