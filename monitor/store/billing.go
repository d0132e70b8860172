package store

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
)

// Billing from observations (docs/cost.md, "Two bases"): the part of the
// node reports' hourly roll-ups each task was attributed, and the part of
// each attributed task's counted interval its node's reports covered.
//
// The roll-ups are summed in SQL, grouped by node and user (the unit a
// user is tied by), never row by row in Go: a month of 10,000 GPUs with
// one user each is 7.2 million rows but some ten thousand groups. Each
// group is tied once (LedgerTies: one statement per tie rule for them all); a group
// whose hours would tie to different registrations (its first and last
// report time fall on both sides of a registration's start) is summed
// again by report time, which only re-runs happen to need.

// billingUsersSQL: the roll-up table of grain's primary key (bucket,
// node, uuid, gpu_instance_id, user_key): the window's buckets are a range
// of its first column. A window's first and last hours, when they are not
// whole, count in proportion to the part of them inside it (part:
// hourPart).
func billingUsersSQL(grain, part string) string {
	first := firstTimeColumn(grain)
	return `SELECT node, user_key, CASE WHEN gpu_instance_id < 0 THEN 0 ELSE 1 END, model, profile, slices, total_slices,
		MIN(` + first + `), MAX(last_time),
		SUM(equal_s` + part + `), SUM(busy_equal_s` + part + `), SUM(energy_j` + part + `)
		FROM node_user_` + grain + `s WHERE ` + grain + ` >= ? AND ` + grain + ` < ?
		GROUP BY node, user_key, CASE WHEN gpu_instance_id < 0 THEN 0 ELSE 1 END, model, profile, slices, total_slices`
}

// billingUserTimesSQL: the same group by report time (the rare group of
// billingUsers that ties to several registrations): the primary key's
// hour range.
func billingUserTimesSQL(part string) string {
	return `SELECT last_time, SUM(equal_s` + part + `), SUM(busy_equal_s` + part + `), SUM(energy_j` + part + `)
		FROM node_user_hours WHERE hour >= ? AND hour < ? AND node = ? AND user_key = ?
		AND CASE WHEN gpu_instance_id < 0 THEN 0 ELSE 1 END = ? AND model = ? AND profile = ? AND slices = ? AND total_slices = ?
		GROUP BY last_time`
}

// billingBucketsSQL: one group of billingUsers at grain by bucket (a day's
// or a month's group whose ties differ, read again a grain finer): the
// primary key's bucket range.
func billingBucketsSQL(grain string) string {
	first := firstTimeColumn(grain)
	return `SELECT ` + grain + `, MIN(` + first + `), MAX(last_time), SUM(equal_s), SUM(busy_equal_s), SUM(energy_j)
		FROM node_user_` + grain + `s WHERE ` + grain + ` >= ? AND ` + grain + ` < ? AND node = ? AND user_key = ?
		AND CASE WHEN gpu_instance_id < 0 THEN 0 ELSE 1 END = ? AND model = ? AND profile = ? AND slices = ? AND total_slices = ?
		GROUP BY ` + grain
}

