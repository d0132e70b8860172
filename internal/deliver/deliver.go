// Package deliver is the one way every program of this module sends a
// body to the monitor: the client (token re-read at every attempt, CA,
// redaction of what is kept), the transport (an endpoint's path, the
// Idempotency-Key, gzip), the delivery engine over a spool queue
// (Deliverer, with a status policy per sender: EntrypointPolicy,
// ReportPolicy) and the retry policy, one backoff that honours the
// monitor's Retry-After (RetryPolicy, NextWait, Deliverer.Passes). The
// entrypoint (register), the drainer (internal/drain) and the node agent
// (node/reportqueue) use it; it imports only the contract (wire) and the
// spool.
package deliver

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/spool"
)

// The delivery engine: one loop that sends any kind's queued entries
// (registrations, completions, the node agent's reports), with the retry
// policy kept apart from the transport, as the OpenTelemetry Collector's
// exporter helper does. A Deliverer takes three things:
//
//   - a Pending queue (*spool.Queue implements it) that hands out entries
//     oldest first and records what became of each;
//   - a Transport: where the entries are posted (a path below the
//     monitor's base URL), under which token (the Client, or the one
//     ClientFor picks for the entry's fingerprint) and with which
//     Idempotency-Key;
//   - a StatusPolicy: what an attempt's result means for the entry
//     (delete it, bury it as a dead letter, keep it and go on, keep it and
//     end the pass).
//
// Every entry is vetted by Check before it is sent, whatever its kind: a
// payload the check refuses is never sent and becomes a dead letter.

// Pending is a queue of spooled entries as the engine uses it.
// *spool.Queue implements it.
type Pending interface {
	Oldest(ctx context.Context, n int) ([]spool.Entry, error)
	Attempted(ctx context.Context, id uint64, lastErr string) error
	Delete(ctx context.Context, id uint64) error
	Bury(ctx context.Context, id uint64, answer string) error
}

// Transport is how one kind's entries reach the monitor: POST to Path
// below the client's base URL ("" for the registration endpoint, Path),
// with the client's bearer token, and the entry's key followed by KeySuffix
// as the Idempotency-Key. With Gzip the body goes gzip-encoded
// (Content-Encoding: gzip); the spooled payload itself stays plain JSON.
type Transport struct {
	Client    *Client
	Path      string
	KeySuffix string
	Gzip      bool
	// Prepare, when set, rewrites the payload just before each attempt
	// (the node agent's sent_at, the agent's clock at sending); the
	// spooled payload is not changed.
	Prepare func(payload []byte) []byte
	// Conflict, when set, hears the body of every 409 answer (redacted,
	// at most 512 bytes), which is delivered all the same: the node
	// agent counts and logs the GPU UUID conflicts a 409 names.
	Conflict func(key, body string)
}

// Send makes one attempt to post payload under key with client c (nil:
// t.Client); its result reads as Client.Send's.
func (t Transport) Send(ctx context.Context, c *Client, key string, payload []byte) error {
	if c == nil {
		c = t.Client
	}
	if t.Prepare != nil {
		payload = t.Prepare(payload)
	}
	body, encoding := payload, ""
	if t.Gzip {
		var err error
		if body, err = gzipped(payload); err != nil {
			return err
		}
		encoding = "gzip"
	}
	conflict, answer, err := c.PostAnswer(ctx, t.Path, key+t.KeySuffix, body, encoding)
	if conflict && t.Conflict != nil {
		t.Conflict(key, answer)
	}
	return err
}

