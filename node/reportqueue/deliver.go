package reportqueue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/deliver"
	"github.com/paddle-entrypoint/paddle-entrypoint/internal/mountfile"
	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
)

// Path is the monitor's node report endpoint.
const Path = wire.NodeReportPath

// ErrToken: the token file cannot be read.
var ErrToken = errors.New("node token file unreadable")

// Sender is the monitor client of the reports: the node token as a bearer
// token, re-read at every attempt (a rotated token is used at the next).
type Sender struct {
	Client *deliver.Client
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
	c, err := deliver.NewClient(deliver.ClientConfig{URL: monitorURL, TokenFile: tokenFile, CAFile: caFile, UserAgent: userAgent, Logger: log})
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
func (r PassResult) Denied() bool { return denied(r.Stopped) }

func denied(err error) bool {
	var ae *deliver.AnswerError
	return errors.As(err, &ae) && (ae.Status == http.StatusUnauthorized || ae.Status == http.StatusForbidden)
}

// Deliver sends the spool's pending reports, oldest first, through the
// delivery engine with deliver.ReportPolicy. A pass that ends on a report
// the monitor could not take now (5xx, 429, a network error) is tried
// again with the one backoff of every sender (deliver.DefaultRetry: 150 ms
// doubling to 1.5 s, jittered, or the monitor's Retry-After when longer)
// while ctx's deadline leaves room; a 401 or 403 ends it at once.
func Deliver(ctx context.Context, q *Queue, s *Sender) (PassResult, error) {
	d := &deliver.Deliverer{
		Queue:     q.q,
		Transport: deliver.Transport{Client: s.Client, Path: Path, Gzip: true},
		Policy:    deliver.ReportPolicy,
		Check:     deliver.EntryKey,
		Logger:    s.log,
		Noun:      "report",
	}
	res, err := d.Passes(ctx, deliver.DefaultRetry, denied)
	return PassResult{Sent: res.Delivered, Dead: res.Dead, Stopped: res.Stopped}, err
}