// Observations implements report.Observer: the window's attributed use by
// task (with the declared figures of the part of its counted interval its
// node's reports covered), the undeclared use by namespace and whether any
// node report covered the window at all.
func (s *Store) Observations(ctx context.Context, w facts.Window) (*facts.Observations, error) {
	from, to := w.From.Unix(), w.To.Unix()
	obs := &facts.Observations{}
	// Every read clips at now (NODE.md 12.2): the part of a stored span
	// after its report was received is provisional, and no use is billed
	// past the monitor's clock.
	cut := min(to, s.now().Unix())
	if cut <= from {
		return obs, nil
	}
	// The spans the nodes' reports covered, exact to the second.
	spans, err := s.spansIn(ctx, from, cut)
	if err != nil {
		return nil, err
	}
	if obs.Covered = len(spans) > 0; !obs.Covered {
		return obs, nil
	}
	holders, err := s.gpuHolders(ctx)
	if err != nil {
		return nil, err
	}
	segs, err := s.segments(ctx, from, cut)
	if err != nil {
		return nil, err
	}
	perSegment, err := each(segs, func(sg segment) ([]billingGroup, error) { return s.segmentGroups(ctx, sg) })
	if err != nil {
		return nil, err
	}
	// A window of one segment (a month) keeps its groups as read, not a
	// copy of them.
	var groups []billingGroup
	if len(perSegment) == 1 {
		groups = perSegment[0]
	} else {
		groups = slices.Concat(perSegment...)
	}
	// Tie each group; the attributed use goes to its task.
	type taskUse struct {
		nodes map[string]float64
		use   []facts.InstanceUse
	}
	tasks := map[int64]*taskUse{}
	// The use nobody could be tied to, by GPU instance and hour (20.2's
	// exception: billing_unattributed.go).
	un := untied{}
	var untiedGroups []billingGroup
	// The ties of all the groups, one statement per tie rule (LedgerTies),
	// keyed by the user_key each group was read with (the identity's Key
	// is not built again for each of 300,000 users at fleet size).
	tieUsers := make([]UserHour, len(groups))
	for i := range groups {
		tieUsers[i] = UserHour{Node: groups[i].node, User: groups[i].user, key: groups[i].key}
	}
	ties, err := s.LedgerTies(ctx, tieUsers)
	if err != nil {
		return nil, err
	}
	for i, g := range groups {
		cands := ties[tieUsers[i].TieKey()]
		parts, err := s.resolveGroup(ctx, g, cands)
		if err != nil {
			return nil, err
		}
		for _, p := range parts {
			t := latestTie(cands, p.maxLast)
			if t == nil {
				obs.Undeclared = append(obs.Undeclared, facts.UndeclaredUse{Namespace: g.user.Namespace, Use: p.use})
				// A group split by report time (some of it tied) is not
				// claimed: only wholly untied users' use is.
				if len(parts) == 1 {
					untiedGroups = append(untiedGroups, g)
				}
				continue
			}
			u := tasks[t.Key]
			if u == nil {
				u = &taskUse{nodes: map[string]float64{}}
				tasks[t.Key] = u
			}
			u.nodes[g.node] += p.use.Seconds
			u.use = append(u.use, p.use)
		}
	}
	// The window's tasks, read at once; a task tied to use in it that
	// they do not hold, by its key.
	wt, err := s.windowTasks(ctx, w)
	if err != nil {
		return nil, err
	}
	for id := range tasks {
		if wt[id] == nil {
			if wt[id], err = s.billingTaskByID(ctx, id); err != nil {
				return nil, err
			}
		}
	}
	// The tasks nothing was attributed to whose node covered some of
	// their counted interval: on the observed basis they pay what was
	// attributed to them there, nothing (docs/cost.md, "Never observed").
	for id, t := range wt {
		if tasks[id] == nil && t.covered(from, to) && spans[taskNode(t.k8sNode, t.keys[8])] != nil {
			tasks[id] = &taskUse{nodes: map[string]float64{}}
		}
	}
	ids := slices.Sorted(maps.Keys(tasks))
	// Each task's node: the one it was attributed most on (ties by
	// name), else its k8s_node, else its host name; and the GPU
	// instances its declarations may claim untied use of (billedTask).
	nodes := make(map[int64]string, len(ids))
	claimable := map[untiedKey]bool{}
	for _, id := range ids {
		u, t := tasks[id], wt[id]
		node := ""
		for _, n := range slices.Sorted(maps.Keys(u.nodes)) {
			if node == "" || u.nodes[n] > u.nodes[node] {
				node = n
			}
		}
		if node == "" {
			node = taskNode(t.k8sNode, t.keys[8])
		}
		nodes[id] = node
		for _, g := range t.gpus {
			if g.uuid != "" && slices.Contains(holders[g.uuid], node) {
				claimable[untiedKey{node, g.uuid, g.instance}] = true
			}
		}
	}
	// Untied use is read only where a task may claim it (20.2: a GPU
	// instance a task declared on its node), not on every GPU.
	if err := s.untiedAll(ctx, untiedGroups, claimable, un); err != nil {
		return nil, err
	}
	for _, id := range ids {
		u := tasks[id]
		t, any := billedTask(wt[id], from, to, nodes[id], spans, holders, un)
		if len(u.use) == 0 && !any {
			continue
		}
		t.ID, t.Observed = id, u.use
		obs.Tasks = append(obs.Tasks, *t)
	}
	sort.SliceStable(obs.Undeclared, func(i, j int) bool { return obs.Undeclared[i].Namespace < obs.Undeclared[j].Namespace })
	return obs, nil
}

// billingGroup is one (node, user, kind of instance) of the window's
// roll-ups, summed.
type billingGroup struct {
	seg              segment // the part of the window it was read from
	node, key        string
	user             UserIdentity
	minLast, maxLast int64
	use              facts.InstanceUse
}

// hourPart is the factor of a roll-up's sums for the window [from, to):
// " * " the part of the row's hour inside it, between 0 and 1 (whole
// numbers of the window's ends, never text of a caller); "" when the
// window is whole hours.
func hourPart(from, to int64) string {
	if mod(from, 3600) == 0 && mod(to, 3600) == 0 {
		return ""
	}
	return fmt.Sprintf(` * ((CASE WHEN hour + 3600 < %d THEN hour + 3600 ELSE %d END) - (CASE WHEN hour > %d THEN hour ELSE %d END)) / 3600.0`,
		to, to, from, from)
}

