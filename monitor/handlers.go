package monitor

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/access"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
)

// written is the answer to a write that was stored or already there.
type written struct {
	TaskID string `json:"task_id"`
	// Status is "created", "exists" (the same body was stored before),
	// "completed", "pending" (the completion waits for its registration)
	// or "updated" (heartbeat).
	Status string `json:"status"`
}

// slot waits for one of MaxInFlight write slots, at most slotWait: false
// when none came free (answered 503 with Retry-After: 1, the connection
// closed) or the client is gone. The caller frees a slot it got with
// <-a.slots.
func (a *API) slot(w http.ResponseWriter, r *http.Request) bool {
	timer := time.NewTimer(slotWait)
	defer timer.Stop()
	select {
	case a.slots <- struct{}{}:
		return true
	case <-timer.C:
		w.Header().Set("Retry-After", "1")
		a.failAndClose(w, http.StatusServiceUnavailable, fmt.Sprintf("more than %d writes in flight (--max-in-flight); retry later", cap(a.slots)))
		return false
	case <-r.Context().Done():
		return false // the client is gone
	}
}

// writer admits a write. 413 from the Content-Length and 401 come before
// a byte of the body is read, and close the connection (what the client
// still sends is never read); then the write waits for one of MaxInFlight
// slots (503 with Retry-After after slotWait); then the body is read, cut
// at MaxBody. release frees the slot; the caller must call it when ok.
// Handlers get it through writes.
func (a *API) writer(w http.ResponseWriter, r *http.Request) (body []byte, from store.Sender, release func(), ok bool) {
	if r.ContentLength > MaxBody {
		a.failAndClose(w, http.StatusRequestEntityTooLarge, "the body is over 1 MiB")
		return nil, from, nil, false
	}
	tok, status, msg := a.authenticate(r)
	if status == 0 && tok != nil && tok.IsViewer() {
		status, msg = http.StatusForbidden, viewerWrites(tok)
	}
	if status != 0 {
		a.failAndClose(w, status, msg)
		return nil, from, nil, false
	}
	if !a.slot(w, r) {
		return nil, from, nil, false
	}
	release = func() { <-a.slots }
	if body, ok = a.readBody(w, r); !ok {
		release()
		return nil, from, nil, false
	}
	from.Scope = scopeOf(tok)
	if tok != nil {
		from.Token, from.Unbounded = tok.Name, tok.Admin
	}
	return body, from, release, true
}

// writes is the handler of a write: h runs with the body and its sender
// once writer admitted it, holding the write's slot until it returns.
func (a *API) writes(h func(w http.ResponseWriter, r *http.Request, body []byte, from store.Sender)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, from, release, ok := a.writer(w, r)
		if !ok {
			return
		}
		defer release()
		h(w, r, body, from)
	}
}

// viewerWrites is the 403 of a read-only token's write.
func viewerWrites(tok *access.Token) string {
	return "token " + tok.Name + " is a viewer (read-only): it may not write"
}

// failAndClose answers a write refused before its body was read, and closes
// the connection: net/http would otherwise read up to 256 KiB of the unread
// body to keep the connection, waiting for a client that may never send
// it. The answer is flushed, the write side shut (the client reads the
// answer, then EOF), and the connection closed a moment later, so that
// what the client still sends never reaches this process.
func (a *API) failAndClose(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Connection", "close")
	a.fail(w, status, msg)
	rc := http.NewResponseController(w)
	if rc.Flush() != nil {
		return
	}
	conn, _, err := rc.Hijack()
	if err != nil {
		return // not HTTP/1 (Connection: close still ends it)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.CloseWrite()
	}
	time.AfterFunc(closeLinger, func() { conn.Close() })
}

// closeLinger is how long a refused connection stays half open, so that
// closing it with unread data (which resets it) does not destroy the
// answer before the client has read it.
const closeLinger = 500 * time.Millisecond

