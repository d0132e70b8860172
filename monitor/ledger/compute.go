package ledger

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/access"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
)

// Compute computes the ledger q asks for: the window's facts gathered
// (gather), then grouped by q.By for q.Scope (group), as a closed
// month's frozen facts are (Group).
func Compute(ctx context.Context, src Source, q Query) (*Ledger, error) {
	f, l, err := gather(ctx, src, q)
	if err != nil {
		return nil, err
	}
	group(l, f, q.Scope)
	return l, nil
}

// Facts are the ledger facts of q's window for every reader (q.Scope is
// not read; q.By only checked): what a close freezes, and what Compute
// groups.
func Facts(ctx context.Context, src Source, q Query) (*store.LedgerFacts, error) {
	q.Scope = nil
	f, _, err := gather(ctx, src, q)
	return f, err
}

// gather reads q's window and counts every part of the ledger into facts
// at the finest key (store.LedgerKey), for every reader; beside them,
// the ledger without rows: its window and inputs, the users q's scope
// sees and the tasks and nodes observed (discrepancies).
func gather(ctx context.Context, src Source, q Query) (*store.LedgerFacts, *Ledger, error) {
	q, err := settle(ctx, src, q)
	if err != nil {
		return nil, nil, err
	}
	from, to := q.Window.From.Unix(), q.Window.To.Unix()
	retire := int64(q.Retire / time.Second)
	// Every read clips at now (NODE.md 12.2): a stored span after its
	// receipt is provisional, and no capacity or state runs past the
	// clock. The whole hours come from the roll-ups, the rest of the hour
	// now is in from the raw reports.
	cut := min(to, q.Now.Unix())
	d, rolledTo, err := loadData(ctx, src, q.Raw, from, cut, retire)
	if err != nil {
		return nil, nil, err
	}
	l := &Ledger{From: q.Window.From, To: q.Window.To, By: q.By, Split: q.Split,
		observed: map[int64]*observedTask{}, covered: map[string]bool{}}
	g := &gatherer{f: &store.LedgerFacts{Split: q.Split, Priced: q.Prices != nil}, at: map[store.LedgerKey]int{}}
	if q.Prices != nil {
		l.Currency = q.Prices.Currency
		g.f.Currency = q.Prices.Currency
	}
	g.addGPUs(l, q, d, from, cut, retire)
	users, err := g.addUsers(ctx, src, l, q, d, from, rolledTo)
	if err != nil {
		return nil, nil, err
	}
	l.Users = sortedUsers(users)
	return g.f, l, nil
}

// settle checks q and fills its defaults: the retire delay, the instant
// and whether the window needs the raw reports.
func settle(ctx context.Context, src Source, q Query) (Query, error) {
	if err := q.Check(); err != nil {
		return q, err
	}
	if q.Retire <= 0 {
		q.Retire = store.DefaultNodeRetire
	}
	if q.Now.IsZero() {
		q.Now = time.Now()
		if c, ok := src.(clock); ok {
			q.Now = c.Now()
		}
	}
	if !q.Raw {
		raw, err := rawFor(ctx, src, q.Window)
		if err != nil {
			return q, err
		}
		q.Raw = raw
	}
	return q, nil
}

// loadData reads the ledger's data of [from, cut): from the raw reports
// when raw, else the whole hours from the roll-ups and the part of an hour
// at cut from the raw reports (the current hour, when cut is now).
// rolledTo is where the roll-ups' part ends.
func loadData(ctx context.Context, src Source, raw bool, from, cut, retire int64) (d *store.LedgerData, rolledTo int64, err error) {
	switch {
	case cut <= from:
		return &store.LedgerData{}, from, nil
	case raw:
		d, err = src.LedgerDataRaw(ctx, from, cut, retire)
		return d, from, err
	}
	rolledTo = max(from, cut-cut%3600)
	if d, err = src.LedgerData(ctx, from, rolledTo, retire); err != nil || rolledTo == cut {
		return d, rolledTo, err
	}
	tail, err := src.LedgerDataRaw(ctx, rolledTo, cut, retire)
	if err != nil {
		return nil, 0, err
	}
	// The lives read twice count once: capacity is their spans' union.
	d.Lives = append(d.Lives, tail.Lives...)
	d.GPUs = append(d.GPUs, tail.GPUs...)
	d.Users = append(d.Users, tail.Users...)
	return d, rolledTo, nil
}

