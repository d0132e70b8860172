package ledger

import (
	"context"
	"fmt"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
)

// rawKeeper is a Source that says whether its raw reports answer a
// window exactly (the store: RawComplete).
type rawKeeper interface {
	RawComplete(ctx context.Context, from, to int64) (complete, nodeFacts bool, err error)
}

// rawFor says whether a window is answered from the raw reports: a window
// whose ends are not whole hours is, to the second, while the raw reports
// it needs are kept (--raw-retention); past that, where node reports
// covered it, it is refused naming --raw-retention; a window over no node
// reports is answered (MONITOR.md section 20.8).
func rawFor(ctx context.Context, src Source, w facts.Window) (bool, error) {
	from, to := w.From.Unix(), w.To.Unix()
	if from%3600 == 0 && to%3600 == 0 {
		return false, nil
	}
	k, ok := src.(rawKeeper)
	if !ok {
		return true, nil
	}
	complete, facts, err := k.RawComplete(ctx, from, to)
	if err != nil {
		return false, err
	}
	if facts && !complete {
		return false, fmt.Errorf("%w: from and to must be whole hours where the raw node reports are no longer kept (--raw-retention): the ledger keeps hours after that", ErrBadQuery)
	}
	return true, nil
}
