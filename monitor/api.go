// Package monitor is the HTTP API of paddle-monitor: task registration,
// completion and heartbeat from the entrypoints, task listing for people and
// tools, health, and the Prometheus endpoint.
//
// Guarantees:
//   - Every answer is JSON ({"error": "..."} on failure) except /metrics and
//     what other packages mount (the page, CSV).
//   - Checks run in a fixed order, so that no answer tells a caller about
//     tasks it may not see: 404/405, 413, 401, 400, 403, then 409.
//   - Nothing a request sends can change or delete a stored task: writes are
//     idempotent by task_id and the first body stored wins.
//   - With a tokens file, every write and every read of tasks needs a valid
//     token, and sees or touches only the tasks its patterns cover. A task
//     is identified by its task_id within the sender's scope: a task_id
//     that exists only outside it answers as an unused one, so no answer
//     (status, message, timing of a check) tells that it exists.
//   - A write is authenticated before its body is read (401 closes the
//     connection), a body is refused from its Content-Length before it is
//     read (413), and at most MaxInFlight writes are handled at once (503
//     with Retry-After after a 2 s wait for a slot): what unauthenticated
//     clients send cannot grow the server's memory.
package monitor

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/access"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/report"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
)

// MaxBody is the largest request body accepted (413 above).
const MaxBody = 1 << 20

// HeartbeatSkew is how far past the server's clock a heartbeat may move a
// task's last-seen time (containers' clocks drift).
const HeartbeatSkew = 5 * time.Minute

// MaxAhead is how far ahead of the server's clock a start_time or end_time
// may be: beyond, no real clock sent it (400); below, the node's clock is
// skewed and the time is clamped to the server's receipt time.
const MaxAhead = 24 * time.Hour

// DefaultMaxInFlight is the default bound on write requests handled at once.
const DefaultMaxInFlight = 1024

// slotWait is how long a write waits for a slot before 503.
const slotWait = 2 * time.Second

// Store is what the API needs from the database.
type Store interface {
	Register(ctx context.Context, r *wire.Registration, body []byte, from store.Sender) (created bool, err error)
	Complete(ctx context.Context, c *wire.Completion, body []byte, from store.Sender) (store.CompleteResult, error)
	Heartbeat(ctx context.Context, taskID string, at int64, scope *access.Scope) error
	HeartbeatSampled(ctx context.Context, hb *wire.Heartbeat, t int64, scope *access.Scope) error
	Task(ctx context.Context, taskID, project string, scope *access.Scope) (*store.Task, error)
	Tasks(ctx context.Context, f store.Filter, scope *access.Scope) ([]store.Task, string, error)
	Ping(ctx context.Context) error
}

// Config is what New needs.
type Config struct {
	Store Store
	// Tokens returns the tokens in force (nil: no tokens file, everything
	// open). Called at every request, so a reload takes effect at once.
	Tokens func() *access.Set
	// Registry is where the API registers its own metrics and what
	// /metrics exposes.
	Registry *prometheus.Registry
	// MetricsAuth makes /metrics need an admin token.
	MetricsAuth bool
	Log         *slog.Logger
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// MaxInFlight bounds the write requests handled at once
	// (DefaultMaxInFlight when 0).
	MaxInFlight int
	// Prices turn an idle task's GPU-hours into its cost_so_far (nil:
	// null).
	Prices *report.Prices
}

// API is the monitor's HTTP handler.
type API struct {
	cfg       Config
	mux       *http.ServeMux
	requests  *prometheus.CounterVec
	storeErrs *prometheus.CounterVec
	cancelled *prometheus.CounterVec // requests the client cancelled, by operation
	allowed   map[string][]string    // path → methods, for 405's Allow
	slots     chan struct{}          // one per write in flight
	skewed    *hostSet               // hosts whose skewed clock was logged
	metrics   http.Handler           // the Registry's exposition
	tasks     *TaskCollector         // written beside it (ServeTasks), or nil
	gathered  http.Handler           // Registry and tasks gathered, for protobuf
}

