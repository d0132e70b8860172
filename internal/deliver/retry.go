package deliver

import (
	"errors"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// AttemptTimeout bounds one attempt; the budget may cut it shorter.
const AttemptTimeout = 2 * time.Second

// RetryPolicy is the wait between attempts, kept apart from the transport:
// exponential, with jitter, never past the budget (the context's deadline,
// which the policy itself does not know about).
type RetryPolicy struct {
	Initial    time.Duration // first wait
	Max        time.Duration // longest wait
	Multiplier float64
	Jitter     float64 // randomization factor: a wait is w*(1±Jitter)
}

// DefaultRetry waits about 150ms, 300ms, 600ms, 1.2s, 1.5s, ... so that a
// 5s budget holds several attempts against a monitor that answers 503 at
// once, and still two against one that never answers.
var DefaultRetry = RetryPolicy{Initial: 150 * time.Millisecond, Max: 1500 * time.Millisecond, Multiplier: 2, Jitter: 0.3}

func (p RetryPolicy) BackOff() backoff.BackOff {
	if p == (RetryPolicy{}) {
		p = DefaultRetry
	}
	return backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(p.Initial),
		backoff.WithMaxInterval(p.Max),
		backoff.WithMultiplier(p.Multiplier),
		backoff.WithRandomizationFactor(p.Jitter),
		backoff.WithMaxElapsedTime(0), // the budget bounds the retries
	)
}

// Class is what an attempt's result means for the registration.
type Class int

const (
	Sent      Class = iota // 2xx or 409
	Retryable              // network, TLS, timeout, 408, 429, 5xx but 501
	Refused                // other 3xx/4xx, 501: dead letter
	Unusable               // this process cannot send at all: spool, stop
)

func Classify(err error) Class {
	if err == nil {
		return Sent
	}
	var ae *AnswerError
	if errors.As(err, &ae) {
		if ae.Permanent() {
			return Refused
		}
		return Retryable
	}
	if errors.Is(err, ErrClientUnusable) {
		return Unusable
	}
	return Retryable
}

// nextWait returns the policy's next wait, and the wait the monitor asked
// for with Retry-After (0 when it did not).
func NextWait(b backoff.BackOff, err error) (policy, asked time.Duration) {
	policy = b.NextBackOff()
	var ae *AnswerError
	if errors.As(err, &ae) && ae.HasRetryAfter {
		asked = ae.RetryAfter
	}
	return policy, asked
}