// clock is a Source with a clock of its own (the store's), which a
// ledger without Now reads to, as the report does.
type clock interface{ Now() time.Time }

// GPU names one GPU of one node.
type GPU struct{ Node, UUID string }

// Capacity is each GPU's capacity in [from, cut) as the ledger counts it,
// the union of its lives' spans (a node that came back may have filled a
// gap of an ended life), each ended by --node-retire after its last
// report (retire) and by its end, as sorted disjoint intervals; and each
// GPU's model. cut is the window's end or now, whichever is earlier:
// capacity never runs past now. The FOCUS export's declared offset reads
// the same spans (monitor/focus).
func Capacity(d *store.LedgerData, from, cut, retire int64) (map[GPU][][2]int64, map[GPU]string) {
	spans, model := map[GPU][][2]int64{}, map[GPU]string{}
	for _, life := range d.Lives {
		end := min(cut, life.LastEnd+retire)
		if life.EndedAt != nil {
			end = min(end, *life.EndedAt)
		}
		k := GPU{life.Node, life.UUID}
		if start := max(life.FirstStart, from); end > start {
			spans[k] = append(spans[k], [2]int64{start, end})
		}
		if life.Model != "" {
			model[k] = life.Model
		}
	}
	for k, l := range spans {
		spans[k] = union(l)
	}
	return spans, model
}

// addGPUs counts capacity, unallocated and what the reports did not
// cover, per (node, GPU) (only an administrator sees them: group).
func (g *gatherer) addGPUs(l *Ledger, q Query, d *store.LedgerData, from, cut, retire int64) {
	spans, model := Capacity(d, from, cut, retire)
	capacity := map[GPU]float64{}
	for k, list := range spans {
		var n int64
		for _, sp := range list {
			n += sp[1] - sp[0]
		}
		capacity[k] = float64(n)
	}
	observed := map[GPU]float64{}
	for _, x := range d.GPUs {
		k := GPU{x.Node, x.UUID}
		observed[k] += x.Observed
		l.covered[x.Node] = true
		if model[k] == "" {
			model[k] = x.Model
		}
		price, ok := gpuPrice(q.Prices, x.Model)
		h := x.Unallocated / 3600
		g.add(store.LedgerKey{Node: x.Node, UUID: x.UUID, Instance: -1, Model: x.Model, State: Unallocated}, h, h*price, ok)
	}
	for _, k := range gpuKeys(capacity, observed) {
		un := (capacity[k] - observed[k]) / 3600
		price, ok := gpuPrice(q.Prices, model[k])
		f := g.add(store.LedgerKey{Node: k.Node, UUID: k.UUID, Instance: -1, Model: model[k], State: Unobserved}, un, un*price, ok)
		f.Capacity += capacity[k] / 3600
	}
}

// gpuKeys are the GPUs with a capacity or an observation, by node then
// UUID, so that the sums are added in the same order on every run.
func gpuKeys(capacity, observed map[GPU]float64) []GPU {
	keys := make([]GPU, 0, len(capacity))
	for k := range capacity {
		keys = append(keys, k)
	}
	for k := range observed {
		if _, ok := capacity[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b GPU) int {
		return cmp.Or(strings.Compare(a.Node, b.Node), strings.Compare(a.UUID, b.UUID))
	})
	return keys
}

// addUsers counts the users' parts, tied to registrations: the candidates
// of every user read at once; a sum whose ties differ (a registration
// started inside it) counted again one grain finer, down to its hours
// (resolve). It returns the use not attributed to a task, by state,
// project and user.
func (g *gatherer) addUsers(ctx context.Context, src Source, l *Ledger, q Query, d *store.LedgerData, from, to int64) (map[string]*UserUse, error) {
	ties, err := src.LedgerTies(ctx, d.Users)
	if err != nil {
		return nil, err
	}
	c := &userCounter{g: g, l: l, q: q, users: map[string]*UserUse{}}
	for i := range d.Users {
		u := &d.Users[i]
		ck := u.TieKey()
		if err := c.resolve(ctx, src, u, ties[ck], ck, from, to); err != nil {
			return nil, err
		}
	}
	return c.users, nil
}

