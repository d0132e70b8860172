package register

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/deliver"
	"github.com/paddle-entrypoint/paddle-entrypoint/spool"
)

// registration is one Register call in progress.
type registration struct {
	r        *Registrar
	taskID   string
	body     []byte
	log      *slog.Logger
	attempts int
	lastErr  error
	id       uint64 // the spool entry, once spooled
	spooled  bool
	// hold is how long the entry is kept from other processes when it is
	// written (until the budget's end, or a while when the registration
	// runs alongside the command and renews it).
	hold    time.Time
	noSpool bool // the spool failed for good in this process
	// lastTried: the try just made was the last one the budget holds.
	lastTried bool
	// Outage memory (outage.go): a known outage makes the start short;
	// outages counts attempts that failed with an outage error.
	short, outageFound, recorded bool
	outages                      int
	// warned: the first spooling after a failed attempt was logged at
	// warning; later says who sends the kept registration.
	warned bool
	later  string
	// engine makes the attempts (deliver.go); begun is the first one's time.
	engine *deliver.Deliverer
	begun  time.Time
}

func (g *registration) run(ctx context.Context) Outcome {
	b := g.r.Retry.BackOff()
	for {
		if ctx.Err() != nil {
			return g.stop(ctx)
		}
		dec, err := g.attempt(ctx)
		if err != nil {
			g.lastErr = err
		}
		switch dec.Action {
		case deliver.Remove:
			if g.spooled {
				dropDelivered(ctx, false, g.r.Queue, g.id, g.log, "")
			}
			g.deliveredOutage(ctx)
			return Delivered
		case deliver.Bury:
			g.bury(ctx, dec.Answer(g.r.Client, err))
			return Dead
		}
		if ctx.Err() != nil {
			return g.stop(ctx)
		}
		g.remember(ctx, err)
		g.noteFailure(ctx, err)
		if deliver.Classify(err) == deliver.Unusable || g.short {
			return g.kept()
		}
		wait, last, ok := fitWait(ctx, b, err)
		if !ok || g.lastTried {
			g.log.Debug("no time left in the budget for another try", "wait", wait)
			return g.kept()
		}
		g.lastTried = last
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
	}
}

// attempt makes one try with its own timeout, cut short by the budget.
// While the registration is not yet spooled, the try leaves part of the
// budget for the spool write that follows a failure: a monitor that never
// answers must not take the whole budget and leave nothing kept.
func (g *registration) attempt(ctx context.Context) (deliver.Decision, error) {
	timeout, reserve := g.attemptLimits()
	if deadline, ok := ctx.Deadline(); ok && !g.spooled && !g.noSpool && g.r.Queue != nil {
		left := time.Until(deadline)
		timeout = min(timeout, left-min(reserve, left/2))
	}
	dec, err := g.try(ctx, timeout)
	if err != nil {
		g.log.Debug("registration attempt failed", "attempt", g.attempts, "err", g.r.Client.Redact(err.Error()))
	}
	if isOutage(err) {
		g.outages++
	}
	return dec, err
}

// try makes the registration's next attempt through the delivery engine:
// the Registrar's transport and status policy, with its own client.
func (g *registration) try(ctx context.Context, timeout time.Duration) (deliver.Decision, error) {
	if g.engine == nil {
		g.engine, g.begun = g.r.Deliverer(), time.Now()
	}
	g.attempts++
	e := spool.Entry{TaskID: g.taskID, Payload: g.body, QueuedAt: g.begun, Attempts: g.attempts - 1, Fingerprint: g.r.Client.Fingerprint()}
	return g.engine.Try(ctx, g.r.Client, e, g.taskID, timeout)
}

// remember writes a failed attempt to the spool: the entry itself at the
// first failure (so a start killed while it retries loses nothing), its
// attempt count and last error afterwards.
func (g *registration) remember(ctx context.Context, err error) {
	q := g.r.Queue
	if q == nil || g.noSpool {
		return
	}
	text := g.r.Client.Redact(err.Error())
	if g.spooled {
		if err := q.Attempted(ctx, g.id, text); err != nil {
			g.log.Debug("spool: attempt not recorded", "err", err)
		}
	} else {
		g.enqueue(ctx, text)
	}
	g.warnSpooled(err, text)
}

