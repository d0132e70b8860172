package ledger

import (
	"slices"
	"strings"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/access"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
)

// A ledger is computed in two steps: its parts are gathered as facts at
// the finest key any grouping needs (store.LedgerKey: node, GPU, instance,
// model, state, project, owner, namespace), then grouped into rows by the
// query's key for the reader's scope. A live ledger and a closed month's
// (the facts its statement froze, MONITOR.md 20.10) go through the same
// grouping, adding the same facts in the same order, so the ledger of a
// month at its close and the one answered from its statement later are
// byte-identical.

// gatherer counts the ledger's parts into facts, each key's in the order
// its first part came (the order they are grouped in).
type gatherer struct {
	f  *store.LedgerFacts
	at map[store.LedgerKey]int
}

// add counts h GPU-hours under k with their cost (ok false: no price)
// and returns k's fact.
func (g *gatherer) add(k store.LedgerKey, h, cost float64, ok bool) *store.LedgerFact {
	i, found := g.at[k]
	if !found {
		i = len(g.f.Facts)
		g.at[k] = i
		g.f.Facts = append(g.f.Facts, store.LedgerFact{LedgerKey: k})
	}
	x := &g.f.Facts[i]
	x.GPUHours += h
	x.Cost += cost
	if !ok && h > 0 {
		x.Unpriced = true
	}
	return x
}

// Group is the ledger of facts f (a closed month's, as its statement
// froze them) by q.By for q.Scope over q.Window, with the split rule and
// currency f was computed with; q's other inputs are not read. Without
// the observations behind the facts it lists no users: discrepancies are
// computed live.
func Group(f *store.LedgerFacts, q Query) (*Ledger, error) {
	if err := q.Check(); err != nil {
		return nil, err
	}
	l := &Ledger{From: q.Window.From, To: q.Window.To, By: q.By, Split: f.Split, Currency: f.Currency}
	group(l, f, q.Scope)
	return l, nil
}

// group writes f's facts that scope sees into l's rows by l.By and its
// total, with their derived columns: capacity and the check on node and
// model rows and the total for an administrator only (a team sees its
// own use, not the fleet's), costs when f was priced.
func group(l *Ledger, f *store.LedgerFacts, scope *access.Scope) {
	a := &acc{rows: map[string]*Figures{}}
	admin := scope == nil
	for i := range f.Facts {
		x := &f.Facts[i]
		if !visible(scope, x.State, x.Project, x.Owner) {
			continue
		}
		key := keyOf(l.By, x.Node, x.Model, x.Project, x.Namespace, x.State)
		a.add(key, stateIndex(x.State), x.GPUHours, x.Cost, x.Unpriced)
		if x.State != Unobserved {
			continue
		}
		// A GPU's capacity is on its unobserved fact, one a GPU.
		for _, r := range []*Figures{a.row(key), &a.total} {
			if r.Capacity == nil {
				r.Capacity = ptr(0)
			}
			*r.Capacity += x.Capacity
		}
	}
	capRows := l.By == ByNode || l.By == ByModel
	for key, r := range a.rows {
		finish(r, f.Priced, capRows && admin)
		l.Rows = append(l.Rows, Row{Key: key, Figures: *r})
	}
	slices.SortFunc(l.Rows, func(a, b Row) int { return strings.Compare(a.Key, b.Key) })
	if l.By == ByState {
		l.Rows = stateRows(&a.total)
		for i := range l.Rows {
			finish(&l.Rows[i].Figures, f.Priced, false)
		}
	}
	finish(&a.total, f.Priced, admin)
	l.Total = a.total
}
