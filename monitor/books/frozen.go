package books

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/report"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
)

// A closed month's task facts (MONITOR.md 20.10): the close reads the
// report's sums of the month task by task and the node reports'
// observations once, computes the statement's reports from them, and
// stores them with it; a closed month's report by any other grouping is
// the same calculation (report.Compute) over those facts, summed again by
// its keys. So every grouping of a closed month adds up to the
// statement's totals and none moves when late data arrives.

// TaskFacts is what a close needs of its source to freeze the month's
// facts (a *store.Store under the close's lock or snapshot).
type TaskFacts interface {
	TaskFacts(ctx context.Context, w facts.Window) (facts.Sums, error)
}

// FrozenFacts is what answers a closed month from its frozen facts (a
// *store.Store).
type FrozenFacts interface {
	StatementFacts(ctx context.Context, month string, version int) (*store.Frozen, error)
}

// freeze reads w's facts from src as the frozen source answers them; nil
// when src cannot give them task by task (then the statement freezes
// none and other groupings stay live, as before migration 0019).
func freeze(ctx context.Context, src facts.Source, w facts.Window) (*store.Frozen, error) {
	tf, ok := src.(TaskFacts)
	if !ok {
		return nil, nil
	}
	sums, err := tf.TaskFacts(ctx, w)
	if err != nil {
		return nil, err
	}
	f := &store.Frozen{Sums: sums}
	if o, ok := src.(report.Observer); ok {
		obs, err := o.Observations(ctx, w)
		if err != nil {
			return nil, fmt.Errorf("books: observations: %w", err)
		}
		if obs != nil && obs.Covered {
			f.Obs = obs
		}
	}
	return f, nil
}

// frozenSource is a facts.Source (and a report.Observer) over frozen
// facts: its sums are the frozen tasks' summed by the keys asked for.
type frozenSource struct{ f *store.Frozen }

// errFrozenMetric: completion metrics are not among the frozen facts; a
// closed month's report with metrics is computed from the tasks.
var errFrozenMetric = errors.New("books: a closed month's frozen facts hold no completion metrics")

func (s frozenSource) ReportMetric(context.Context, facts.Window, []string, string) ([]facts.MetricSums, error) {
	return nil, errFrozenMetric
}

func (s frozenSource) Observations(context.Context, facts.Window) (*facts.Observations, error) {
	if s.f.Obs == nil {
		return &facts.Observations{}, nil
	}
	return s.f.Obs, nil
}

// ReportSums sums the frozen tasks' groups by keys (and project and
// owner when scoped), as the store groups its tasks: without model the
// tasks once each and their GPUs by model; with it the tasks by model and
// Base once each.
func (s frozenSource) ReportSums(_ context.Context, _ facts.Window, keys []string, scoped bool) (facts.Sums, error) {
	cols := slices.Clone(keys)
	if scoped {
		for _, k := range []string{"project", "owner"} {
			if !slices.Contains(cols, k) {
				cols = append(cols, k)
			}
		}
	}
	var out facts.Sums
	if !slices.Contains(cols, "model") {
		out.Tasks = sumTasks(s.f.Sums.Base, cols)
		out.GPUs = sumGPUs(s.f.Sums.GPUs, append(slices.Clone(cols), "model"))
		return out, nil
	}
	base := slices.DeleteFunc(slices.Clone(cols), func(k string) bool { return k == "model" })
	out.Base = sumTasks(s.f.Sums.Base, base)
	out.Tasks = sumTasks(s.f.Sums.Tasks, cols)
	out.GPUs = sumGPUs(s.f.Sums.GPUs, cols)
	return out, nil
}

// groupOf is key narrowed to cols, and its identity.
func groupOf(key map[string]string, cols []string, extra ...string) (map[string]string, string) {
	k := make(map[string]string, len(cols))
	var id strings.Builder
	for _, c := range cols {
		k[c] = key[c]
		id.WriteString(strconv.Quote(key[c]))
	}
	for _, e := range extra {
		id.WriteString(strconv.Quote(e))
	}
	return k, id.String()
}

func sumTasks(in []facts.TaskSums, cols []string) []facts.TaskSums {
	var out []facts.TaskSums
	at := map[string]int{}
	for _, t := range in {
		key, id := groupOf(t.Key, cols)
		i, ok := at[id]
		if !ok {
			at[id], i = len(out), len(out)
			out = append(out, facts.TaskSums{Key: key})
		}
		out[i].Add(t)
	}
	return out
}

func sumGPUs(in []facts.GPUSums, cols []string) []facts.GPUSums {
	var out []facts.GPUSums
	at := map[string]int{}
	for _, g := range in {
		key, id := groupOf(g.Key, cols, strconv.FormatBool(g.MIG), g.Profile)
		i, ok := at[id]
		if !ok {
			at[id], i = len(out), len(out)
			out = append(out, facts.GPUSums{Key: key, MIG: g.MIG, Profile: g.Profile})
		}
		out[i].Add(g)
	}
	return out
}

