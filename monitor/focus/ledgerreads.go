package focus

import (
	"context"
	"sync"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/ledger"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
)

// dayLedger is the ledger's source for one day's platform rows: the day's
// ledger (ledger.Compute) and its declared offset (offsets) ask for the
// same LedgerData of a day before now (the day's whole hours, one retire
// delay), which is read once and handed to both, where each read it
// before (the second read was 9 % of the export's CPU at 1,000 GPUs). A
// read with other arguments (the day of now, whose ledger ends at the
// clock's hour) goes to the store. Neither reader changes what it is
// handed: the ledger adds a raw tail only to the data of a day it reads
// to an hour before the day's end, which is never the offset's read. It
// serves one day of one export, in one goroutine.
type dayLedger struct {
	ledger.Source
	key  [3]int64
	data *store.LedgerData
}

func (d *dayLedger) LedgerData(ctx context.Context, from, to, retire int64) (*store.LedgerData, error) {
	k := [3]int64{from, to, retire}
	if d.data != nil && d.key == k {
		return d.data, nil
	}
	data, err := d.Source.LedgerData(ctx, from, to, retire)
	if err != nil {
		return nil, err
	}
	d.key, d.data = k, data
	return data, nil
}

// declaredOnce is the month's declared tasks (ledger.Source.DeclaredTasks
// over the export's month) by task key, read once for every day's offset,
// where each day read them before (every task of the store is scanned,
// the start bound selecting no range: 30 scans a month). A day's offset
// looks up only the day's tasks with counted seconds in the day, and each
// of those is among the month's declared tasks with the same node and
// GPUs (a task whose counted interval meets the day meets the month; its
// hostname, Kubernetes node and GPUs do not depend on the window). It
// lives for one export.
type declaredOnce struct {
	once  sync.Once
	byKey map[int64]listed
	err   error
}

// listed is a declared task's node (its Kubernetes node, else its host)
// and its listed GPUs' UUIDs, in position order.
type listed struct {
	uuids []string
	node  string
}

// declared are the month's declared tasks by key, read on the first call.
func (g *gen) declared(ctx context.Context) (map[int64]listed, error) {
	g.decl.once.Do(func() {
		decl, err := g.cfg.Ledger.DeclaredTasks(ctx, g.month.From.Unix(), g.month.To.Unix())
		if err != nil {
			g.decl.err = err
			return
		}
		g.decl.byKey = make(map[int64]listed, len(decl))
		for _, t := range decl {
			l := listed{node: t.K8sNode}
			if l.node == "" {
				l.node = t.Hostname
			}
			for _, gpu := range t.GPUs {
				l.uuids = append(l.uuids, gpu.UUID)
			}
			g.decl.byKey[t.Key] = l
		}
	})
	return g.decl.byKey, g.decl.err
}

// monthTasker is a Source that lists each day's tasks of a month from one
// read of the month (a *store.Store: ReportTasksByDay), each day's as
// its own read lists them.
type monthTasker interface {
	ReportTasksByDay(ctx context.Context, w facts.Window) ([][]facts.TaskUsage, error)
}

// monthTasks is the export's month of tasks by day, read once for every
// day's rows, where each day read its own (30 reads of the tasks' spans:
// half the export's CPU at 1,000 GPUs with a year stored). It lives for
// one export.
type monthTasks struct {
	once sync.Once
	days [][]facts.TaskUsage
	err  error
}

// read is the month's tasks by day, read on the first call.
func (m *monthTasks) read(ctx context.Context, src monthTasker, month facts.Window) ([][]facts.TaskUsage, error) {
	m.once.Do(func() { m.days, m.err = src.ReportTasksByDay(ctx, month) })
	return m.days, m.err
}