// resolve counts u under the registration its report times tie it to: a
// row of one hour (no grain) by its last report time; a sum whose first
// and last report times tie alike as a whole; else its finer rows, each
// resolved in turn (a sum whose finer rows are no longer kept, as a
// whole, by its last report time).
func (c *userCounter) resolve(ctx context.Context, src Source, u *store.UserHour, cands []store.Tie, ck string, from, to int64) error {
	tie := latest(cands, u.LastTime)
	if u.Grain == "" {
		c.count(u, tie, ck)
		return nil
	}
	first := u.FirstTime
	if first == 0 || first > u.LastTime {
		first = u.LastTime
	}
	if latest(cands, first) == tie {
		c.count(u, tie, ck)
		return nil
	}
	rows, err := src.LedgerUserHours(ctx, from, to, u)
	if err != nil {
		return err
	}
	if len(rows) == 0 {
		c.count(u, tie, ck)
		return nil
	}
	for j := range rows {
		if err := c.resolve(ctx, src, &rows[j], cands, ck, from, to); err != nil {
			return err
		}
	}
	return nil
}

// userCounter counts one user's sums into the ledger.
type userCounter struct {
	g     *gatherer
	l     *Ledger
	q     Query
	users map[string]*UserUse
}

// count adds u's part under its state: attributed when tie names a
// registration, undeclared when the namespace maps to a project,
// unattributed otherwise; the users' list has those q's scope sees.
func (c *userCounter) count(u *store.UserHour, tie *store.Tie, ck string) {
	q := c.q
	part := u.Equal
	if q.Split == SplitUtil {
		part = u.Util
	}
	h := part / 3600
	state, project, owner := Unattributed, "", ""
	switch {
	case tie != nil:
		state, project, owner = Attributed, tie.Project, tie.Owner
		o := c.l.observed[tie.Key]
		if o == nil {
			o = &observedTask{node: u.Node, uuids: map[string]bool{}}
			c.l.observed[tie.Key] = o
		}
		o.hours += h
		o.uuids[u.UUID] = true
	default:
		if p, ok := q.Namespaces.Project(u.User.Namespace); ok {
			state, project = Undeclared, p
		}
	}
	price, ok := instancePrice(q.Prices, u)
	c.g.add(store.LedgerKey{Node: u.Node, UUID: u.UUID, Instance: u.GPUInstanceID, Model: u.Model, State: state,
		Project: project, Owner: owner, Namespace: u.User.Namespace}, h, h*price, ok)
	if state != Attributed && visible(q.Scope, state, project, owner) {
		uk := state + "\x1e" + project + "\x1e" + ck
		use := c.users[uk]
		if use == nil {
			use = &UserUse{Node: u.Node, User: u.User, State: state, Project: project, order: u.Node + u.UserKey()}
			c.users[uk] = use
		}
		use.GPUHours += h
		use.Cost += h * price
		use.Unpriced = use.Unpriced || !ok
	}
}

// stateIndex is the index in States of a state: a switch, not a map
// made at each of a month's 300,000 parts.
func stateIndex(state string) int {
	switch state {
	case Attributed:
		return 0
	case Undeclared:
		return 1
	case Unattributed:
		return 2
	case Unallocated:
		return 3
	}
	return 4
}

// visible says whether a reader of scope may see a part of state: an
// administrator (nil) sees all, a scoped reader its tasks (by the
// registration's project and owner) and its projects' undeclared use.
func visible(scope *access.Scope, state, project, owner string) bool {
	if scope == nil {
		return true
	}
	switch state {
	case Attributed:
		return scope.Allows(project, owner)
	case Undeclared:
		return (&access.Scope{Projects: scope.Projects}).Allows(project, "")
	}
	return false
}

// sortedUsers lists the users' use, largest first, then by node and user
// (the node's name and the user's key, concatenated), then by state and
// project, so that the order never depends on the map's. Each sort key is
// built once, as its user is first counted (UserUse.order), not at each
// comparison (a month of 10,000 GPUs has 300,000 users).
func sortedUsers(users map[string]*UserUse) []UserUse {
	if len(users) == 0 {
		return nil
	}
	list := make([]*UserUse, 0, len(users))
	for _, u := range users {
		list = append(list, u)
	}
	slices.SortFunc(list, func(a, b *UserUse) int {
		return cmp.Or(cmp.Compare(b.GPUHours, a.GPUHours), strings.Compare(a.order, b.order),
			strings.Compare(a.State, b.State), strings.Compare(a.Project, b.Project))
	})
	out := make([]UserUse, len(list))
	for i, u := range list {
		out[i] = *u
	}
	return out
}
