package register

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/gate"
	"github.com/paddle-entrypoint/paddle-entrypoint/gpu"
	"github.com/paddle-entrypoint/paddle-entrypoint/spool"
	"github.com/paddle-entrypoint/paddle-entrypoint/wire"
)

// Paths of supervise mode's endpoints, below the monitor's base URL.
const (
	CompletePath  = "/v1/task/complete"
	HeartbeatPath = "/v1/task/heartbeat"
)

// afterDeliveryTimeout bounds the spool write that follows a delivery (the
// entry's deletion) when the budget is already spent: a leftover entry only
// costs a duplicate the monitor answers 409.
const afterDeliveryTimeout = 200 * time.Millisecond

// Completion is what the body of POST /v1/task/complete says (a
// wire.Completion, docs/openapi.yaml), as the supervisor gathers it.
type Completion struct {
	TaskID          string
	StartTime       int64
	EndTime         int64
	DurationSeconds float64
	ExitCode        int
	// Signal names the signal that killed the command (SIGKILL), if one did.
	Signal     string
	GPUCount   int
	GPUSeconds float64
	GPUs       []gpu.GPUSummary
	// Gate and Metrics are the quality gate's verdict and the step's
	// metrics, when a gate is configured.
	Gate    *gate.Result
	Metrics map[string]float64
}

// Wire is the completion's body, schema version 1; GPUs is never null.
func (c Completion) Wire() wire.Completion {
	w := wire.Completion{
		SchemaVersion: ptr(int64(SchemaVersion)), TaskID: c.TaskID, StartTime: &c.StartTime, EndTime: &c.EndTime,
		DurationSeconds: &c.DurationSeconds, ExitCode: ptr(int64(c.ExitCode)), Signal: c.Signal,
		GPUCount: ptr(int64(c.GPUCount)), GPUSeconds: &c.GPUSeconds, GPUs: make(wire.GPUs[wire.GPUUsage], 0, len(c.GPUs)),
		Metrics: c.Metrics,
	}
	for _, g := range c.GPUs {
		u := wire.GPUUsage{UUID: g.UUID, MIGUUID: g.MIGUUID, Share: ptr(g.Share), Samples: int64(g.Samples),
			UtilMean: g.UtilMean, UtilP95: g.UtilP95, IdleShare: g.IdleShare, EnergyJoules: g.EnergyJoules,
			EnergyEstimated: ptr(g.EnergyEstimated)}
		if g.MemoryUsedPeakBytes != nil {
			u.MemoryUsedPeakBytes = ptr(int64(*g.MemoryUsedPeakBytes))
		}
		w.GPUs = append(w.GPUs, u)
	}
	if c.Gate != nil {
		w.Gate = &wire.Gate{Expr: c.Gate.Expr, Passed: ptr(c.Gate.Passed), Reason: c.Gate.Reason}
	}
	return w
}

// Marshal returns the body's bytes.
func (c Completion) Marshal() []byte {
	out, err := json.Marshal(c.Wire())
	if err != nil {
		// Numbers, strings and plain structs always marshal; a NaN or
		// an infinity cannot come out of the summaries.
		panic("register: marshalling the completion: " + err.Error())
	}
	return out
}

func ptr[T any](v T) *T { return &v }

// SendCompletion makes one attempt to deliver a completion body, with
// Idempotency-Key <task_id>/complete; its result reads as Send's.
func (c *Client) SendCompletion(ctx context.Context, taskID string, payload []byte) error {
	return c.post(ctx, c.endpointOf(CompletePath), taskID+"/complete", payload)
}

// SendHeartbeat makes one attempt to deliver a heartbeat; key tells one
// heartbeat from another.
func (c *Client) SendHeartbeat(ctx context.Context, key string, payload []byte) error {
	return c.post(ctx, c.endpointOf(HeartbeatPath), key, payload)
}

// endpointOf is the URL of the monitor's endpoint at path. A URL that can
// never work leaves the client broken, so post never sends to "".
func (c *Client) endpointOf(path string) string {
	e, _ := Endpoint(c.base, path)
	return e
}

// CompletionQueue is the spool as completions use it. *spool.Spool
// implements it.
type CompletionQueue interface {
	EnqueueCompletion(ctx context.Context, e spool.Entry) (uint64, error)
	DeleteCompletion(ctx context.Context, id uint64) error
	AttemptedCompletion(ctx context.Context, id uint64, lastErr string) error
	BuryCompletion(ctx context.Context, id uint64, answer string) error
	ReadyCompletions(ctx context.Context, n int) ([]spool.Entry, error)
}

// Completer delivers completions, with the registration's retry table, and
// spools them.
//
// Guarantees: a completion is in the spool before its first attempt
// (write-ahead), and leaves it only after a 2xx/409 or as a dead letter
// after a permanent refusal; Complete returns by its context's deadline.
type Completer struct {
	Client *Client
	Queue  CompletionQueue // nil: spool off
	Logger *slog.Logger
	Retry  RetryPolicy // zero: DefaultRetry
	// ClientFor: as Registrar.ClientFor, for spooled completions.
	ClientFor func(fp string) *Client
}

