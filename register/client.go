package register

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/entrypoint/sensitive"
	"github.com/paddle-entrypoint/paddle-entrypoint/internal/mountfile"
	"github.com/paddle-entrypoint/paddle-entrypoint/spool"
)

// Path is the monitor API's registration endpoint, below the base URL.
const Path = "/v1/task/register"

// Limits on what is read from the monitor and from the token file.
const (
	answerSnippet = 512      // bytes of an answer's body kept with a dead letter
	answerDrain   = 64 << 10 // bytes read before closing, so the connection can be reused
	maxTokenSize  = 16 << 10
	maxCASize     = 4 << 20 // a full system bundle is about 200 KiB
	maxRetryAfter = 24 * time.Hour
)

// ErrClientUnusable marks attempts that a client could not make at all (its
// CA file is unusable). Such attempts are never retried by the same process,
// and never made without verification: the registration is spooled.
var ErrClientUnusable = errors.New("monitor client unusable")

// ClientConfig configures the HTTP transport to the monitor.
type ClientConfig struct {
	URL       string // base URL; the path /v1/task/register is added
	TokenFile string // bearer token file, re-read at every attempt
	CAFile    string // extra CA bundle for https, added to the system roots
	UserAgent string // paddle-entrypoint/<version>
	// Logger hears about a token file that cannot be read; nil: silent.
	Logger *slog.Logger
}

// Client sends registration attempts to the monitor. It is safe for
// concurrent use.
//
// Proxies: like curl in the shell script it replaces, the client honours
// HTTP_PROXY, HTTPS_PROXY and NO_PROXY from the environment (the task's).
type Client struct {
	base      string // the configured URL: the outage memory's key
	endpoint  string
	tokenFile string
	userAgent string
	http      *http.Client
	broken    error // non-nil: every attempt fails with it
	log       *slog.Logger

	// fixed, when set, is the token every attempt sends instead of the
	// file's (WithToken: a drainer's token of another team).
	fixed *string

	mu          sync.Mutex
	tokens      []*redactor // every token sent, to redact from stored text
	tokenWarned bool
}

// WithToken returns a client like c (same monitor, transport and CA) that
// sends tok instead of reading the token file: a node drainer's client for
// the entries written for tok.
func (c *Client) WithToken(tok string) *Client {
	n := &Client{base: c.base, endpoint: c.endpoint, userAgent: c.userAgent, http: c.http, broken: c.broken, log: c.log, fixed: &tok}
	if tok != "" {
		n.tokens = []*redactor{newRedactor(tok)}
	}
	return n
}

// Fingerprint names the token the client's next attempt sends, as a spool
// entry records it: the first 16 hex digits of the token's SHA-256,
// spool.FingerprintNone when it sends none (no file configured, the file
// missing, or empty), spool.FingerprintUnusable when the file cannot be
// read safely. The token file is read afresh, as at every attempt.
func (c *Client) Fingerprint() string {
	tok, err := c.token()
	switch {
	case err != nil:
		return spool.FingerprintUnusable
	case tok == "":
		return spool.FingerprintNone
	}
	return Fingerprint(tok)
}

// Fingerprint is the fingerprint of token tok: the first 16 hex digits of
// its SHA-256 (what the monitor's tokens file holds for it).
func Fingerprint(tok string) string {
	sum := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(sum[:8])
}

// NewClient returns a client. A URL that can never work (ErrBadURL), or a
// CA file that cannot be read or holds no certificate, is an error; the
// client returned with it is still usable as a value, but each of its
// attempts fails at once with ErrClientUnusable, so the registration is
// spooled rather than retried in vain or sent without verification.
func NewClient(c ClientConfig) (*Client, error) {
	cl := &Client{
		base:      c.URL,
		tokenFile: c.TokenFile,
		userAgent: c.UserAgent,
		log:       c.Logger,
	}
	endpoint, err := Endpoint(c.URL, Path)
	if err == nil {
		cl.endpoint = endpoint
		var tlsConf *tls.Config
		if tlsConf, err = tlsConfig(c.URL, c.CAFile); err == nil {
			cl.http = httpClient(tlsConf)
		}
	}
	if err != nil {
		cl.broken = fmt.Errorf("%w: %w", ErrClientUnusable, err)
	}
	return cl, cl.broken
}