// billingUsers reads the roll-ups of segment sg (whole hours, or a part
// of one hour in proportion) grouped by node and user.
func (s *Store) billingUsers(ctx context.Context, sg segment) ([]billingGroup, error) {
	h0, to := sg.from-mod(sg.from, 3600), sg.to
	part := ""
	if sg.grain == "hour" {
		part = hourPart(sg.from, sg.to)
	}
	var out []billingGroup
	var err error
	if oneBucket(grainPart{sg.grain, sg.from, sg.to}) {
		// A whole month, day or hour: its rows as stored
		// (billing_bucket.go).
		out, err = s.billingBucketUsers(ctx, sg)
	} else {
		out, err = builtRows(ctx, s, s.r, "billing", billingUsersByGrain[sg.grain], billingUsersSQL(sg.grain, part), func(rows *sql.Rows, g *billingGroup) error {
			var mig int64
			g.seg = sg
			err := rows.Scan(&g.node, &g.key, &mig, &g.use.Model, &g.use.Profile, &g.use.Slices, &g.use.TotalSlices,
				&g.minLast, &g.maxLast, &g.use.Seconds, &g.use.BusySeconds, &g.use.EnergyJoules)
			g.use.MIG = mig == 1
			return err
		}, h0, to)
	}
	if err != nil {
		return nil, err
	}
	for i := range out {
		g := &out[i]
		g.use.Node = g.node
		if id, ok := parseUserKey(g.key); ok {
			g.user = id
			continue
		}
		var uid sql.NullInt64
		var decl int64
		u := &g.user
		if err := s.queryRow(ctx, s.r, stmtBillingIdentity, h0, to, g.node, g.key).Scan(&u.Runtime, &u.ContainerID, &u.PodUID,
			&u.Namespace, &u.Pod, &u.Container, &u.SlurmJob, &uid, &u.Cgroup, &decl, &u.DeclaredTaskID, &u.DeclaredProject,
			&u.DeclaredOwner); err != nil {
			return nil, fmt.Errorf("store: billing: %w", err)
		}
		if uid.Valid {
			v := uid.Int64
			u.UID = &v
		}
		u.Declared = decl != 0
	}
	return out, nil
}

// parseUserKey is the identity UserIdentity.Key joined into key, ok false
// when key does not split back into it.
func parseUserKey(key string) (UserIdentity, bool) {
	f := strings.Split(key, "\x1f")
	if len(f) != 13 || (f[9] != "" && f[9] != "d") {
		return UserIdentity{}, false
	}
	id := UserIdentity{Runtime: f[0], ContainerID: f[1], PodUID: f[2], Namespace: f[3], Pod: f[4], Container: f[5], SlurmJob: f[6],
		Cgroup: f[8], Declared: f[9] == "d", DeclaredTaskID: f[10], DeclaredProject: f[11], DeclaredOwner: f[12]}
	if f[7] != "" {
		v, err := strconv.ParseInt(f[7], 10, 64)
		if err != nil || strconv.FormatInt(v, 10) != f[7] {
			return UserIdentity{}, false
		}
		id.UID = &v
	}
	if id.Key() != key {
		return UserIdentity{}, false
	}
	return id, true
}

// billingUserTimes is group g summed again by report time, in its
// segment (one part a report time; a group read from the raw reports is
// one report time's already).
func (s *Store) billingUserTimes(ctx context.Context, g billingGroup) ([]billingGroup, error) {
	if g.seg.raw {
		return []billingGroup{g}, nil
	}
	h0, from, to := g.seg.from-mod(g.seg.from, 3600), g.seg.from, g.seg.to
	mig := 0
	if g.use.MIG {
		mig = 1
	}
	return builtRows(ctx, s, s.r, "billing", stmtBillingUserTimes, billingUserTimesSQL(hourPart(from, to)), func(rows *sql.Rows, p *billingGroup) error {
		*p = g
		err := rows.Scan(&p.maxLast, &p.use.Seconds, &p.use.BusySeconds, &p.use.EnergyJoules)
		p.minLast = p.maxLast
		return err
	}, h0, to, g.node, g.key, mig, g.use.Model, g.use.Profile, g.use.Slices, g.use.TotalSlices)
}