func (c *Completer) clientFor(fp string) *Client {
	if c.ClientFor != nil {
		if cl := c.ClientFor(fp); cl != nil {
			return cl
		}
	}
	return c.Client
}

// Complete spools taskID's completion (write-ahead: before anything else,
// so a supervisor killed at any moment after this loses nothing), then calls
// afterSpool, which may do what must come after the write-ahead and reports
// whether the task's registration is no longer pending (it may wait for it,
// until ctx is done). If so, the completion is delivered before ctx's
// deadline. What is not delivered by then stays in the spool, for a later
// start or spool flush to send once the registration is.
func (c *Completer) Complete(ctx context.Context, taskID string, body []byte, afterSpool func(context.Context) (registered bool)) Outcome {
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
		id, err = c.Queue.EnqueueCompletion(ctx, e)
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
		if h, ok := c.Queue.(interface {
			HoldCompletion(context.Context, uint64, time.Time) error
		}); ok && spooled && ctx.Err() == nil {
			h.HoldCompletion(ctx, id, time.Time{})
		}
	}
	if afterSpool != nil && !afterSpool(ctx) {
		log.Info("completion", "outcome", kept.String(), "attempts", 0, "why", "registration not delivered yet; a later start or spool flush sends both, in order")
		release()
		return kept
	}
	b := c.Retry.backOff()
	attempts := 0
	for {
		actx, cancel := context.WithTimeout(ctx, AttemptTimeout)
		err := c.Client.SendCompletion(actx, taskID, body)
		cancel()
		attempts++
		out := kept
		switch classify(err) {
		case delivered:
			out = Delivered
			if spooled {
				dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), afterDeliveryTimeout)
				if err := c.Queue.DeleteCompletion(dctx, id); err != nil {
					log.Warn("completion delivered, but its spool entry stays until a later send (a duplicate the monitor answers 409)", "err", err)
				}
				cancel()
			}
		case permanent:
			out = Dead
			answer := c.Client.Redact(err.Error())
			log.Error("monitor refused the completion for good; not retried", "answer", answer)
			if spooled {
				if err := c.Queue.BuryCompletion(ctx, id, answer); err != nil {
					log.Warn("spool: dead letter not kept", "err", err)
				}
			}
		case retryable:
			if spooled && ctx.Err() == nil {
				c.Queue.AttemptedCompletion(ctx, id, c.Client.Redact(err.Error()))
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
		log.Info("completion", attrs...)
		if out == Spooled {
			release()
		}
		return out
	}
}

// Flush sends pending completions whose registration is no longer pending,
// oldest first, at most limit (0: all), until ctx is done, with the same
// rules as Registrar.Flush: it stops at the first attempt worth retrying.
func (c *Completer) Flush(ctx context.Context, limit int) (FlushResult, error) {
	var res FlushResult
	if c.Queue == nil {
		return res, nil
	}
	entries, err := c.Queue.ReadyCompletions(ctx, limit)
	if err != nil {
		return res, err
	}
	for i, e := range entries {
		if ctx.Err() != nil {
			res.Pending += len(entries) - i
			return res, nil
		}
		key, cerr := TaskIDOf(e.Payload)
		if cerr == nil && key != e.TaskID {
			cerr = errors.New("payload refused: its task_id is not the entry's")
		}
		if cerr != nil {
			// Someone else's data: never sent, under any key.
			answer := "not sent: " + cerr.Error()
			c.logger().Error("spooled completion refused before sending; moved to the dead letters", "spool_id", e.ID, "reason", answer)
			if err = c.Queue.BuryCompletion(ctx, e.ID, answer); err != nil {
				res.Pending += len(entries) - i - 1
				return res, err
			}
			res.Dead++
			continue
		}
		cl := c.clientFor(e.Fingerprint)
		actx, cancel := context.WithTimeout(ctx, AttemptTimeout)
		sendErr := cl.SendCompletion(actx, key, e.Payload)
		cancel()
		switch classify(sendErr) {
		case delivered:
			err = c.Queue.DeleteCompletion(ctx, e.ID)
			res.Delivered++
		case permanent:
			answer := c.Client.Redact(sendErr.Error())
			c.logger().Error("monitor refused a spooled completion for good; moved to the dead letters", "task_id", e.TaskID, "answer", answer)
			err = c.Queue.BuryCompletion(ctx, e.ID, answer)
			res.Dead++
		default:
			res.Failed++
			res.Stopped = sendErr
			res.Pending += len(entries) - i
			if ctx.Err() == nil {
				c.Queue.AttemptedCompletion(ctx, e.ID, c.Client.Redact(sendErr.Error()))
			}
			return res, nil
		}
		if err != nil {
			res.Pending += len(entries) - i - 1
			return res, err
		}
	}
	return res, nil
}

func (c *Completer) logger() *slog.Logger {
	if c.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Logger
}
