package deliver

import (
	"context"
	"errors"
	"time"
)

// Passes flushes d again and again within ctx's deadline while a pass is
// stopped by a failure that may pass (the KeepStop of its policy), and
// returns the sum of the passes. Between passes it waits as every sender
// of this module does: the retry policy's backoff (zero: DefaultRetry),
// or the monitor's Retry-After when that is longer. It stops early when
// the spool fails, when giveUp says the stop is one no wait cures (a
// refused token), or when the next wait and an attempt would pass the
// deadline (no deadline: one pass). Stopped is the last pass's; NotBefore
// is set from the latest Retry-After.
func (d *Deliverer) Passes(ctx context.Context, retry RetryPolicy, giveUp func(error) bool) (FlushResult, error) {
	b := retry.BackOff()
	var total FlushResult
	for {
		res, err := d.Flush(ctx, 0)
		total.Delivered += res.Delivered
		total.Dead += res.Dead
		total.Failed += res.Failed
		total.Pending = res.Pending
		total.Stopped = res.Stopped
		if err != nil || res.Stopped == nil || (giveUp != nil && giveUp(res.Stopped)) {
			return total, err
		}
		policy, asked := NextWait(b, res.Stopped)
		var ae *AnswerError
		if errors.As(res.Stopped, &ae) && ae.HasRetryAfter {
			total.NotBefore = d.now().Add(ae.RetryAfter)
		}
		wait := max(policy, asked)
		if dl, ok := ctx.Deadline(); !ok || time.Until(dl) < wait+AttemptTimeout/4 {
			return total, nil
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return total, nil
		case <-t.C:
		}
	}
}
