package reportqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/deliver"
	"github.com/paddle-entrypoint/paddle-entrypoint/internal/mountfile"
	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
	"github.com/paddle-entrypoint/paddle-entrypoint/spool"
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
	// Now is the agent's clock (sent_at, Retry-After); nil: time.Now.
	Now func() time.Time
	// OnConflict hears each 409 answer's GPU UUID conflicts (the report
	// was stored and is deleted as delivered).
	OnConflict func(report string, conflicts []string)

	mu        sync.Mutex
	notBefore time.Time // the monitor's Retry-After: no attempt before
}

func (s *Sender) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Policy is the node agent's table for its reports: 2xx and 409 remove
// (a 409 names GPU UUID conflicts of a report the monitor stored); 425 (a
// report ahead of the monitor's clock) keeps it and ends the pass, to be
// tried again after the answer's Retry-After; 401 and 403 keep it (the
// token file is read again before the next pass); 400, 413 and the other
// answers the entrypoint's table calls permanent bury it (a dead letter:
// the monitor answers 400 only for a report more than 24 h ahead, or
// malformed); 408, 429, 5xx and network errors keep it; every kept
// report ends the pass.
func Policy(e spool.Entry, err error, now time.Time) deliver.Decision {
	var ae *deliver.AnswerError
	if errors.As(err, &ae) && ae.Status == StatusTooEarly {
		return deliver.Decision{Action: deliver.KeepStop}
	}
	return deliver.ReportPolicy(e, err, now)
}

// StatusTooEarly is the monitor's answer to a report from the future.
const StatusTooEarly = 425

// withSentAt returns the report body with sent_at set to the agent's
// clock now, at each attempt (the spooled body keeps none).
func (s *Sender) withSentAt(body []byte) []byte {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil || m == nil {
		return body // the monitor answers 400 for it, as it would anyway
	}
	at, _ := json.Marshal(s.now().UTC().Format("2006-01-02T15:04:05.000Z07:00"))
	m["sent_at"] = at
	out, err := json.Marshal(m)
	if err != nil {
		return body
	}
	return out
}

// conflict parses a 409's body, {"status": "stored", "conflicts": [...]},
// each conflict a UUID or an object naming one (and the node holding it).
func (s *Sender) conflict(key, body string) {
	var answer struct {
		Conflicts []json.RawMessage `json:"conflicts"`
	}
	var out []string
	if json.Unmarshal([]byte(body), &answer) == nil {
		for _, c := range answer.Conflicts {
			out = append(out, conflictText(c))
		}
	}
	if len(out) == 0 {
		out = []string{strings.TrimSpace(body)}
	}
	if s.OnConflict != nil {
		s.OnConflict(key, out)
	}
}

// conflictText names one conflict: its UUID, and the node holding it when
// the monitor says.
func conflictText(raw json.RawMessage) string {
	var uuid string
	if json.Unmarshal(raw, &uuid) == nil {
		return uuid
	}
	var o map[string]any
	if json.Unmarshal(raw, &o) == nil {
		name := func(keys ...string) string {
			for _, k := range keys {
				if v, ok := o[k].(string); ok && v != "" {
					return v
				}
			}
			return ""
		}
		if u := name("uuid", "UUID", "gpu"); u != "" {
			if by := name("held_by", "node"); by != "" {
				return u + " held by " + by
			}
			return u
		}
	}
	return string(raw)
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
	Stopped    error     // the answer or error that ended the pass early
	Waiting    time.Time // the monitor asked for no attempt before this (Retry-After)
}

// Denied reports whether the pass ended on a 401 or 403.
func (r PassResult) Denied() bool { return denied(r.Stopped) }

func denied(err error) bool {
	var ae *deliver.AnswerError
	return errors.As(err, &ae) && (ae.Status == http.StatusUnauthorized || ae.Status == http.StatusForbidden)
}

// Deliver sends the spool's pending reports, oldest first, through the
// delivery engine with Policy, in the engine's passes
// (deliver.Deliverer.Passes): a pass that ends on a report the monitor
// could not take now (5xx, 429, a network error) is tried again with the
// one backoff of every sender (deliver.DefaultRetry: 150 ms doubling to
// 1.5 s, jittered, or the monitor's Retry-After when longer) while ctx's
// deadline leaves room; a 401 or 403 ends it at once.
//
// A Retry-After in the answer that ended a pass is honoured: no attempt
// before it, in this pass or the next (a 425 report waits there until the
// monitor's clock reaches it).
func Deliver(ctx context.Context, q *Queue, s *Sender) (PassResult, error) {
	s.mu.Lock()
	wait := s.notBefore
	s.mu.Unlock()
	if s.now().Before(wait) {
		return PassResult{Waiting: wait}, nil
	}
	d := &deliver.Deliverer{
		Queue:     q.q,
		Transport: deliver.Transport{Client: s.Client, Path: Path, Gzip: true, Prepare: s.withSentAt, Conflict: s.conflict},
		Policy:    Policy,
		Check:     deliver.EntryKey,
		Logger:    s.log,
		Noun:      "report",
		Now:       s.now,
	}
	res, err := d.Passes(ctx, deliver.DefaultRetry, denied)
	if !res.NotBefore.IsZero() {
		// Kept past this call, for the next pass (a 425 report).
		s.mu.Lock()
		s.notBefore = res.NotBefore
		s.mu.Unlock()
	}
	return PassResult{Sent: res.Delivered, Dead: res.Dead, Stopped: res.Stopped, Waiting: res.NotBefore}, err
}
