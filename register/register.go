// Package register is the entrypoint's side of the delivery: a task's
// registration, heartbeats and completion, and the spooling of what it
// cannot deliver within the budget. Every attempt is made by the delivery
// engine every program shares (internal/deliver: the client, the
// transport, deliver.Deliverer with its status policy): the first tries of
// a new registration (Register, RegisterAlongside) or completion
// (Complete) go through the same transport and status policy
// (deliver.Deliverer.Try) as a flush of the spooled entries.
//
// What the first tries of a new entry keep of their own, and why:
//   - when to try again: within the budget, on the deliver.RetryPolicy's waits
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
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/deliver"
	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
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
	policy, asked := deliver.NextWait(b, err)
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

// Queue is the spool as registration and completion use it: the engine's
// deliver.Pending, and the write-ahead of a fresh entry. *spool.Queue implements it.
type Queue interface {
	deliver.Pending
	Enqueue(ctx context.Context, e spool.Entry) (uint64, error)
	BuryNew(ctx context.Context, e spool.Entry, answer string) error
}

// Registrar delivers registrations with retries, and spools them.
type Registrar struct {
	Client  *deliver.Client
	Queue   Queue // nil: spool off
	Logger  *slog.Logger
	Backlog int                 // older pending entries sent per start after our own
	Retry   deliver.RetryPolicy // zero: deliver.DefaultRetry
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
	// moves the entry to the dead letters with the reason. nil: deliver.TaskIDOf.
	Check func(payload []byte) (taskID string, err error)
	// ClientFor returns the client that sends a spooled entry written for
	// the token with fingerprint fp (a node drainer holds several); nil,
	// or a nil answer: Client. The queue hands out only entries this
	// process may send (spool.Options.Sendable), so none is ever sent
	// under another token.
	ClientFor func(fp string) *deliver.Client
}

// holder is the queue's Hold (*spool.Queue has it): the writer of an entry
// keeps other processes off it while it is still trying it itself.
type holder interface {
	Hold(ctx context.Context, id uint64, until time.Time) error
}

func (r *Registrar) check(payload []byte) (string, error) {
	if r.Check == nil {
		return deliver.TaskIDOf(payload)
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
	if res != (deliver.FlushResult{}) {
		r.logger().Info("older pending registrations sent", "delivered", res.Delivered, "dead", res.Dead, "failed", res.Failed, "elapsed", time.Since(start).Round(time.Millisecond))
	}
	return out
}

// Flush sends pending registrations oldest first, at most limit (0: all),
// until ctx is done, each vetted by Check and sent with its own payload's
// task id as the Idempotency-Key, to the monitor this Registrar's client is
// configured with, by the delivery engine (deliver.Deliverer) with
// deliver.EntrypointPolicy. The error is the spool's. A delivery clears the outage
// memory's record of that monitor.
func (r *Registrar) Flush(ctx context.Context, limit int) (deliver.FlushResult, error) {
	res, err := r.Deliverer().Flush(ctx, limit)
	r.flushedOutage(ctx, res)
	return res, err
}

// Deliverer is the delivery engine set up for this Registrar's spooled
// registrations (deliver.Spooled.Registrations).
func (r *Registrar) Deliverer() *deliver.Deliverer { return r.spooled().Registrations(r.Queue) }

func (r *Registrar) spooled() deliver.Spooled {
	return deliver.Spooled{Client: r.Client, ClientFor: r.ClientFor, Check: r.Check, Backoff: r.Backoff, Logger: r.Logger}
}

func (r *Registrar) logger() *slog.Logger {
	if r.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return r.Logger
}

// SendStored vets a stored payload as Flush does and makes one attempt to
// deliver it under its own task id (deliver.Spooled.SendStored).
func (r *Registrar) SendStored(ctx context.Context, payload []byte) error {
	return r.spooled().SendStored(ctx, payload)
}

// Permanent reports whether an error of SendStored means the payload must
// never be sent: refused by the check, or for good by the monitor.
func Permanent(err error) bool { return deliver.Permanent(err) }

// Path is the monitor API's registration endpoint, below the base URL.
const Path = wire.RegisterPath