// warnSpooled logs, at warning and once per registration, that a failed
// attempt left the registration in the spool: an outage shows in the log
// when it happens, not only in the line logged when the registration ends
// (in supervise mode, when the command ends). A URL that cannot work was
// warned about already.
func (g *registration) warnSpooled(err error, text string) {
	if g.warned || !g.spooled || errors.Is(err, deliver.ErrClientUnusable) {
		return
	}
	g.warned = true
	later := g.later
	if later == "" {
		later = "a later start or spool flush sends it"
	}
	g.log.Warn("registration not delivered: kept in the spool; "+later, "attempts", g.attempts, "err", text)
}

func (g *registration) enqueue(ctx context.Context, lastErr string) {
	now := time.Now()
	id, err := g.r.Queue.Enqueue(ctx, spool.Entry{
		Version:     spool.RecordVersion,
		TaskID:      g.taskID,
		Payload:     g.body,
		QueuedAt:    now,
		Attempts:    g.attempts,
		LastError:   lastErr,
		LastAttempt: now,
		Fingerprint: g.r.Client.Fingerprint(),
		HeldUntil:   g.hold,
	})
	switch {
	case err == nil:
		g.id, g.spooled = id, true
	case errors.Is(err, spool.ErrLocked):
		g.log.Warn("spool locked by another process; will try again at the next failure", "err", err)
	case errors.Is(err, spool.ErrFull):
		g.noSpool = true
		g.log.Warn("registration not spooled: the limit this task set on its spool entries is reached", "err", err)
	case ctx.Err() != nil:
		g.log.Debug("spool write cut short by the context", "err", err)
	default:
		g.noSpool = true
		g.log.Warn("spool unusable; the registration is not kept", "err", err)
	}
}

// stop ends a registration whose context is done: at the budget's end the
// entry stays as it is; after a signal it is spooled with a fresh, short
// context if it is not yet.
func (g *registration) stop(ctx context.Context) Outcome {
	if errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
		if g.attempts == 0 {
			g.log.Warn("registration budget spent before the first attempt; not sent, not spooled")
		}
		return g.kept()
	}
	if !g.spooled && g.r.Queue != nil {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), signalSpoolTimeout)
		defer cancel()
		text := "not delivered before " + context.Cause(ctx).Error()
		if g.lastErr != nil {
			text = g.r.Client.Redact(g.lastErr.Error())
		}
		g.enqueue(sctx, text)
	}
	if g.lastErr == nil {
		g.lastErr = context.Cause(ctx)
	}
	return g.kept()
}

// release lets other processes send the spooled entry now that this one
// stopped trying it: within the budget, or shortly after a signal (at the
// budget's end the hold has run out by itself).
func (g *registration) release(ctx context.Context) {
	h, ok := g.r.Queue.(holder)
	if !ok || !g.spooled {
		return
	}
	if ctx.Err() != nil {
		if errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
			return
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), signalSpoolTimeout)
		defer cancel()
	}
	if err := h.Hold(ctx, g.id, time.Time{}); err != nil {
		g.log.Debug("spool: hold not released", "err", err)
	}
}

// kept is the outcome of a registration that was not delivered.
func (g *registration) kept() Outcome {
	if g.spooled {
		return Spooled
	}
	return Lost
}

// bury keeps a registration the monitor refused for good as a dead letter,
// with answer (redacted).
func (g *registration) bury(ctx context.Context, answer string) {
	g.log.Error("monitor refused the registration for good; not retried", "answer", answer, "spool", g.r.Queue != nil)
	q := g.r.Queue
	if q == nil || g.noSpool {
		return
	}
	var serr error
	if g.spooled {
		serr = q.Bury(ctx, g.id, answer)
	} else {
		now := time.Now()
		serr = q.BuryNew(ctx, spool.Entry{
			Version: spool.RecordVersion, TaskID: g.taskID, Payload: g.body,
			QueuedAt: now, Attempts: g.attempts, LastError: answer, LastAttempt: now,
			Fingerprint: g.r.Client.Fingerprint(),
		}, answer)
	}
	if serr != nil {
		g.log.Warn("spool: dead letter not kept", "err", serr)
	}
}