// FactsMatch says whether the task facts and the ledger facts stored
// with version of month hash to its statement's task_facts_sha256 and
// ledger_facts_sha256 (true for those it froze none of: closed before
// migrations 0019 and 0020, or without a ledger), for `statements` to
// check beside the body's own hash.
func FactsMatch(ctx context.Context, st Store, month string, version int) (bool, error) {
	s, err := stored(ctx, st, month, version)
	if err != nil {
		return false, err
	}
	if ok, err := ledgerFactsMatch(ctx, st, s); err != nil || !ok {
		return false, err
	}
	ff, ok := st.(FrozenFacts)
	if s.TaskFactsSHA256 == "" || !ok {
		return true, nil
	}
	f, err := ff.StatementFacts(ctx, month, version)
	return hashMatches(s.TaskFactsSHA256, s.From.Unix(), f, err)
}

// frozenRows are a statement's frozen rows (*store.Frozen,
// *store.LedgerFacts), serialised as canonical JSON Lines from the
// month's start from.
type frozenRows[T any] interface {
	*T
	JSONLines(from int64) ([]byte, error)
}

// factsSHA256 is the SHA-256 of frozen rows f as the statement records it
// (task_facts_sha256, ledger_facts_sha256); "" for none.
func factsSHA256[T any, P frozenRows[T]](f P, from int64) (string, error) {
	if f == nil {
		return "", nil
	}
	lines, err := f.JSONLines(from)
	if err != nil {
		return "", err
	}
	return Hash(lines), nil
}

// hashMatches says whether frozen rows f, read with err, hash to want
// (false where they are missing).
func hashMatches[T any, P frozenRows[T]](want string, from int64, f P, err error) (bool, error) {
	if err != nil || f == nil {
		return false, err
	}
	got, err := factsSHA256(f, from)
	return err == nil && got == want, err
}

// frozenLister lists the tasks of a close's read with the observations
// the close froze, for the chargeback lines kept with the statement.
type frozenLister struct {
	report.TaskLister
	frozen frozenSource
}

func (l frozenLister) Observations(ctx context.Context, w facts.Window) (*facts.Observations, error) {
	return l.frozen.Observations(ctx, w)
}

// frozenReport is closed month c's report of q computed from its frozen
// facts, marked closed, with the adjustments its statement carries (late
// data of earlier months; MONITOR.md 20.13: the total is the rows', billed
// the total plus these); nil when the statement froze no facts.
func frozenReport(ctx context.Context, st Store, c *store.Closed, q report.Query) (*report.Report, error) {
	ff, ok := st.(FrozenFacts)
	if !ok {
		return nil, nil
	}
	f, err := ff.StatementFacts(ctx, c.Month, c.Version)
	if err != nil || f == nil {
		return nil, err
	}
	r, err := report.Compute(ctx, frozenSource{f}, q)
	if err != nil {
		return nil, err
	}
	adj, err := carried(ctx, st, c, q)
	if err != nil {
		return nil, err
	}
	r.Closed = &report.Closed{Month: c.Month, Version: c.Version, ClosedAt: c.ClosedAt}
	if len(adj) > 0 {
		r.Adjustments = adj
	}
	return r, nil
}

// FrozenLedgerFacts is what answers a closed month's ledger from the
// ledger facts its statement froze (a *store.Store).
type FrozenLedgerFacts interface {
	StatementLedgerFacts(ctx context.Context, month string, version int) (*store.LedgerFacts, error)
}

// FrozenLedger are the ledger facts of window w when it is exactly a
// closed month: those its statement in force froze; nil when w is not a
// month, the month is open (never closed, or reopened) or its statement
// froze none (closed before migration 0020, or without a ledger): then
// its ledger is computed live.
func FrozenLedger(ctx context.Context, st Store, w facts.Window) (*store.LedgerFacts, error) {
	fl, ok := st.(FrozenLedgerFacts)
	if !ok || !w.IsMonth() {
		return nil, nil
	}
	c, err := st.Statement(ctx, w.From.Format("2006-01"))
	if err != nil || c == nil {
		return nil, err
	}
	return fl.StatementLedgerFacts(ctx, c.Month, c.Version)
}

// ledgerFactsMatch says whether the ledger facts stored with statement s
// hash to its ledger_facts_sha256 (true where it froze none).
func ledgerFactsMatch(ctx context.Context, st Store, s *Statement) (bool, error) {
	fl, ok := st.(FrozenLedgerFacts)
	if s.LedgerFactsSHA256 == "" || !ok {
		return true, nil
	}
	f, err := fl.StatementLedgerFacts(ctx, s.Month, s.Version)
	return hashMatches(s.LedgerFactsSHA256, s.From.Unix(), f, err)
}
