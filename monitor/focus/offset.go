package focus

import (
	"context"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/ledger"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
)

// The declared offset (MONITOR.md 20.15, 20.18): the platform's
// unobserved rows leave out what tasks were billed on the declared basis
// for the same GPUs and instants, GPU-second by GPU-second, never below
// zero. A declared GPU is on a GPU of the ledger when a node of the
// ledger holds its UUID (the task's own node, its Kubernetes node else its
// host, when that is one of them; else the first holder by name); a GPU
// without a UUID, or with one no node holds, is outside the ledger. At an
// instant the ledger counts that GPU unobserved, a task declaring it is
// billed as declared (20.1), so the offset of the instant is
//
//	hours: min(1, Σ declared shares)   cost: min(unobserved price, Σ declared prices)
//
// and the rest of the declared cost (declarations above the GPU's
// capacity, or on instants the ledger counts observed or outside its
// capacity) stays billed as declared. Σ BilledCost of the usage rows is
// then the ledger's capacity cost + Σ over GPU-seconds of
// max(0, declared cost − unobserved cost), exactly.

// coverer is a ledger source that lists the spans node reports covered
// (a *store.Store).
type coverer interface {
	CoveredSpans(ctx context.Context, from, to int64) (map[string]map[string][][2]int64, error)
}

// offset is what one ledger model's unobserved row absorbs on a day.
type offset struct{ hours, cost float64 }

// declaredUse is one declared GPU of a task over its counted interval in
// the day: its share and its hourly price (the report's rule for the
// entry, report.Prices.EntryPrice).
type declaredUse struct {
	from, to     int64
	share, price float64
}

// offsets are the day w's declared offsets by ledger model (the ledger's
// --by model keys), from src's ledger data (the day's dayLedger). now is
// the instant the ledger of the day is computed at.
func (g *gen) offsets(ctx context.Context, src ledger.Source, w facts.Window, now time.Time) (map[string]offset, error) {
	cov, ok := g.cfg.Ledger.(coverer)
	from, to := w.From.Unix(), w.To.Unix()
	if !ok {
		return nil, nil
	}
	retire := int64(g.retire() / time.Second)
	d, err := src.LedgerData(ctx, from, to, retire)
	if err != nil {
		return nil, err
	}
	unobserved, model := ledgerGPUs(d, from, to, retire, now.Unix())
	if len(unobserved) == 0 {
		return nil, nil
	}
	spans, err := cov.CoveredSpans(ctx, from, to)
	if err != nil {
		return nil, err
	}
	holders := map[string][]ledger.GPU{}
	for k, capacity := range unobserved {
		unobserved[k] = subtract(capacity, spans[k.Node][k.UUID])
		holders[k.UUID] = append(holders[k.UUID], k)
	}
	uses, err := g.declaredUses(ctx, w, holders)
	if err != nil {
		return nil, err
	}
	out := map[string]offset{}
	for _, k := range slices.SortedFunc(maps.Keys(uses), func(a, b ledger.GPU) int {
		return strings.Compare(a.Node+"\x00"+a.UUID, b.Node+"\x00"+b.UUID)
	}) {
		price, _ := g.cfg.Prices.Price(model[k])
		h, c := absorb(unobserved[k], uses[k], price)
		o := out[model[k]]
		o.hours += h / 3600
		o.cost += c / 3600
		out[model[k]] = o
	}
	return out, nil
}

// retire is --node-retire as the ledger takes it.
func (g *gen) retire() time.Duration {
	if g.cfg.Retire <= 0 {
		return store.DefaultNodeRetire
	}
	return g.cfg.Retire
}

// ledgerGPUs are each GPU's capacity in [from, to) as the ledger counts it
// (ledger.Capacity, never past now) and its model (its lives', else its
// reports').
func ledgerGPUs(d *store.LedgerData, from, to, retire, now int64) (map[ledger.GPU][][2]int64, map[ledger.GPU]string) {
	capacity, model := ledger.Capacity(d, from, min(to, now), retire)
	for _, gh := range d.GPUs {
		if k := (ledger.GPU{Node: gh.Node, UUID: gh.UUID}); model[k] == "" {
			model[k] = gh.Model
		}
	}
	return capacity, model
}

