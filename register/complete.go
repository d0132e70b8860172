package register

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/entrypoint/gate"
	"github.com/paddle-entrypoint/paddle-entrypoint/internal/deliver"
	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
	"github.com/paddle-entrypoint/paddle-entrypoint/spool"
)

// Paths of supervise mode's endpoints, below the monitor's base URL.
const (
	CompletePath  = wire.CompletePath
	HeartbeatPath = wire.HeartbeatPath
)

// afterDeliveryTimeout bounds the spool write that follows a delivery (the
// entry's deletion) when the budget is already spent: a leftover entry only
// costs a duplicate the monitor answers 409.
const afterDeliveryTimeout = 200 * time.Millisecond

// Usage is a completion's gpus from the sampler's summaries (already the
// contract's entries): never null.
func Usage(gpus []wire.GPUUsage) wire.GPUs[wire.GPUUsage] {
	if gpus == nil {
		return wire.GPUs[wire.GPUUsage]{}
	}
	return gpus
}

// Verdict converts the quality gate's result into the completion's gate;
// nil without a gate.
func Verdict(r *gate.Result) *wire.Gate {
	if r == nil {
		return nil
	}
	return &wire.Gate{Expr: r.Expr, Passed: ptr(r.Passed), Reason: r.Reason}
}

// MarshalCompletion returns the bytes of a completion body (POST
// /v1/task/complete, a wire.Completion as the supervisor fills it): schema
// version 1 unless set, gpus never null.
func MarshalCompletion(c wire.Completion) []byte {
	if c.SchemaVersion == nil {
		c.SchemaVersion = ptr(int64(SchemaVersion))
	}
	if c.GPUs == nil {
		c.GPUs = wire.GPUs[wire.GPUUsage]{}
	}
	out, err := json.Marshal(c)
	if err != nil {
		// Numbers, strings and plain structs always marshal; a NaN or
		// an infinity cannot come out of the summaries.
		panic("register: marshalling the completion: " + err.Error())
	}
	return out
}

func ptr[T any](v T) *T { return &v }

// Completer delivers completions, with the registration's retry table, and
// spools them.
//
// Guarantees: a completion is in the spool before its first attempt
// (write-ahead), and leaves it only after a 2xx/409 or as a dead letter
// after a permanent refusal; Complete returns by its context's deadline.
// A spooled completion is vetted as a spooled registration is (Check, the
// node's policy) before it is sent, and sent only under its own task id.
type Completer struct {
	Client *deliver.Client
	Queue  Queue // the spool's completions (*spool.Queue); nil: spool off
	Logger *slog.Logger
	Retry  deliver.RetryPolicy // zero: deliver.DefaultRetry
	// ClientFor: as Registrar.ClientFor, for spooled completions.
	ClientFor func(fp string) *deliver.Client
	// Check: as Registrar.Check, for spooled completions (pass the
	// Registrar's, so the node's policy applies to both). nil: TaskIDOf.
	Check func(payload []byte) (taskID string, err error)
}

// transport posts to the completion endpoint, with
// Idempotency-Key <task_id>/complete.
func (c *Completer) transport() deliver.Transport { return deliver.CompletionTransport(c.Client) }

// Deliverer is the delivery engine set up for this Completer's spooled
// completions (deliver.Spooled.Completions): each is vetted by Check, and
// refused unless its payload's task id is the entry's.
func (c *Completer) Deliverer() *deliver.Deliverer {
	return deliver.Spooled{Client: c.Client, ClientFor: c.ClientFor, Check: c.Check, Logger: c.Logger}.Completions(c.Queue)
}