// httpClient returns the HTTP client of every attempt.
func httpClient(tlsConf *tls.Config) *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			Proxy:               http.ProxyFromEnvironment,
			DialContext:         (&net.Dialer{KeepAlive: 30 * time.Second}).DialContext,
			TLSClientConfig:     tlsConf,
			TLSHandshakeTimeout: AttemptTimeout,
			ForceAttemptHTTP2:   true,
			MaxIdleConns:        2,
			IdleConnTimeout:     30 * time.Second,
		},
		// A redirect is an answer like any other: the configured URL is
		// wrong, and following it would re-send the body (and perhaps
		// the token) somewhere nobody configured.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// tlsConfig returns the TLS settings for an https monitor: the system roots
// plus the PEM certificates of caFile. nil means Go's defaults.
func tlsConfig(url, caFile string) (*tls.Config, error) {
	if caFile == "" || !strings.HasPrefix(strings.ToLower(url), "https://") {
		return nil, nil
	}
	pem, err := mountfile.Read(caFile, maxCASize)
	if err != nil {
		return nil, fmt.Errorf("monitor CA file (PADDLE_MONITOR_CA_FILE): %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("monitor CA file %s (PADDLE_MONITOR_CA_FILE) holds no PEM certificate", caFile)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// AnswerError is an answer of the monitor other than 2xx and 409.
type AnswerError struct {
	Status int
	// Body is the start of the answer's body, token redacted.
	Body string
	// RetryAfter is the wait the monitor asked for; HasRetryAfter says
	// whether it asked.
	RetryAfter    time.Duration
	HasRetryAfter bool
}

func (e *AnswerError) Error() string {
	s := "monitor answered " + strconv.Itoa(e.Status)
	if t := http.StatusText(e.Status); t != "" {
		s += " " + t
	}
	if e.Body != "" {
		s += ": " + strconv.Quote(e.Body)
	}
	return s
}

// Permanent reports whether the answer refuses the registration for good:
// every 3xx and 4xx except 408 and 429, and 501. Other 5xx, 408 and 429 are
// worth another try.
func (e *AnswerError) Permanent() bool {
	switch {
	case e.Status == http.StatusRequestTimeout, e.Status == http.StatusTooManyRequests:
		return false
	case e.Status == http.StatusNotImplemented:
		return true
	case e.Status >= 500:
		return false
	}
	return true
}

// Send makes one attempt to deliver a registration body. It returns nil when
// the monitor answered 2xx or 409 (already registered), an *AnswerError for
// any other answer, and otherwise the network's error (refused, reset, TLS,
// ctx's deadline). taskID is the Idempotency-Key, the same at every try.
func (c *Client) Send(ctx context.Context, taskID string, payload []byte) error {
	return c.post(ctx, c.endpoint, taskID, payload)
}

// post makes one attempt to deliver payload to endpoint, with key as the
// Idempotency-Key; its result reads as Send's.
func (c *Client) post(ctx context.Context, endpoint, key string, payload []byte) error {
	return c.postEncoded(ctx, endpoint, key, payload, "")
}

// postEncoded is post with the body already encoded as encoding says
// (the Content-Encoding header; "" for none).
func (c *Client) postEncoded(ctx context.Context, endpoint, key string, payload []byte, encoding string) error {
	_, _, err := c.postAnswer(ctx, endpoint, key, payload, encoding)
	return err
}

// postAnswer is postEncoded that also returns the start of a 409's body
// (redacted), which says what the monitor found in conflict.
func (c *Client) postAnswer(ctx context.Context, endpoint, key string, payload []byte, encoding string) (conflict bool, body string, err error) {
	if c.broken != nil {
		return false, "", c.broken
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(payload))
	if err != nil {
		return false, "", fmt.Errorf("monitor URL: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if encoding != "" {
		req.Header.Set("Content-Encoding", encoding)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("User-Agent", c.userAgent)
	tok, err := c.token()
	if err != nil {
		return false, "", err
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return false, "", err
	}
	defer resp.Body.Close()
	// Read past the snippet by a token's length, so that a token that
	// straddles the cut is redacted whole before the text is cut.
	head, _ := io.ReadAll(io.LimitReader(resp.Body, answerSnippet+maxTokenSize))
	io.Copy(io.Discard, io.LimitReader(resp.Body, answerDrain))
	if resp.StatusCode == http.StatusConflict {
		return true, snippet(c.Redact(strings.ToValidUTF8(string(head), "?"))), nil
	}
	if resp.StatusCode/100 == 2 {
		return false, "", nil
	}
	ae := &AnswerError{Status: resp.StatusCode, Body: snippet(c.Redact(strings.ToValidUTF8(string(head), "?")))}
	ae.RetryAfter, ae.HasRetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	return false, "", ae
}

// token reads the bearer token afresh, so a rotated projected token is used
// at the next attempt. "" means no Authorization header: no file configured,
// unreadable (warned once), empty, or unusable in a header.
func (c *Client) token() (string, error) {
	if c.fixed != nil {
		return *c.fixed, nil
	}
	if c.tokenFile == "" {
		return "", nil
	}
	raw, err := mountfile.Read(c.tokenFile, maxTokenSize)
	tok := strings.TrimSpace(string(raw))
	if err == nil && !headerSafe(tok) {
		err = errors.New("token holds characters a header cannot carry")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if errors.Is(err, fs.ErrNotExist) {
		// The contract sends the header only when the file is readable: a
		// missing file is a monitor without tokens.
		if !c.tokenWarned && c.log != nil {
			c.log.Warn("monitor token file not found; sending without Authorization", "setting", "PADDLE_MONITOR_TOKEN_FILE", "file", c.tokenFile)
		}
		c.tokenWarned = true
		return "", nil
	}
	if err != nil {
		// A FIFO, an endless or oversized file, a token a header cannot
		// carry: sent without the header, the registration would come back
		// 401 and be a dead letter. It is spooled instead, for a start or a
		// drainer whose token file works.
		return "", fmt.Errorf("%w: PADDLE_MONITOR_TOKEN_FILE %s: %w", ErrClientUnusable, c.tokenFile, err)
	}
	if tok != "" && !slices.ContainsFunc(c.tokens, func(r *redactor) bool { return r.token == tok }) {
		c.tokens = append(c.tokens, newRedactor(tok))
	}
	return tok, nil
}

// Redact replaces every token this client has sent, and every long enough
// fragment of one, with "[REDACTED]", and the userinfo of every URL with
// "REDACTED", for text that is logged or stored (an answer that echoes the
// header, an error that quotes the monitor's URL).
func (c *Client) Redact(s string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.tokens {
		s = r.redact(s)
	}
	return sensitive.RedactURLs(s)
}

// snippet cuts a redacted answer to answerSnippet bytes, on a character
// boundary.
func snippet(s string) string {
	if len(s) <= answerSnippet {
		return s
	}
	return strings.ToValidUTF8(s[:answerSnippet], "")
}

// headerSafe reports whether s can be a header value: no control characters.
func headerSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		if b := s[i]; b < 0x20 || b == 0x7f {
			return false
		}
	}
	return true
}

// parseRetryAfter reads a Retry-After header: delay-seconds or an HTTP date.
func parseRetryAfter(h string, now time.Time) (time.Duration, bool) {
	h = strings.TrimSpace(h)
	if h == "" {
		return 0, false
	}
	if secs, err := strconv.ParseUint(h, 10, 64); err == nil || errors.Is(err, strconv.ErrRange) {
		// A number too large for 64 bits still asks for a long wait:
		// capped, not ignored.
		if err != nil || secs > uint64(maxRetryAfter/time.Second) {
			return maxRetryAfter, true
		}
		return time.Duration(secs) * time.Second, true
	}
	if t, err := http.ParseTime(h); err == nil {
		return min(max(t.Sub(now), 0), maxRetryAfter), true
	}
	return 0, false
}