// ahead applies the bound on times ahead of the server's clock to the
// field's value t: more than MaxAhead is a 400; less is clamped to the
// receipt time (a skewed node), logged once per host (the body's hostname,
// else the remote address).
func (a *API) ahead(r *http.Request, host, field string, t *int64, now time.Time) error {
	switch {
	case *t > now.Add(MaxAhead).Unix():
		return &wire.FieldError{Path: field, Rule: fmt.Sprintf("%d is more than 24 hours ahead of the server's clock (%d)", *t, now.Unix())}
	case *t > now.Unix():
		if host == "" {
			host, _, _ = net.SplitHostPort(r.RemoteAddr)
		}
		if a.skewed.add(host) {
			a.cfg.Log.Warn("a time ahead of the server's clock was clamped to the receipt time (the node's clock is skewed; logged once per host)",
				"host", host, "field", field, "sent", *t, "clamped_to", now.Unix(), "ahead_seconds", *t-now.Unix())
		}
		*t = now.Unix()
	}
	return nil
}

func (a *API) register(w http.ResponseWriter, r *http.Request, body []byte, from store.Sender) {
	now := a.cfg.Now()
	reg, err := wire.DecodeRegistration(body)
	if err == nil {
		a.logMIGShares(reg)
		if reg.StartTime != nil { // required: DecodeRegistration refuses a body without
			err = a.ahead(r, reg.Hostname, "start_time", reg.StartTime, now)
		}
	}
	if err != nil {
		a.fail(w, http.StatusBadRequest, err.Error())
		return
	}
	if !from.Scope.Allows(reg.Project, reg.Owner) {
		a.fail(w, http.StatusForbidden, "this token may not register tasks of project "+reg.Project+" with owner "+reg.Owner)
		return
	}
	created, err := a.cfg.Store.Register(r.Context(), reg, body, from)
	switch {
	case errors.Is(err, store.ErrConflict):
		a.fail(w, http.StatusConflict, "task "+reg.TaskID+" is already registered with a different body (the first is kept)")
	case errors.Is(err, store.ErrTooManyOpen):
		// A place frees when a task completes or leaves --open-ttl: the
		// entrypoint's spool retries later (past its start's budget).
		w.Header().Set("Retry-After", "60")
		a.fail(w, http.StatusTooManyRequests, tooManyOpen(from, err))
	case err != nil:
		a.storeFailed(w, r, "register", err)
	case created:
		writeJSON(w, http.StatusCreated, written{reg.TaskID, "created"})
	default:
		writeJSON(w, http.StatusOK, written{reg.TaskID, "exists"})
	}
}

// logMIGShares logs each MIG entry whose share differs from its slices /
// total_slices, which is what the store keeps (docs/monitor.md): the
// registration is not refused for it.
func (a *API) logMIGShares(sent *wire.Registration) {
	for i, g := range sent.GPUs {
		if g.MIG == nil || g.Share == nil || math.Abs(*g.Share-g.MIG.Share()) <= 1e-9 {
			continue
		}
		a.cfg.Log.Warn("registration: a MIG entry's share is not its slices / total_slices; slices / total_slices is stored",
			"task_id", sent.TaskID, "project", sent.Project, "owner", sent.Owner, "gpu", i,
			"share", *g.Share, "stored_share", g.MIG.Share(), "profile", g.MIG.Profile)
	}
}

func tooManyOpen(from store.Sender, err error) string {
	who := "the monitor (no tokens file: one bound for all)"
	if from.Token != "" {
		who = "token " + from.Token
	}
	detail := err.Error()
	if tm, ok := errors.AsType[*store.TooManyOpenError](err); ok {
		detail = tm.Detail()
	}
	return who + " has reached its bound of open tasks (--max-open-per-token; " + detail +
		"): complete some, or wait until those not seen for --open-ttl no longer count"
}