// New builds the API with every route of this package mounted.
func New(cfg Config) *API {
	if cfg.Tokens == nil {
		cfg.Tokens = func() *access.Set { return nil }
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = DefaultMaxInFlight
	}
	a := &API{cfg: cfg, mux: http.NewServeMux(), allowed: map[string][]string{},
		slots: make(chan struct{}, cfg.MaxInFlight), skewed: newHostSet(maxSkewedHosts)}
	a.requests = famRequests.counterVec()
	a.storeErrs = famStoreErrors.counterVec()
	// Every operation's series exists from the start (at 0), so that
	// rate() and alerts see the first error.
	a.cancelled = famRequestsCancelled.counterVec()
	for _, op := range []string{"register", "complete", "heartbeat", "task", "tasks", "ping"} {
		a.storeErrs.WithLabelValues(op)
		a.cancelled.WithLabelValues(op)
	}
	if cfg.Registry != nil {
		cfg.Registry.MustRegister(a.requests, a.storeErrs, a.cancelled)
	}

	a.route("POST /v1/task/register", a.writes(a.register))
	a.route("POST /v1/task/complete", a.writes(a.complete))
	a.route("POST /v1/task/heartbeat", a.writes(a.heartbeat))
	a.route("GET /v1/tasks", a.read(a.listTasks))
	a.route("GET /v1/tasks/{task_id}", a.read(a.getTask))
	a.route("GET /healthz", a.healthz)
	if cfg.Registry != nil {
		a.metrics = promhttp.HandlerFor(cfg.Registry, promhttp.HandlerOpts{})
		a.route("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
			if cfg.MetricsAuth {
				tok, status, msg := a.authenticate(r)
				if status == 0 && (tok == nil || !tok.ReadsAll()) {
					status, msg = http.StatusForbidden, "/metrics needs an admin token or a viewer of every project (--metrics-auth)"
				}
				if status != 0 {
					a.fail(w, status, msg)
					return
				}
			}
			a.serveMetrics(w, r)
		})
	}
	// Unknown paths: JSON 404 (the mux's own answer is plain text).
	a.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		a.fail(w, http.StatusNotFound, "no such path: "+r.URL.Path)
	})
	return a
}

// ServeHTTP counts every request by route and status.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
	a.mux.ServeHTTP(rec, r)
	endpoint := r.Pattern
	if endpoint == "" || endpoint == "/" {
		endpoint = "unmatched"
	}
	a.requests.WithLabelValues(endpoint, strconv.Itoa(rec.status)).Inc()
	a.cfg.Log.Debug("request", "method", r.Method, "path", r.URL.Path, "endpoint", endpoint, "status", rec.status,
		"duration", time.Since(start).String(), "remote", r.RemoteAddr)
}

// Handle mounts another handler on the API's mux (the report, the page):
// pattern is a method-and-path pattern ("GET /v1/report"); the handler gets
// the same request counting and the same JSON 405. A handler that reads
// tasks should be wrapped with Read.
func (a *API) Handle(pattern string, h http.HandlerFunc) { a.route(pattern, h) }

// ReadHandler is a handler of a read endpoint: scope is what the caller's
// token may see (nil: everything).
type ReadHandler func(w http.ResponseWriter, r *http.Request, scope *access.Scope)

// Read wraps a read endpoint with the token check (401 without a valid
// token when a tokens file is in force) and passes the caller's scope.
func (a *API) Read(h ReadHandler) http.HandlerFunc { return a.read(h) }

// route mounts h on pattern, and a JSON 405 for the pattern's path with any
// other method (the mux's own 405 is plain text).
func (a *API) route(pattern string, h http.HandlerFunc) {
	a.mux.HandleFunc(pattern, h)
	method, path, _ := strings.Cut(pattern, " ")
	if path == "/" || path == "/{$}" {
		return // the catch-all 404 covers it
	}
	first := len(a.allowed[path]) == 0
	a.allowed[path] = append(a.allowed[path], method)
	if method == http.MethodGet {
		a.allowed[path] = append(a.allowed[path], http.MethodHead)
	}
	if first {
		a.mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			allow := strings.Join(a.allowed[path], ", ")
			w.Header().Set("Allow", allow)
			a.fail(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed on "+path+" (allowed: "+allow+")")
		})
	}
}

