package register

import (
	"context"
	"errors"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/deliver"
)

// Outage memory (exec mode). During a monitor outage every start on a node
// would otherwise spend the whole budget before its command runs. A start
// whose attempts all failed with a network error, a timeout or a 5xx
// records the outage in the spool file, keyed by the monitor URL; for
// OutageHold after that record, a start to the same URL makes one short
// attempt and spools at once if it fails, without renewing the record, so
// one start per hold period still tries the full budget. Any delivery to
// that URL (a start, or a flush) clears the record.
//
// The record is written when the first attempt fails with an outage error
// and the registration is spooled (so within the budget, as every spool
// write), and removed again if a later attempt of the same start is
// answered otherwise: what is left when the start ends is the outcome the
// contract describes.

// Outages is the outage memory's store; *spool.Spool implements it (the
// memory is the file's, whichever queue a registrar sends from).
type Outages interface {
	Outage(ctx context.Context, url string) (since time.Time, found bool, err error)
	RecordOutage(ctx context.Context, url string, since time.Time) error
	ClearOutage(ctx context.Context, url string) error
}

// Limits of a start during a known outage.
const (
	// ShortAttempt bounds the one attempt of a start during a known outage.
	ShortAttempt = 300 * time.Millisecond
	// shortSpoolWait is the spool lock wait (and write) after it.
	shortSpoolWait = 100 * time.Millisecond
	// outageReadWait bounds the read of the record at the start: a locked
	// spool reads as no outage (the full budget applies).
	outageReadWait = 50 * time.Millisecond
)

// outages returns the store of the outage memory, nil when there is none.
func (r *Registrar) outages() Outages {
	if r.Outages != nil && r.Client != nil && r.Client.Base() != "" {
		return r.Outages
	}
	return nil
}

// knownOutage reports whether an outage of this registrar's monitor was
// recorded less than OutageHold ago (and not in the future: a clock that
// went back does not make an outage last). found says whether any record
// exists, stale or not.
func (r *Registrar) knownOutage(ctx context.Context, now time.Time) (since time.Time, active, found bool) {
	o := r.outages()
	if o == nil || r.OutageHold <= 0 {
		return time.Time{}, false, false
	}
	rctx, cancel := context.WithTimeout(ctx, outageReadWait)
	defer cancel()
	since, found, err := o.Outage(rctx, r.Client.Base())
	if err != nil {
		r.logger().Debug("outage memory unreadable; the full budget applies", "err", err)
		return time.Time{}, false, false
	}
	age := now.Sub(since)
	return since, found && age >= 0 && age < r.OutageHold, found
}

// shortContext prepares g for a start during a known outage: one attempt of
// at most ShortAttempt, then the spool. It returns the context the
// registration runs under.
func (g *registration) shortContext(ctx context.Context) (context.Context, context.CancelFunc) {
	since, active, found := g.r.knownOutage(ctx, time.Now())
	g.outageFound = found
	if !active {
		return ctx, func() {}
	}
	g.short = true
	g.log.Info("monitor outage known: one short attempt, then the spool",
		"since", since.Format(time.RFC3339), "hold", g.r.OutageHold.String())
	return context.WithTimeout(ctx, ShortAttempt+shortSpoolWait)
}

// attemptLimits returns an attempt's timeout and the part of the budget it
// leaves for the spool write that follows a failure.
func (g *registration) attemptLimits() (timeout, reserve time.Duration) {
	if g.short {
		return ShortAttempt, shortSpoolWait
	}
	return deliver.AttemptTimeout, spoolReserve
}

// noteFailure keeps the outage record in step with a failed attempt that
// was spooled: recorded at the first outage error when every attempt so
// far was one, removed at an answer that shows the monitor is up.
func (g *registration) noteFailure(ctx context.Context, err error) {
	o := g.r.outages()
	if o == nil || g.r.OutageHold <= 0 || g.short || !g.spooled {
		return
	}
	switch {
	case isOutage(err) && !g.recorded && g.outages == g.attempts:
		if rerr := o.RecordOutage(ctx, g.r.Client.Base(), time.Now()); rerr != nil {
			g.log.Debug("outage not recorded", "err", rerr)
			return
		}
		g.recorded = true
		g.log.Info("monitor unreachable: starts within the hold make one short attempt",
			"hold", g.r.OutageHold.String())
	case !isOutage(err) && g.recorded:
		g.clearOutage(ctx)
	}
}

// deliveredOutage clears the outage record after a delivery, when this start saw
// or wrote one (a delivery that found none pays no read).
func (g *registration) deliveredOutage(ctx context.Context) {
	if g.outageFound || g.recorded {
		g.clearOutage(ctx)
	}
}

func (g *registration) clearOutage(ctx context.Context) {
	o := g.r.outages()
	if o == nil {
		return
	}
	if err := o.ClearOutage(ctx, g.r.Client.Base()); err != nil {
		g.log.Debug("outage record not cleared", "err", err)
		return
	}
	g.recorded = false
}

// flushedOutage clears the outage record after a flush delivered entries.
func (r *Registrar) flushedOutage(ctx context.Context, res deliver.FlushResult) {
	o := r.outages()
	if o == nil || res.Delivered == 0 {
		return
	}
	if err := o.ClearOutage(ctx, r.Client.Base()); err != nil {
		r.logger().Debug("outage record not cleared", "err", err)
	}
}

// isOutage reports whether a failed attempt says the monitor is unreachable
// or failing: a network error, a timeout, or a 5xx (501 is an answer, not
// an outage; nor are 408 and 429, which come from a monitor that is up).
func isOutage(err error) bool {
	if err == nil || errors.Is(err, deliver.ErrClientUnusable) || errors.Is(err, context.Canceled) {
		return false
	}
	var ae *deliver.AnswerError
	if errors.As(err, &ae) {
		return ae.Status >= 500 && ae.Status != 501
	}
	return true
}
