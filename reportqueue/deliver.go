package reportqueue

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/paddle-entrypoint/paddle-entrypoint/mountfile"
)

// Path is the monitor's node report endpoint.
const Path = "/v1/nodes/report"

// attemptTimeout bounds one attempt, as the entrypoint's.
const attemptTimeout = 2 * time.Second

// ErrToken: the token file cannot be read.
var ErrToken = errors.New("node token file unreadable")

// Sender posts report bodies to the monitor, gzip-encoded, with the node
// token as a bearer token. The token file is read at start and again after
// the monitor answered 401 or 403.
type Sender struct {
	endpoint  string
	tokenFile string
	userAgent string
	http      *http.Client

	mu     sync.Mutex
	token  string
	reload bool
}

// NewSender checks the URL, the CA file and the token file.
func NewSender(monitorURL, tokenFile, caFile, userAgent string) (*Sender, error) {
	s := &Sender{endpoint: strings.TrimRight(monitorURL, "/") + Path, tokenFile: tokenFile, userAgent: userAgent}
	var tlsConf *tls.Config
	if caFile != "" {
		pem, err := mountfile.Read(caFile, 4<<20)
		if err != nil {
			return nil, fmt.Errorf("monitor CA file %s (PADDLE_MONITOR_CA): %w", caFile, err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("monitor CA file %s (PADDLE_MONITOR_CA) holds no PEM certificate", caFile)
		}
		tlsConf = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tlsConf
	s.http = &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	if err := s.readToken(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Sender) readToken() error {
	if s.tokenFile == "" {
		return nil
	}
	b, err := mountfile.Read(s.tokenFile, 16<<10)
	if err != nil {
		return fmt.Errorf("%w: %s (--token-file, PADDLE_NODE_TOKEN_FILE): %v", ErrToken, s.tokenFile, err)
	}
	s.mu.Lock()
	s.token = strings.TrimSpace(string(b))
	s.mu.Unlock()
	return nil
}

// Answer is the monitor's status for one attempt (0: no answer).
type Answer struct {
	Status int
	Err    error
}

// Kind of an answer for the report.
type Kind int

const (
	Delivered Kind = iota // 2xx, 409
	Dead                  // 400, 413 and other refusals of the body
	Denied                // 401, 403: keep, re-read the token
	Later                 // 5xx, 429, 408, network: keep, end the pass
)

func (a Answer) Kind() Kind {
	switch {
	case a.Err != nil || a.Status == 0:
		return Later
	case a.Status/100 == 2 || a.Status == http.StatusConflict:
		return Delivered
	case a.Status == http.StatusUnauthorized || a.Status == http.StatusForbidden:
		return Denied
	case a.Status == http.StatusTooManyRequests || a.Status == http.StatusRequestTimeout || a.Status >= 500 && a.Status != http.StatusNotImplemented:
		return Later
	}
	return Dead
}

func (a Answer) String() string {
	if a.Err != nil {
		return a.Err.Error()
	}
	return fmt.Sprintf("monitor answered %d %s", a.Status, http.StatusText(a.Status))
}

// Send makes one attempt.
func (s *Sender) Send(ctx context.Context, body []byte) Answer {
	s.mu.Lock()
	reload := s.reload
	s.mu.Unlock()
	if reload {
		if err := s.readToken(); err != nil {
			return Answer{Err: err}
		}
		s.mu.Lock()
		s.reload = false
		s.mu.Unlock()
	}
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	w.Write(body)
	w.Close()
	ctx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.endpoint, &gz)
	if err != nil {
		return Answer{Err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Content-Encoding", "gzip")
	req.Header.Set("User-Agent", s.userAgent)
	s.mu.Lock()
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	s.mu.Unlock()
	resp, err := s.http.Do(req)
	if err != nil {
		return Answer{Err: err}
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	a := Answer{Status: resp.StatusCode}
	if a.Kind() == Denied {
		s.mu.Lock()
		s.reload = true // the token may have been rotated
		s.mu.Unlock()
	}
	return a
}

// PassResult counts what one pass did.
type PassResult struct {
	Sent, Dead, Dropped int
	Stopped             *Answer // the answer that ended the pass early
}

// Deliver sends the spool's pending reports, oldest first, until ctx ends
// or one cannot be taken now. Retryable failures are retried with backoff
// (the entrypoint's table: 150 ms doubling to 1.5 s, jittered) while ctx
// allows, then the pass ends.
func Deliver(ctx context.Context, q *Queue, s *Sender, maxAge time.Duration, now time.Time) (PassResult, error) {
	var res PassResult
	pending, err := q.Pending()
	if err != nil {
		return res, err
	}
	for _, e := range pending {
		if maxAge > 0 && now.Sub(time.Unix(e.Time, 0)) > maxAge {
			if err := q.Drop(e.Time); err != nil {
				return res, err
			}
			res.Dropped++
			continue
		}
		b := backoff.NewExponentialBackOff(
			backoff.WithInitialInterval(150*time.Millisecond), backoff.WithMaxInterval(1500*time.Millisecond),
			backoff.WithMultiplier(2), backoff.WithRandomizationFactor(0.3), backoff.WithMaxElapsedTime(0))
		for {
			a := s.Send(ctx, e.Body)
			switch a.Kind() {
			case Delivered:
				if err := q.Delete(e.Time); err != nil {
					return res, err
				}
				res.Sent++
			case Dead:
				if err := q.Bury(e.Time, a.String()); err != nil {
					return res, err
				}
				res.Dead++
			case Denied:
				q.Attempted(e.Time, a.String())
				res.Stopped = &a
				return res, nil
			case Later:
				q.Attempted(e.Time, a.String())
				wait := b.NextBackOff()
				if dl, ok := ctx.Deadline(); !ok || time.Until(dl) < wait+attemptTimeout/4 {
					res.Stopped = &a
					return res, nil
				}
				select {
				case <-ctx.Done():
					res.Stopped = &a
					return res, nil
				case <-time.After(wait):
				}
				continue
			}
			break
		}
	}
	return res, nil
}