func (a *API) read(h ReadHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tok, status, msg := a.authenticate(r)
		if status != 0 {
			a.fail(w, status, msg)
			return
		}
		h(w, r, scopeOf(tok))
	}
}

func scopeOf(tok *access.Token) *access.Scope {
	if tok == nil {
		return nil
	}
	return tok.Scope()
}

// authenticate returns the caller's token (nil with no tokens file: all
// open), or the status and message of a refusal: 401, then 403 for a node
// token (it may send node reports only: nodes.go).
func (a *API) authenticate(r *http.Request) (tok *access.Token, status int, msg string) {
	tok, status, msg = a.authenticateAny(r)
	if status == 0 && tok != nil && tok.IsNode() {
		return nil, http.StatusForbidden, "token " + tok.Name + " is a node token: it may only send node reports (POST /v1/nodes/report)"
	}
	return tok, status, msg
}

// authenticateAny is authenticate for every kind of token.
func (a *API) authenticateAny(r *http.Request) (tok *access.Token, status int, msg string) {
	set := a.cfg.Tokens()
	if set == nil {
		return nil, 0, ""
	}
	secret := ""
	if user, pass, ok := r.BasicAuth(); ok {
		_ = user // any user name: browsers need one
		secret = pass
	} else if h := r.Header.Get("Authorization"); len(h) > 7 && strings.EqualFold(h[:7], "Bearer ") {
		secret = h[7:]
	}
	if secret == "" {
		return nil, http.StatusUnauthorized, "a token is required: Authorization: Bearer <token> (or as the password of HTTP Basic authentication)"
	}
	tok = set.Lookup(secret)
	if tok == nil {
		return nil, http.StatusUnauthorized, "the token is not valid"
	}
	return tok, 0, ""
}

// readBody reads the request body, at most MaxBody bytes: status 413
// beyond (a body without a Content-Length, chunked, is cut there).
func (a *API) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		a.fail(w, http.StatusRequestEntityTooLarge, "the body is over 1 MiB")
		return nil, false
	}
	if err != nil {
		a.fail(w, http.StatusBadRequest, "reading the body: "+err.Error())
		return nil, false
	}
	return b, true
}

// storeFailed answers 500 for a database error, logs it and counts it.
func (a *API) storeFailed(w http.ResponseWriter, r *http.Request, op string, err error) {
	if cancelledByClient(r, err) {
		// The client went away or gave up: not the database's failure,
		// so PaddleMonitorStoreErrors means the database. The answer
		// goes nowhere; it says what happened all the same.
		a.cancelled.WithLabelValues(op).Inc()
		a.cfg.Log.Debug("request cancelled by the client", "operation", op, "err", err)
		a.fail(w, statusClientClosed, "the request was cancelled by the client")
		return
	}
	a.storeErrs.WithLabelValues(op).Inc()
	a.cfg.Log.Error("store error", "operation", op, "err", err)
	a.fail(w, http.StatusInternalServerError, "the database failed; try again")
}

// statusClientClosed is the status logged for a request its client
// cancelled (nginx's 499: no client reads it).
const statusClientClosed = 499

// cancelledByClient reports whether err is r's own context's error
// (context.Canceled when the client closed the connection,
// DeadlineExceeded when its deadline passed). A deadline of the store's
// own is a store error.
func cancelledByClient(r *http.Request, err error) bool {
	done := r.Context().Err()
	return done != nil && errors.Is(err, done)
}

func (a *API) fail(w http.ResponseWriter, status int, msg string) {
	if status == http.StatusUnauthorized {
		// Basic first: it makes a browser ask for the token (as the
		// password) when it opens the page or a CSV link.
		w.Header().Add("WWW-Authenticate", `Basic realm="paddle-monitor", charset="UTF-8"`)
		w.Header().Add("WWW-Authenticate", `Bearer realm="paddle-monitor"`)
	}
	writeJSON(w, status, map[string]string{"error": msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"encoding the answer failed"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }
