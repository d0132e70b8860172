// Package register delivers a task's registration and completion to the
// monitor API, and spools what it cannot deliver within the budget. One
// delivery engine (Deliverer, deliver.go) makes every attempt, with the
// status policy apart from the transport: a flush's of every kind's
// spooled entries, and the first tries of a new registration (Register,
// RegisterAlongside) or completion (Complete), which go through the same
// transport and status policy (Deliverer.try). The node agent uses it for
// its reports.
//
// What the first tries of a new entry keep of their own, and why:
//   - when to try again: within the budget, on the RetryPolicy's waits
//     fitted into it and the monitor's Retry-After (a flush tries an entry
//     once per pass, with its own backoff between passes); a network error
//     ends a flush (the rest would fail too) but is tried again within a
//     budget;
//   - the write-ahead entry: written at the first failure (Register) or
//     before the first try (RegisterAlongside, Complete), held from other
//     processes while this one retries, released when it stops; the
//     outage memory; the outcome and its log line;
//   - no payload check (Registrar.Check): it vets bodies read back from a
//     file that another process, or an older version, may have written; a
//     new entry's body was built by this process from labels it checked
//     under the same policy at the start, and is sent under its own task
//     id. Once spooled, the entry is checked like any other.
//
// Guarantees: Register returns by its context's deadline (the budget) and,
// when the context is cancelled by a signal, within signalSpoolTimeout of
// it. A registration that failed once is in the spool before the next try,
// and is deleted from it only after the monitor answered 2xx or 409, so
// delivery is at-least-once; the task id, sent as the Idempotency-Key at
// every try from every process, lets the monitor drop duplicates. The spool
// is never locked across a network call. A bearer token is never logged or
// stored: text kept from an answer is redacted.
package register

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/paddle-entrypoint/paddle-entrypoint/spool"
)

// signalSpoolTimeout bounds the spool write made after a signal, when the
// budget's own context is already cancelled.
const signalSpoolTimeout = 200 * time.Millisecond

// lastTry is the time the wait before a last try leaves it, when the
// policy's wait would pass the budget; minTry is the least worth trying.
const (
	lastTry = 250 * time.Millisecond
	minTry  = 100 * time.Millisecond
)

// fitWait returns the wait before the next try, fitted into the budget: the
// policy's (or the monitor's Retry-After, when longer). When that leaves no
// room for a try before the deadline, the try is brought forward to be the
// last one (last is true), but never to less than half the policy's wait
// after the one that just failed, nor before the monitor's Retry-After. ok
// is false when no try worth making fits: in particular when the monitor
// asked for a wait past the budget.
func fitWait(ctx context.Context, b backoff.BackOff, err error) (wait time.Duration, last, ok bool) {
	policy, asked := nextWait(b, err)
	wait = max(policy, asked)
	deadline, has := ctx.Deadline()
	if !has {
		return wait, false, true
	}
	left := time.Until(deadline)
	if wait > left-lastTry {
		wait, last = max(left-lastTry, policy/2, asked), true
	}
	return wait, last, left-wait >= minTry
}

// spoolReserve is the part of the budget (at most half of what is left) an
// attempt leaves for writing the registration to the spool if it fails.
const spoolReserve = 250 * time.Millisecond

// flushBatch is how many entries Flush reads from the spool at a time.
const flushBatch = 100

// Queue is the spool as registration and completion use it: the engine's
// Pending, and the write-ahead of a fresh entry. *spool.Queue implements it.
type Queue interface {
	Pending
	Enqueue(ctx context.Context, e spool.Entry) (uint64, error)
	BuryNew(ctx context.Context, e spool.Entry, answer string) error
}