// billedTask is a task's keys and its declared figures over the part of
// its counted interval inside [from, to) that its node's reports covered,
// GPU by GPU (the instant rule): a GPU its node holds by the spans in which
// a report observed that GPU; a GPU without a UUID, with one no node holds,
// or counted without being listed by the node's own spans; a GPU another
// node holds not at all (it stays declared). node is the node the task was
// attributed most on, else its k8s_node or host name. any says some of
// its interval was covered on some GPU. Where a declared GPU its node
// holds had untied use (un), the task claims its declared figure of it
// (Unattributed, untied.claim).
func billedTask(bt *billingTask, from, to int64, node string, spans Spans,
	holders map[string][]string, un untied) (*facts.ObservedTask, bool) {
	k, k8sNode, unlisted, start, end, e := bt.keys, bt.k8sNode, bt.unlisted, bt.start, bt.end, bt.e
	t := &facts.ObservedTask{Key: map[string]string{"task_id": k[0], "task_name": k[1], "project": k[2], "owner": k[3],
		"priority": k[4], "env": k[5], "pipeline": k[6], "step": k[7], "hostname": k[8],
		"node": nodeKeyOf(k8sNode, k[8])}, Failed: bt.failed == 1}
	s0, e1 := max(start, from), min(e, to)
	if e1 <= s0 {
		return t, false
	}
	own := spans[node]
	// cover is the coverage of one declared GPU.
	cover := func(uuid string) []span {
		hs := holders[uuid]
		switch {
		case uuid == "" || len(hs) == 0:
			return own[""]
		case slices.Contains(hs, node):
			return own[uuid]
		}
		return nil
	}
	sec := float64(e1 - s0)
	t.CountedSeconds = sec
	t.CoveredSeconds = sec
	anyCovered := false
	if unlisted > 0 {
		c := float64(covered(own[""], s0, e1))
		t.CoveredUnlistedSeconds = float64(unlisted) * c
		t.CoveredSeconds = min(t.CoveredSeconds, c)
		anyCovered = anyCovered || c > 0
	}
	for _, gpu := range bt.gpus {
		c := float64(covered(cover(gpu.uuid), s0, e1))
		t.CoveredSeconds = min(t.CoveredSeconds, c)
		if c == 0 {
			continue
		}
		anyCovered = true
		if gpu.uuid != "" && slices.Contains(holders[gpu.uuid], node) {
			t.Unattributed = append(t.Unattributed, un.claim(untiedKey{node, gpu.uuid, gpu.instance}, gpu.share, s0, e1, own[gpu.uuid])...)
		}
		g := facts.GPUSums{Key: maps.Clone(t.Key), Profile: gpu.profile, MIG: gpu.mig == 1}
		g.Key["model"] = gpu.model
		share := gpu.share
		// The report's GPU sums (gpuSumsSQL) over the covered seconds.
		g.InstanceSeconds = int64(math.Round(c))
		g.GPUSeconds = share * c
		if t.Failed {
			g.FailedGPUSeconds = g.GPUSeconds
		}
		if gpu.samples > 0 && gpu.idle.Valid {
			g.IdleGPUSeconds = share * c * gpu.idle.Float64
			if !t.Failed {
				g.IdleOKGPUSeconds = g.IdleGPUSeconds
			}
		}
		if gpu.samples > 0 && gpu.util.Valid {
			g.UtilWeighted, g.UtilSeconds = share*c*gpu.util.Float64, share*c
		}
		if end.Valid && gpu.energy.Valid {
			if e > start {
				g.EnergyJoules = gpu.energy.Float64 * c / float64(e-start)
			} else {
				g.EnergyJoules = gpu.energy.Float64
			}
		}
		t.CoveredDeclared = append(t.CoveredDeclared, g)
	}
	if len(bt.gpus) == 0 && unlisted == 0 {
		// A task without GPUs is covered as its node is: on the observed
		// basis there, with nothing to pay (no row of it turns mixed).
		c := float64(covered(own[""], s0, e1))
		t.CoveredSeconds = c
		anyCovered = c > 0
	}
	return t, anyCovered
}

// taskNode is the node of a task no user was attributed to: its
// k8s_node, else its host name.
func taskNode(k8sNode, hostname string) string {
	if k8sNode != "" {
		return k8sNode
	}
	return hostname
}

// nodeKeyOf is the report key node of a task (nodeKey): its k8s_node
// lower-cased, else its host name.
func nodeKeyOf(k8sNode, hostname string) string {
	if k8sNode != "" {
		return strings.ToLower(k8sNode)
	}
	return hostname
}

// gpuHolders are the nodes that held each GPU UUID.
func (s *Store) gpuHolders(ctx context.Context) (map[string][]string, error) {
	held, err := stmtRows(ctx, s, s.r, "billing", stmtGPUHolders, func(rows *sql.Rows, h *[2]string) error {
		return rows.Scan(&h[0], &h[1])
	})
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, h := range held {
		out[h[1]] = append(out[h[1]], h[0])
	}
	return out, nil
}

func mod(a, b int64) int64 { return ((a % b) + b) % b }

// latestTie is the registration of cands (oldest first) that started
// last by at, or nil.
func latestTie(cands []Tie, at int64) *Tie {
	var t *Tie
	for i := range cands {
		if cands[i].StartTime <= at {
			t = &cands[i]
		}
	}
	return t
}