func (a *API) complete(w http.ResponseWriter, r *http.Request, body []byte, from store.Sender) {
	now := a.cfg.Now()
	c, err := wire.DecodeCompletion(body)
	if err == nil {
		err = a.completionTimes(r, c, now)
	}
	if err != nil {
		a.fail(w, http.StatusBadRequest, err.Error())
		return
	}
	res, err := a.cfg.Store.Complete(r.Context(), c, body, from)
	var bad *store.BadCompletionError
	switch {
	case errors.As(err, &bad):
		a.fail(w, http.StatusBadRequest, bad.Error())
	case errors.Is(err, store.ErrStartMismatch):
		a.fail(w, http.StatusConflict, "several tasks "+c.TaskID+" are registered and none has this completion's start_time")
	case errors.Is(err, store.ErrConflict):
		a.fail(w, http.StatusConflict, "task "+c.TaskID+" already has a different completion (the first is kept)")
	case errors.Is(err, store.ErrTooManyOpen):
		// A place frees when a task completes or leaves --open-ttl: the
		// entrypoint's spool retries later (past its start's budget).
		w.Header().Set("Retry-After", "60")
		a.fail(w, http.StatusTooManyRequests, tooManyOpen(from, err))
	case err != nil:
		a.storeFailed(w, r, "complete", err)
	case res == store.Pending:
		writeJSON(w, http.StatusOK, written{c.TaskID, "pending"})
	case res == store.AlreadyCompleted:
		writeJSON(w, http.StatusOK, written{c.TaskID, "exists"})
	default:
		writeJSON(w, http.StatusOK, written{c.TaskID, "completed"})
	}
}

// completionTimes applies the bounds of a completion's own times: end_time
// and start_time not more than 24 hours ahead (clamped when less), the end
// not before the start nor later than start + duration + 1 h. The checks
// against the registered start run in the store.
func (a *API) completionTimes(r *http.Request, c *wire.Completion, now time.Time) error {
	// end_time and duration_seconds are required (wire.DecodeCompletion).
	if err := a.ahead(r, "", "end_time", c.EndTime, now); err != nil {
		return err
	}
	if c.StartTime == nil {
		return nil
	}
	if err := a.ahead(r, "", "start_time", c.StartTime, now); err != nil {
		return err
	}
	if *c.EndTime < *c.StartTime {
		return &wire.FieldError{Path: "end_time", Rule: fmt.Sprintf("%d is before start_time %d", *c.EndTime, *c.StartTime)}
	}
	if float64(*c.EndTime) > float64(*c.StartTime)+*c.DurationSeconds+3600 {
		return &wire.FieldError{Path: "end_time", Rule: fmt.Sprintf("%d is later than start_time %d + duration_seconds %g + 1h",
			*c.EndTime, *c.StartTime, *c.DurationSeconds)}
	}
	return nil
}

func (a *API) heartbeat(w http.ResponseWriter, r *http.Request, body []byte, from store.Sender) {
	hb, err := wire.DecodeHeartbeat(body)
	if err != nil {
		a.fail(w, http.StatusBadRequest, err.Error())
		return
	}
	now := a.cfg.Now()
	t := now.Unix() // a heartbeat without a time: the server's clock counts
	if hb.Time != nil {
		t = min(*hb.Time, now.Add(HeartbeatSkew).Unix())
	}
	id := hb.TaskID
	if len(hb.GPUs) > 0 {
		err = a.cfg.Store.HeartbeatSampled(r.Context(), hb, t, from.Scope)
	} else {
		err = a.cfg.Store.Heartbeat(r.Context(), id, t, from.Scope)
	}
	switch {
	case errors.Is(err, store.ErrNotFound):
		a.fail(w, http.StatusNotFound, "no task "+id)
	case err != nil:
		a.storeFailed(w, r, "heartbeat", err)
	default:
		writeJSON(w, http.StatusOK, written{id, "updated"})
	}
}

// taskList is the answer of GET /v1/tasks.
type taskList struct {
	Tasks []store.Task `json:"tasks"`
	// NextCursor continues the listing; null after the last page.
	NextCursor *string `json:"next_cursor"`
}