// declaredUses are the day's declared GPUs on GPUs of the ledger (holders:
// the ledger's GPUs by UUID), by GPU: the day's tasks with counted
// seconds in the day, each with its node and GPUs as the month's declared
// tasks list them (declaredOnce).
func (g *gen) declaredUses(ctx context.Context, w facts.Window, holders map[string][]ledger.GPU) (map[ledger.GPU][]declaredUse, error) {
	from, to := w.From.Unix(), w.To.Unix()
	byKey, err := g.declared(ctx)
	if err != nil {
		return nil, err
	}
	tasks, err := g.cfg.Source.ReportTasks(ctx, w)
	if err != nil {
		return nil, err
	}
	out := map[ledger.GPU][]declaredUse{}
	for _, t := range tasks {
		l, ok := byKey[t.ID]
		if !ok || t.Seconds <= 0 || len(l.uuids) != len(t.GPUs) {
			continue
		}
		s0 := max(t.Start, from)
		for i, gpu := range t.GPUs {
			if l.uuids[i] == "" {
				continue // no UUID: outside the ledger
			}
			k, ok := holderOf(holders[l.uuids[i]], l.node)
			if !ok {
				continue
			}
			price, _ := g.cfg.Prices.EntryPrice(gpu.Model, gpu.Profile, gpu.MIG, gpu.Share)
			out[k] = append(out[k], declaredUse{from: s0, to: min(s0+t.Seconds, to), share: gpu.Share, price: price})
		}
	}
	return out, nil
}

// holderOf is the ledger GPU a declared UUID is on: the task's node's,
// else the first holder by node name.
func holderOf(hs []ledger.GPU, node string) (ledger.GPU, bool) {
	if len(hs) == 0 {
		return ledger.GPU{}, false
	}
	best := hs[0]
	for _, h := range hs {
		if strings.EqualFold(h.Node, node) {
			return h, true
		}
		if h.Node < best.Node {
			best = h
		}
	}
	return best, true
}

// absorb is, over the unobserved intervals un (sorted, disjoint) of one
// GPU priced price an hour, Σ min(1, shares) (GPU-seconds) and Σ min(price,
// declared prices) (money × seconds / hour) of the declarations uses.
func absorb(un [][2]int64, uses []declaredUse, price float64) (gpuSeconds, cost float64) {
	var cuts []int64
	for _, u := range uses {
		cuts = append(cuts, u.from, u.to)
	}
	for _, iv := range un {
		cuts = append(cuts, iv[0], iv[1])
	}
	slices.Sort(cuts)
	cuts = slices.Compact(cuts)
	j := 0
	for i := 0; i+1 < len(cuts); i++ {
		x, y := cuts[i], cuts[i+1]
		for j < len(un) && un[j][1] <= x {
			j++
		}
		if j == len(un) {
			break
		}
		if un[j][0] > x {
			continue
		}
		share, declared := 0.0, 0.0
		for _, u := range uses {
			if u.from <= x && y <= u.to {
				share += u.share
				declared += u.price
			}
		}
		sec := float64(y - x)
		gpuSeconds += min(1, share) * sec
		cost += min(price, declared) * sec
	}
	return gpuSeconds, cost
}

// subtract is a − b (both sorted unions of disjoint intervals).
func subtract(a, b [][2]int64) [][2]int64 {
	var out [][2]int64
	j := 0
	for _, iv := range a {
		x := iv[0]
		for j < len(b) && b[j][1] <= x {
			j++
		}
		for k := j; k < len(b) && b[k][0] < iv[1]; k++ {
			if b[k][0] > x {
				out = append(out, [2]int64{x, b[k][0]})
			}
			x = max(x, b[k][1])
		}
		if x < iv[1] {
			out = append(out, [2]int64{x, iv[1]})
		}
	}
	return out
}