// Registrar delivers registrations with retries, and spools them.
type Registrar struct {
	Client  *Client
	Queue   Queue // nil: spool off
	Logger  *slog.Logger
	Backlog int         // older pending entries sent per start after our own
	Retry   RetryPolicy // zero: DefaultRetry
	// Outages is the outage memory's store (the spool file); nil: none.
	// OutageHold turns the memory on (exec mode): see outage.go; a
	// delivery clears its record whatever the hold.
	Outages    Outages
	OutageHold time.Duration
	// Backoff: Flush skips entries whose own backoff since their last
	// attempt has not passed (the node's drainer, which passes again and
	// again); a start's backlog and an operator's one-off `spool flush`
	// try every entry.
	Backoff bool
	// Check vets a payload read back from the spool before it is sent and
	// returns its task id, the Idempotency-Key it is sent with; an error
	// moves the entry to the dead letters with the reason. nil: TaskIDOf.
	Check func(payload []byte) (taskID string, err error)
	// ClientFor returns the client that sends a spooled entry written for
	// the token with fingerprint fp (a node drainer holds several); nil,
	// or a nil answer: Client. The queue hands out only entries this
	// process may send (spool.Options.Sendable), so none is ever sent
	// under another token.
	ClientFor func(fp string) *Client
}

// holder is the queue's Hold (*spool.Queue has it): the writer of an entry
// keeps other processes off it while it is still trying it itself.
type holder interface {
	Hold(ctx context.Context, id uint64, until time.Time) error
}

// TaskIDOf returns the task_id of a registration body: the only key a
// stored body may be sent under, whatever the entry around it says.
func TaskIDOf(payload []byte) (string, error) {
	var b struct {
		TaskID string `json:"task_id"`
	}
	if err := json.Unmarshal(payload, &b); err != nil || b.TaskID == "" {
		return "", errors.New("payload refused: no task_id")
	}
	return b.TaskID, nil
}

func (r *Registrar) check(payload []byte) (string, error) {
	if r.Check == nil {
		return TaskIDOf(payload)
	}
	return r.Check(payload)
}

// Outcome is what became of a registration.
type Outcome int

// Outcomes.
const (
	Delivered Outcome = iota // the monitor answered 2xx or 409
	Spooled                  // pending in the spool for a later try
	Dead                     // refused for good (kept in the dead letters when the spool works)
	Lost                     // neither delivered nor spooled (spool off or broken)
)

func (o Outcome) String() string {
	switch o {
	case Delivered:
		return "delivered"
	case Spooled:
		return "spooled"
	case Dead:
		return "dead"
	case Lost:
		return "lost"
	}
	return "unknown"
}

// Register delivers taskID's body before ctx's deadline (the budget),
// spooling it at the first failure, and then spends what is left of the
// budget on older pending entries, at most Backlog of them. On ctx
// cancellation (a signal) it makes sure the registration is spooled and
// returns at once.
func (r *Registrar) Register(ctx context.Context, taskID string, body []byte) Outcome {
	start := time.Now()
	reg := &registration{r: r, taskID: taskID, body: body, log: r.logger().With("task_id", taskID)}
	if d, ok := ctx.Deadline(); ok {
		reg.hold = d // after the budget the start has exec'd: the entry is anyone's
	}
	rctx, cancel := reg.shortContext(ctx)
	out := reg.run(rctx)
	cancel()
	if out == Spooled {
		reg.release(ctx)
	}
	attrs := []any{"outcome", out.String(), "attempts", reg.attempts, "elapsed", time.Since(start).Round(time.Millisecond)}
	if reg.lastErr != nil && out != Delivered {
		attrs = append(attrs, "err", r.Client.Redact(reg.lastErr.Error()))
	}
	reg.log.Info("registration", attrs...)
	switch {
	case out != Lost || reg.attempts == 0:
	case r.Queue == nil:
		reg.log.Warn("registration lost: not delivered, and the spool is off (PADDLE_SPOOL_PATH=off)")
	default:
		reg.log.Warn("registration lost: not delivered, and the spool could not keep it")
	}
	if out != Delivered || r.Queue == nil || r.Backlog <= 0 || ctx.Err() != nil {
		return out
	}
	res, err := r.Flush(ctx, r.Backlog)
	if err != nil {
		r.logger().Warn("older pending registrations not sent: spool unusable", "err", err)
	}
	if res != (FlushResult{}) {
		r.logger().Info("older pending registrations sent", "delivered", res.Delivered, "dead", res.Dead, "failed", res.Failed, "elapsed", time.Since(start).Round(time.Millisecond))
	}
	return out
}

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
	engine *Deliverer
	begun  time.Time
}