func (a *API) listTasks(w http.ResponseWriter, r *http.Request, scope *access.Scope) {
	q := r.URL.Query()
	f := store.Filter{Project: q.Get("project"), Owner: q.Get("owner"), Pipeline: q.Get("pipeline"),
		State: q.Get("state"), Cursor: q.Get("cursor")}
	for _, p := range []struct{ key, extra string }{{"project", ""}, {"owner", "@+"}, {"pipeline", ""}} {
		if v := q.Get(p.key); v != "" && !wire.ValidName(v, p.extra) {
			a.fail(w, http.StatusBadRequest, "parameter "+p.key+": "+wire.NameRule(p.extra))
			return
		}
	}
	switch f.State {
	case "", "running", "completed", "failed", "idle":
	default:
		a.fail(w, http.StatusBadRequest, "parameter state: must be running, completed, failed or idle")
		return
	}
	if v, set := q["idle_for"]; set && f.State != "idle" {
		a.fail(w, http.StatusBadRequest, "parameter idle_for: only with state=idle")
		return
	} else if f.State == "idle" {
		idleFor := DefaultIdleFor
		if len(v) > 0 {
			d, err := time.ParseDuration(v[0])
			if err != nil || d < 0 {
				a.fail(w, http.StatusBadRequest, fmt.Sprintf("parameter idle_for: %q is not a Go duration of at least 0 (such as 30m or 2h)", v[0]))
				return
			}
			idleFor = d
		}
		f.IdleFor = int64(idleFor / time.Second)
	}
	for _, p := range []struct {
		key string
		dst **int64
	}{{"from", &f.From}, {"to", &f.To}} {
		if v := q.Get(p.key); v != "" {
			t, err := facts.ParseDate(p.key, v)
			if err != nil {
				a.fail(w, http.StatusBadRequest, badParameter(err))
				return
			}
			u := t.Unix()
			*p.dst = &u
		}
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > store.MaxLimit {
			a.fail(w, http.StatusBadRequest, "parameter limit: must be an integer from 1 to "+strconv.Itoa(store.MaxLimit))
			return
		}
		f.Limit = n
	}
	tasks, next, err := a.cfg.Store.Tasks(r.Context(), f, scope)
	switch {
	case errors.Is(err, store.ErrBadCursor):
		a.fail(w, http.StatusBadRequest, "parameter cursor: not a cursor this server gave (next_cursor)")
		return
	case err != nil:
		a.storeFailed(w, r, "tasks", err)
		return
	}
	var cursor *string
	if next != "" {
		cursor = &next
	}
	if f.State == "idle" {
		writeJSON(w, http.StatusOK, idleList{Tasks: idleTasks(tasks, a.cfg.Prices), NextCursor: cursor})
		return
	}
	writeJSON(w, http.StatusOK, taskList{Tasks: tasks, NextCursor: cursor})
}

func (a *API) getTask(w http.ResponseWriter, r *http.Request, scope *access.Scope) {
	id := r.PathValue("task_id")
	project := r.URL.Query().Get("project")
	if project != "" && !wire.ValidName(project, "") {
		a.fail(w, http.StatusBadRequest, "parameter project: "+wire.NameRule(""))
		return
	}
	t, err := a.cfg.Store.Task(r.Context(), id, project, scope)
	switch {
	case err != nil:
		a.storeFailed(w, r, "task", err)
	case t == nil:
		a.fail(w, http.StatusNotFound, "no task "+id)
	default:
		writeJSON(w, http.StatusOK, t)
	}
}

func (a *API) healthz(w http.ResponseWriter, r *http.Request) {
	if err := a.cfg.Store.Ping(r.Context()); err != nil {
		if cancelledByClient(r, err) {
			a.cancelled.WithLabelValues("ping").Inc()
			a.cfg.Log.Debug("health check cancelled by the client", "err", err)
			return
		}
		a.storeErrs.WithLabelValues("ping").Inc()
		a.cfg.Log.Error("health check: the database does not answer", "err", err)
		a.fail(w, http.StatusServiceUnavailable, "the database does not answer")
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// maxSkewedHosts bounds the hosts remembered as logged for a skewed clock.
const maxSkewedHosts = 4096

// hostSet remembers up to max hosts; when full it starts over (a host may
// then be logged again: the log never misses a skewed clock, and memory
// stays bounded).
type hostSet struct {
	mu    sync.Mutex
	max   int
	hosts map[string]struct{}
}

func newHostSet(max int) *hostSet { return &hostSet{max: max, hosts: map[string]struct{}{}} }

// add reports whether host is new.
func (h *hostSet) add(host string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.hosts[host]; ok {
		return false
	}
	if len(h.hosts) >= h.max {
		clear(h.hosts)
	}
	h.hosts[host] = struct{}{}
	return true
}