// gzipped is payload gzip-compressed at the default level.
func gzipped(payload []byte) ([]byte, error) {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write(payload); err != nil {
		return nil, fmt.Errorf("gzip the body: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("gzip the body: %w", err)
	}
	return b.Bytes(), nil
}

// Action is what becomes of an entry after an attempt.
type Action int

// Actions.
const (
	Remove   Action = iota // delivered: the entry is deleted
	Bury                   // refused for good: the entry becomes a dead letter
	KeepNext               // kept pending; the pass goes on with the next entry
	KeepStop               // kept pending; the pass ends (the rest would fail too)
)

// Decision is a StatusPolicy's answer: the action, and for Bury a note put
// before the monitor's answer in the dead letter (may be empty).
type Decision struct {
	Action Action
	Note   string
}

// StatusPolicy decides what an attempt's result (nil: 2xx or 409; an
// *AnswerError; a network error) means for entry e, which has e.Attempts
// failed attempts before this one.
type StatusPolicy func(e spool.Entry, err error, now time.Time) Decision

// EntrypointPolicy is the entrypoint's table for spooled registrations and
// completions: 2xx/409 removes; 501 and 3xx/4xx other than 408 and 429
// bury; another answer (408, 429, 5xx) keeps the entry and goes on with
// the next, and buries it once it was so answered PoisonAttempts times
// over at least PoisonAge since it was queued (it will not get better); a
// network error keeps it and ends the pass.
func EntrypointPolicy(e spool.Entry, err error, now time.Time) Decision {
	var ae *AnswerError
	answered := errors.As(err, &ae)
	switch c := Classify(err); {
	case c == Sent:
		return Decision{Action: Remove}
	case c == Refused:
		return Decision{Action: Bury}
	case answered && e.Attempts+1 >= PoisonAttempts && now.Sub(e.QueuedAt) >= PoisonAge:
		return Decision{Action: Bury, Note: fmt.Sprintf("gave up after %d attempts over %v: ", e.Attempts+1, now.Sub(e.QueuedAt).Round(time.Hour))}
	case answered:
		return Decision{Action: KeepNext}
	}
	return Decision{Action: KeepStop}
}

// ReportPolicy is the node agent's table for its reports:
// 2xx/409 removes; 400 and 413 bury, as does any other answer the
// entrypoint's table calls permanent; 401 and 403 keep the report (the
// token file is read again before the next pass); 408, 429, 5xx and
// network errors keep it; every kept report ends the pass.
func ReportPolicy(_ spool.Entry, err error, _ time.Time) Decision {
	var ae *AnswerError
	switch c := Classify(err); {
	case c == Sent:
		return Decision{Action: Remove}
	case errors.As(err, &ae) && (ae.Status == http.StatusUnauthorized || ae.Status == http.StatusForbidden):
		return Decision{Action: KeepStop}
	case c == Refused:
		return Decision{Action: Bury}
	}
	return Decision{Action: KeepStop}
}

// PayloadKey is the default check: the task_id of the payload, the only
// key a stored body may be sent under, whatever the entry around it says.
func PayloadKey(e spool.Entry) (string, error) { return TaskIDOf(e.Payload) }

// EntryKey is a check for kinds whose payload has no task_id (the node
// agent's reports): the entry's own key, as its writer set it.
func EntryKey(e spool.Entry) (string, error) {
	if e.TaskID == "" {
		return "", errors.New("entry refused: no key")
	}
	return e.TaskID, nil
}

// Deliverer sends one queue's pending entries.
type Deliverer struct {
	Queue     Pending
	Transport Transport
	Policy    StatusPolicy // nil: EntrypointPolicy
	// Check vets an entry read back from the queue before it is sent and
	// returns the key it is sent under; an error makes it a dead letter
	// with the reason, unsent. nil: PayloadKey.
	Check func(e spool.Entry) (key string, err error)
	// ClientFor returns the client that sends an entry written for the
	// token with fingerprint fp; nil, or a nil answer: Transport.Client.
	ClientFor func(fp string) *Client
	// Backoff: entries whose own backoff since their last attempt has not
	// passed are skipped (a drainer that passes again and again).
	Backoff bool
	Logger  *slog.Logger
	// Noun names an entry in the log: "registration", "completion", "report".
	Noun string
	// Now is the sender's clock (the policies' now, the entries' backoff,
	// Passes' NotBefore); nil: time.Now.
	Now func() time.Time
}

func (d *Deliverer) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

// FlushResult counts what a flush did: entries delivered, attempts that
// failed, entries moved to the dead letters, and entries read but left
// pending (the failed and the skipped ones included).
type FlushResult struct {
	Delivered, Failed, Dead, Pending int
	// Stopped is the failed attempt that ended the flush, nil when none.
	Stopped error
	// NotBefore (Passes only) is the instant before which the monitor
	// asked for no attempt: the Deliverer's clock plus the Retry-After of
	// the latest stopping answer that carried one; zero when none did. A
	// sender that passes again later waits for it (a node report from
	// ahead of the monitor's clock, answered 425).
	NotBefore time.Time
}

// One entry's failures must not stall the others (a "poison" entry that
// the monitor answers 5xx forever):
//   - an entry the policy keeps with KeepNext (EntrypointPolicy: answered
//     with a retryable status) is skipped, and the flush goes on with the
//     next; a flush stops at KeepStop (EntrypointPolicy: a network error,
//     the monitor is unreachable and the rest would fail too) or after
//     maxAnsweredInARow KeepNext in a row (the monitor is busy);
//   - with Deliverer.Backoff, an entry is not tried again before its own
//     backoff since its last attempt has passed: entryBackoff doubled per
//     attempt, at most maxEntryBackoff;
//   - an entry that was answered with a retryable status after
//     PoisonAttempts attempts over at least PoisonAge since it was queued
//     is a dead letter: it will not get better.
const (
	maxAnsweredInARow = 3
	entryBackoff      = 250 * time.Millisecond
	maxEntryBackoff   = 5 * time.Minute
	PoisonAttempts    = 20
	PoisonAge         = 24 * time.Hour
)

// backingOff reports whether e's own backoff since its last attempt has
// not yet passed.
func backingOff(e spool.Entry, now time.Time) bool {
	if e.Attempts <= 0 || e.LastAttempt.IsZero() {
		return false
	}
	wait := maxEntryBackoff
	if e.Attempts < 20 {
		wait = min(entryBackoff<<(e.Attempts-1), maxEntryBackoff)
	}
	return now.Before(e.LastAttempt.Add(wait))
}

// Flush sends pending entries oldest first, at most limit (0: all), until
// ctx is done, each under the key its check returns. What becomes of each
// is the policy's decision; entries kept with KeepNext are skipped, as the
// constants above say. The queue is not locked while sending. The error is
// the queue's.
func (d *Deliverer) Flush(ctx context.Context, limit int) (FlushResult, error) {
	var res FlushResult
	skipped := map[uint64]bool{}
	inARow := 0
	for seen := 0; limit <= 0 || seen < limit; {
		n := flushBatch
		if limit > 0 {
			n = min(n, limit-seen)
		}
		asked := n + len(skipped)
		entries, err := d.Queue.Oldest(ctx, asked)
		if err != nil {
			return res, err
		}
		var fresh []spool.Entry
		for _, e := range entries {
			if !skipped[e.ID] {
				fresh = append(fresh, e)
			}
		}
		if len(fresh) == 0 {
			return res, nil
		}
		for i, e := range fresh {
			if ctx.Err() != nil {
				res.Pending += len(fresh) - i
				return res, nil
			}
			if d.Backoff && backingOff(e, d.now()) {
				skipped[e.ID] = true
				res.Pending++
				continue
			}
			step, err := d.flushOne(ctx, e, &res)
			switch {
			case err != nil || step == stopped:
				res.Pending += len(fresh) - i
				return res, err
			case step == skippedOne:
				skipped[e.ID] = true
				res.Pending++
				if inARow++; inARow >= maxAnsweredInARow {
					res.Pending += len(fresh) - i - 1
					return res, nil
				}
			default:
				inARow = 0
			}
		}
		seen += len(fresh)
		if len(entries) < asked {
			return res, nil
		}
	}
	return res, nil
}

// flushStep is what became of one entry in a flush.
type flushStep int

const (
	done       flushStep = iota // delivered or dead
	skippedOne                  // kept with KeepNext: the flush goes on
	stopped                     // kept with KeepStop: the flush ends
)

// flushOne vets, sends and records one spooled entry.
func (d *Deliverer) flushOne(ctx context.Context, e spool.Entry, res *FlushResult) (flushStep, error) {
	log := d.logger().With("task_id", e.TaskID, "spool_id", e.ID)
	check := d.Check
	if check == nil {
		check = PayloadKey
	}
	key, cerr := check(e)
	if cerr != nil {
		// Someone else's data, or an older version's: never sent.
		answer := "not sent: " + cerr.Error()
		log.Error("spooled "+d.noun()+" refused before sending; moved to the dead letters", "reason", answer)
		if err := d.Queue.Bury(ctx, e.ID, answer); err != nil {
			return stopped, err
		}
		res.Dead++
		return done, nil
	}
	cl := d.clientFor(e.Fingerprint)
	dec, sendErr := d.Try(ctx, cl, e, key, AttemptTimeout)
	switch dec.Action {
	case Remove:
		if err := d.Queue.Delete(ctx, e.ID); err != nil {
			return stopped, err
		}
		res.Delivered++
		return done, nil
	case Bury:
		answer := dec.Answer(cl, sendErr)
		log.Error("monitor refused a spooled "+d.noun()+" for good; moved to the dead letters", "answer", answer)
		if err := d.Queue.Bury(ctx, e.ID, answer); err != nil {
			return stopped, err
		}
		res.Dead++
		return done, nil
	case KeepNext, KeepStop:
		res.Failed++
		res.Stopped = sendErr
		text := "kept by the status policy"
		if sendErr != nil {
			text = cl.Redact(sendErr.Error())
		}
		log.Debug("spooled "+d.noun()+" not delivered; it stays pending", "err", text)
		if ctx.Err() == nil {
			if err := d.Queue.Attempted(ctx, e.ID, text); err != nil {
				log.Debug("spool: attempt not recorded", "err", err)
			}
		}
		if dec.Action == KeepNext {
			return skippedOne, nil
		}
		return stopped, nil
	}
	return stopped, fmt.Errorf("register: status policy answered an unknown action %d", dec.Action)
}

// try makes one attempt to send entry e under key with client c (nil: the
// one e's fingerprint picks), cut short after timeout, and returns the
// status policy's decision on its result, and the result. Every attempt
// goes through here: a flush's of spooled entries, and the first tries of
// a new entry (Registrar.Register, RegisterAlongside, Completer.Complete),
// which act on the decision as the package comment says.
func (d *Deliverer) Try(ctx context.Context, c *Client, e spool.Entry, key string, timeout time.Duration) (Decision, error) {
	if c == nil {
		c = d.clientFor(e.Fingerprint)
	}
	actx, cancel := context.WithTimeout(ctx, timeout)
	err := d.Transport.Send(actx, c, key, e.Payload)
	cancel()
	policy := d.Policy
	if policy == nil {
		policy = EntrypointPolicy
	}
	return policy(e, err, d.now()), err
}

// answer is what a dead letter keeps of an attempt the decision buries:
// the note and the monitor's answer, redacted by c.
func (dec Decision) Answer(c *Client, err error) string {
	if err == nil {
		return dec.Note + "refused"
	}
	return dec.Note + c.Redact(err.Error())
}

func (d *Deliverer) noun() string {
	if d.Noun == "" {
		return "entry"
	}
	return d.Noun
}

func (d *Deliverer) logger() *slog.Logger {
	if d.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return d.Logger
}

func (d *Deliverer) clientFor(fp string) *Client {
	if d.ClientFor != nil {
		if c := d.ClientFor(fp); c != nil {
			return c
		}
	}
	return d.Transport.Client
}