func (g *registration) run(ctx context.Context) Outcome {
	b := g.r.Retry.backOff()
	for {
		if ctx.Err() != nil {
			return g.stop(ctx)
		}
		dec, err := g.attempt(ctx)
		if err != nil {
			g.lastErr = err
		}
		switch dec.Action {
		case Remove:
			if g.spooled {
				dropDelivered(ctx, false, g.r.Queue, g.id, g.log, "")
			}
			g.deliveredOutage(ctx)
			return Delivered
		case Bury:
			g.bury(ctx, dec.answer(g.r.Client, err))
			return Dead
		}
		if ctx.Err() != nil {
			return g.stop(ctx)
		}
		g.remember(ctx, err)
		g.noteFailure(ctx, err)
		if classify(err) == unusable || g.short {
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
func (g *registration) attempt(ctx context.Context) (Decision, error) {
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
func (g *registration) try(ctx context.Context, timeout time.Duration) (Decision, error) {
	if g.engine == nil {
		g.engine, g.begun = g.r.Deliverer(), time.Now()
	}
	g.attempts++
	e := spool.Entry{TaskID: g.taskID, Payload: g.body, QueuedAt: g.begun, Attempts: g.attempts - 1, Fingerprint: g.r.Client.Fingerprint()}
	return g.engine.try(ctx, g.r.Client, e, g.taskID, timeout)
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
	if g.warned || !g.spooled || errors.Is(err, ErrClientUnusable) {
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

// Flush sends pending registrations oldest first, at most limit (0: all),
// until ctx is done, each vetted by Check and sent with its own payload's
// task id as the Idempotency-Key, to the monitor this Registrar's client is
// configured with, by the delivery engine (Deliverer) with
// EntrypointPolicy. The error is the spool's. A delivery clears the outage
// memory's record of that monitor.
func (r *Registrar) Flush(ctx context.Context, limit int) (FlushResult, error) {
	res, err := r.Deliverer().Flush(ctx, limit)
	r.flushedOutage(ctx, res)
	return res, err
}

// Deliverer is the delivery engine set up for this Registrar's spooled
// registrations.
func (r *Registrar) Deliverer() *Deliverer {
	return &Deliverer{
		Queue:     r.Queue,
		Transport: Transport{Client: r.Client},
		Policy:    EntrypointPolicy,
		Check:     func(e spool.Entry) (string, error) { return r.check(e.Payload) },
		ClientFor: r.ClientFor,
		Backoff:   r.Backoff,
		Logger:    r.Logger,
		Noun:      "registration",
	}
}

func (r *Registrar) logger() *slog.Logger {
	if r.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return r.Logger
}

// errRefused marks a stored payload that the check refused.
var errRefused = errors.New("refused before sending")

// SendStored vets a stored payload as Flush does and makes one attempt to
// deliver it under its own task id; nil means delivered (2xx or 409). It
// keeps nothing: for entries that live outside a spool file that can be
// written (a corrupt file renamed aside, read by salvage).
func (r *Registrar) SendStored(ctx context.Context, payload []byte) error {
	key, err := r.check(payload)
	if err != nil {
		return fmt.Errorf("%w: %w", errRefused, err)
	}
	actx, cancel := context.WithTimeout(ctx, AttemptTimeout)
	defer cancel()
	return r.Client.Send(actx, key, payload)
}

// Permanent reports whether an error of SendStored means the payload must
// never be sent: refused by the check, or for good by the monitor.
func Permanent(err error) bool {
	return errors.Is(err, errRefused) || classify(err) == permanent
}
