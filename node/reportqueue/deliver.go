package reportqueue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/mountfile"
	"github.com/paddle-entrypoint/paddle-entrypoint/register"
)

// Path is the monitor's node report endpoint.
const Path = "/v1/nodes/report"

// ErrToken: the token file cannot be read.
var ErrToken = errors.New("node token file unreadable")

// Sender is the monitor client of the reports: the node token as a bearer
// token, re-read at every attempt (a rotated token is used at the next).
type Sender struct {
	Client *register.Client
	log    *slog.Logger
}

// NewSender checks the URL, the CA file and that the token file (when
// given) can be read.
func NewSender(monitorURL, tokenFile, caFile, userAgent string, log *slog.Logger) (*Sender, error) {
	if tokenFile != "" {
		if _, err := mountfile.Read(tokenFile, 16<<10); err != nil {
			return nil, fmt.Errorf("%w: %s (--token-file, PADDLE_NODE_TOKEN_FILE): %v", ErrToken, tokenFile, err)
		}
	}
	c, err := register.NewClient(register.ClientConfig{URL: monitorURL, TokenFile: tokenFile, CAFile: caFile, UserAgent: userAgent, Logger: log})
	if err != nil {
		return nil, err
	}
	return &Sender{Client: c, log: log}, nil
}

// Fingerprint names the token the next report is written for.
func (s *Sender) Fingerprint() string { return s.Client.Fingerprint() }

// PassResult counts what one pass did.
type PassResult struct {
	Sent, Dead int
	Stopped    error // the answer or error that ended the pass early
}

// Denied reports whether the pass ended on a 401 or 403.
func (r PassResult) Denied() bool {
	var ae *register.AnswerError
	return errors.As(r.Stopped, &ae) && (ae.Status == http.StatusUnauthorized || ae.Status == http.StatusForbidden)
}

// Deliver sends the spool's pending reports, oldest first, through the
// delivery engine with register.ReportPolicy. A pass that ends on a report
// the monitor could not take now (5xx, 429, a network error) is tried
// again with the entrypoint's backoff (150 ms doubling to 1.5 s, jittered)
// while ctx's deadline leaves room; a 401 or 403 ends it at once.
func Deliver(ctx context.Context, q *Queue, s *Sender) (PassResult, error) {
	d := &register.Deliverer{
		Queue:     q.q,
		Transport: register.Transport{Client: s.Client, Path: Path, Gzip: true},
		Policy:    register.ReportPolicy,
		Check:     register.EntryKey,
		Logger:    s.log,
		Noun:      "report",
	}
	b := backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(150*time.Millisecond), backoff.WithMaxInterval(1500*time.Millisecond),
		backoff.WithMultiplier(2), backoff.WithRandomizationFactor(0.3), backoff.WithMaxElapsedTime(0))
	var total PassResult
	for {
		res, err := d.Flush(ctx, 0)
		total.Sent += res.Delivered
		total.Dead += res.Dead
		total.Stopped = res.Stopped
		if err != nil || res.Stopped == nil || total.Denied() {
			return total, err
		}
		wait := b.NextBackOff()
		if dl, ok := ctx.Deadline(); !ok || time.Until(dl) < wait+register.AttemptTimeout/4 {
			return total, nil
		}
		select {
		case <-ctx.Done():
			return total, nil
		case <-time.After(wait):
		}
	}
}