// Complete spools taskID's completion (write-ahead: before anything else,
// so a supervisor killed at any moment after this loses nothing), then calls
// afterSpool, which may do what must come after the write-ahead and returns
// what became of the task's registration (it may wait for it, until ctx is
// done). Unless that is Spooled (still pending), the completion is
// delivered before ctx's deadline. What is not delivered by then stays in
// the spool, for a later start or spool flush to send once the
// registration is. A completion delivered while its registration is a
// dead letter (or was lost) is logged as such, at warning: the monitor
// keeps it pending and reports nothing of the task until the registration
// arrives (spool requeue, then flush).
func (c *Completer) Complete(ctx context.Context, taskID string, body []byte, afterSpool func(context.Context) (registration Outcome)) Outcome {
	log := c.logger().With("task_id", taskID)
	start := time.Now()
	var id uint64
	spooled := false
	if c.Queue != nil {
		now := time.Now()
		var err error
		e := spool.Entry{Version: spool.RecordVersion, TaskID: taskID, Payload: body, QueuedAt: now, Fingerprint: c.Client.Fingerprint()}
		if d, ok := ctx.Deadline(); ok {
			e.HeldUntil = d // this supervisor's own until its budget ends
		}
		id, err = c.Queue.Enqueue(ctx, e)
		if err != nil {
			log.Warn("completion not written to the spool; sending it without a copy", "err", err)
		}
		spooled = err == nil
	}
	kept := Lost
	if spooled {
		kept = Spooled
	}
	// Not delivered by this supervisor: a later start or spool flush may
	// send it at once (while the budget lasts; after it the hold is over).
	release := func() {
		if h, ok := c.Queue.(holder); ok && spooled && ctx.Err() == nil {
			h.Hold(ctx, id, time.Time{})
		}
	}
	reg := Delivered
	if afterSpool != nil {
		reg = afterSpool(ctx)
	}
	if reg == Spooled {
		log.Info("completion", "outcome", kept.String(), "attempts", 0, "why", "registration not delivered yet; a later start or spool flush sends both, in order")
		release()
		return kept
	}
	b := c.Retry.BackOff()
	d := c.Deliverer()
	attempts := 0
	for {
		// Through the engine: its transport and status policy, with this
		// supervisor's own client.
		e := spool.Entry{TaskID: taskID, Payload: body, QueuedAt: start, Attempts: attempts, Fingerprint: c.Client.Fingerprint()}
		dec, err := d.Try(ctx, c.Client, e, taskID, deliver.AttemptTimeout)
		attempts++
		out := kept
		switch {
		case dec.Action == deliver.Remove:
			out = Delivered
			if spooled {
				dropDelivered(ctx, true, c.Queue, id, log, "completion ")
			}
		case dec.Action == deliver.Bury:
			out = Dead
			answer := dec.Answer(c.Client, err)
			log.Error("monitor refused the completion for good; not retried", "answer", answer)
			if spooled {
				if err := c.Queue.Bury(ctx, id, answer); err != nil {
					log.Warn("spool: dead letter not kept", "err", err)
				}
			}
		case deliver.Classify(err) != deliver.Unusable: // kept: tried again within the budget
			if spooled && ctx.Err() == nil {
				c.Queue.Attempted(ctx, id, c.Client.Redact(err.Error()))
			}
			if wait, _, ok := fitWait(ctx, b, err); ok && ctx.Err() == nil {
				t := time.NewTimer(wait)
				select {
				case <-ctx.Done():
					t.Stop()
				case <-t.C:
					continue
				}
			}
		}
		attrs := []any{"outcome", out.String(), "attempts", attempts, "elapsed", time.Since(start).Round(time.Millisecond)}
		if err != nil && out != Delivered {
			attrs = append(attrs, "err", c.Client.Redact(err.Error()))
		}
		if out == Delivered && (reg == Dead || reg == Lost) {
			attrs[1] = "pending_at_monitor"
			attrs = append(attrs, "registration", reg.String())
			log.Warn("completion sent, but the task's registration "+registrationFate(reg)+
				": the monitor keeps the completion pending and reports nothing of this task until the registration arrives", attrs...)
		} else {
			log.Info("completion", attrs...)
		}
		if out == Spooled {
			release()
		}
		return out
	}
}

// registrationFate says in words what became of a registration that was
// not delivered.
func registrationFate(o Outcome) string {
	if o == Dead {
		return "was refused for good (a dead letter: paddle-entrypoint spool list --dead, then spool requeue)"
	}
	return "was neither delivered nor spooled"
}

// dropDelivered deletes the spool copy of an entry just delivered; what
// is left costs only a duplicate the monitor answers 409, and is logged
// (what names the entry: "" or "completion "). With grace, a ctx already
// done still leaves afterDeliveryTimeout for it (nothing waits on a
// supervisor's last write); without, ctx bounds it (Register returns by
// its budget's deadline).
func dropDelivered(ctx context.Context, grace bool, q deliver.Pending, id uint64, log *slog.Logger, what string) {
	if grace {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), afterDeliveryTimeout)
		defer cancel()
	}
	if err := q.Delete(ctx, id); err != nil {
		log.Warn(what+"delivered, but its spool entry stays until a later send (a duplicate the monitor answers 409)", "err", err)
	}
}

// Flush sends pending completions whose registration is no longer pending
// (the queue hands out only those), oldest first, at most limit (0: all),
// until ctx is done, by the delivery engine with the same rules as
// Registrar.Flush. The error is the spool's.
func (c *Completer) Flush(ctx context.Context, limit int) (deliver.FlushResult, error) {
	if c.Queue == nil {
		return deliver.FlushResult{}, nil
	}
	return c.Deliverer().Flush(ctx, limit)
}

func (c *Completer) logger() *slog.Logger {
	if c.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Logger
}
