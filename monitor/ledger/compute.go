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

// Compute computes the ledger q asks for.
func Compute(ctx context.Context, src Source, q Query) (*Ledger, error) {
	q, err := settle(ctx, src, q)
	if err != nil {
		return nil, err
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
		return nil, err
	}
	l := &Ledger{From: q.Window.From, To: q.Window.To, By: q.By, Split: q.Split,
		observed: map[int64]*observedTask{}, covered: map[string]bool{}}
	if q.Prices != nil {
		l.Currency = q.Prices.Currency
	}
	a := &acc{rows: map[string]*Figures{}, prices: q.Prices}
	admin := q.Scope == nil
	a.addGPUs(l, q, d, admin, from, cut, retire)
	users, err := a.addUsers(ctx, src, l, q, d, admin, from, rolledTo)
	if err != nil {
		return nil, err
	}
	l.Users = sortedUsers(users)
	a.finishInto(l, q, admin)
	return l, nil
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
// cover, per (node, GPU); only an administrator sees them.
func (a *acc) addGPUs(l *Ledger, q Query, d *store.LedgerData, admin bool, from, cut, retire int64) {
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
	for _, g := range d.GPUs {
		k := GPU{g.Node, g.UUID}
		observed[k] += g.Observed
		l.covered[g.Node] = true
		if model[k] == "" {
			model[k] = g.Model
		}
		if admin {
			price, ok := gpuPrice(q.Prices, g.Model)
			h := g.Unallocated / 3600
			a.add(keyOf(q.By, g.Node, g.Model, "", "", Unallocated), 3, h, h*price, ok)
		}
	}
	if !admin {
		return
	}
	for _, k := range gpuKeys(capacity, observed) {
		c := capacity[k] / 3600
		un := (capacity[k] - observed[k]) / 3600
		price, ok := gpuPrice(q.Prices, model[k])
		key := keyOf(q.By, k.Node, model[k], "", "", Unobserved)
		a.add(key, 4, un, un*price, ok)
		for _, f := range []*Figures{a.row(key), &a.total} {
			if f.Capacity == nil {
				f.Capacity = ptr(0)
			}
			*f.Capacity += c
		}
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
func (a *acc) addUsers(ctx context.Context, src Source, l *Ledger, q Query, d *store.LedgerData, admin bool, from, to int64) (map[string]*UserUse, error) {
	ties, err := src.LedgerTies(ctx, d.Users)
	if err != nil {
		return nil, err
	}
	c := &userCounter{a: a, l: l, q: q, admin: admin, users: map[string]*UserUse{}}
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
	a     *acc
	l     *Ledger
	q     Query
	admin bool
	users map[string]*UserUse
}

// count adds u's part under its state: attributed when tie names a
// registration, undeclared when the namespace maps to a project,
// unattributed otherwise; a reader with a scope sees only its own.
func (c *userCounter) count(u *store.UserHour, tie *store.Tie, ck string) {
	q := c.q
	part := u.Equal
	if q.Split == SplitUtil {
		part = u.Util
	}
	h := part / 3600
	state, project := Unattributed, ""
	switch {
	case tie != nil:
		state, project = Attributed, tie.Project
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
	if !c.visible(state, project, tie) {
		return
	}
	price, ok := instancePrice(q.Prices, u)
	c.a.add(keyOf(q.By, u.Node, u.Model, project, u.User.Namespace, state), stateIndex(state), h, h*price, ok)
	if state != Attributed {
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

// stateIndex is the index in States of a user's state (attributed,
// undeclared or unattributed): a switch, not a map made at each of a
// month's 300,000 users.
func stateIndex(state string) int {
	switch state {
	case Attributed:
		return 0
	case Undeclared:
		return 1
	}
	return 2
}

// visible says whether the reader may see a part of state: an
// administrator sees all, a scoped reader its tasks and its projects'
// undeclared use.
func (c *userCounter) visible(state, project string, tie *store.Tie) bool {
	if c.admin {
		return true
	}
	switch state {
	case Attributed:
		return c.q.Scope.Allows(tie.Project, tie.Owner)
	case Undeclared:
		return (&access.Scope{Projects: c.q.Scope.Projects}).Allows(project, "")
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

// finishInto writes the accumulated rows and total into l, with their
// derived columns.
func (a *acc) finishInto(l *Ledger, q Query, admin bool) {
	capRows := q.By == ByNode || q.By == ByModel
	for key, f := range a.rows {
		finish(f, q.Prices != nil, capRows && admin)
		l.Rows = append(l.Rows, Row{Key: key, Figures: *f})
	}
	slices.SortFunc(l.Rows, func(a, b Row) int { return strings.Compare(a.Key, b.Key) })
	if q.By == ByState {
		l.Rows = stateRows(&a.total)
		for i := range l.Rows {
			finish(&l.Rows[i].Figures, q.Prices != nil, false)
		}
	}
	finish(&a.total, q.Prices != nil, admin)
	l.Total = a.total
}
