package monitor

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/access"
	"github.com/paddle-entrypoint/paddle-entrypoint/labels"
	"github.com/paddle-entrypoint/paddle-entrypoint/report"
	"github.com/paddle-entrypoint/paddle-entrypoint/store"
)

// written is the answer to a write that was stored or already there.
type written struct {
	TaskID string `json:"task_id"`
	// Status is "created", "exists" (the same body was stored before),
	// "completed", "pending" (the completion waits for its registration)
	// or "updated" (heartbeat).
	Status string `json:"status"`
}

// writer authenticates a write: 413 and 401 first (the body is read before
// the token is checked, as the order of checks says), then the caller's
// scope.
func (a *API) writer(w http.ResponseWriter, r *http.Request) (body []byte, scope *access.Scope, ok bool) {
	body, ok = a.readBody(w, r)
	if !ok {
		return nil, nil, false
	}
	tok, status, msg := a.authenticate(r)
	if status != 0 {
		a.fail(w, status, msg)
		return nil, nil, false
	}
	return body, scopeOf(tok), true
}

func (a *API) register(w http.ResponseWriter, r *http.Request) {
	body, scope, ok := a.writer(w, r)
	if !ok {
		return
	}
	reg, err := decodeRegistration(body)
	if err != nil {
		a.fail(w, http.StatusBadRequest, err.Error())
		return
	}
	if !scope.Allows(reg.Project, reg.Owner) {
		a.fail(w, http.StatusForbidden, "this token may not register tasks of project "+reg.Project+" with owner "+reg.Owner)
		return
	}
	created, err := a.cfg.Store.Register(r.Context(), reg)
	switch {
	case errors.Is(err, store.ErrConflict):
		a.fail(w, http.StatusConflict, "task "+reg.TaskID+" is already registered with a different body (the first is kept)")
	case err != nil:
		a.storeFailed(w, "register", err)
	case created:
		writeJSON(w, http.StatusCreated, written{reg.TaskID, "created"})
	default:
		writeJSON(w, http.StatusOK, written{reg.TaskID, "exists"})
	}
}

func (a *API) complete(w http.ResponseWriter, r *http.Request) {
	body, scope, ok := a.writer(w, r)
	if !ok {
		return
	}
	c, err := decodeCompletion(body)
	if err != nil {
		a.fail(w, http.StatusBadRequest, err.Error())
		return
	}
	res, err := a.cfg.Store.Complete(r.Context(), c, body, scope)
	switch {
	case errors.Is(err, store.ErrOutOfScope):
		a.fail(w, http.StatusForbidden, "this token may not complete task "+c.TaskID)
	case errors.Is(err, store.ErrConflict):
		a.fail(w, http.StatusConflict, "task "+c.TaskID+" already has a different completion (the first is kept)")
	case err != nil:
		a.storeFailed(w, "complete", err)
	case res == store.Pending:
		writeJSON(w, http.StatusOK, written{c.TaskID, "pending"})
	case res == store.AlreadyCompleted:
		writeJSON(w, http.StatusOK, written{c.TaskID, "exists"})
	default:
		writeJSON(w, http.StatusOK, written{c.TaskID, "completed"})
	}
}

func (a *API) heartbeat(w http.ResponseWriter, r *http.Request) {
	body, scope, ok := a.writer(w, r)
	if !ok {
		return
	}
	hb, err := decodeHeartbeat(body)
	if err != nil {
		a.fail(w, http.StatusBadRequest, err.Error())
		return
	}
	now := a.cfg.Now()
	if hb.Time == nil {
		hb.Sampled.Time = now.Unix()
	} else {
		hb.Sampled.Time = min(*hb.Time, now.Add(HeartbeatSkew).Unix())
	}
	id := hb.Sampled.TaskID
	if len(hb.Sampled.GPUs) > 0 {
		err = a.cfg.Store.HeartbeatSampled(r.Context(), &hb.Sampled, scope)
	} else {
		err = a.cfg.Store.Heartbeat(r.Context(), id, hb.Sampled.Time, scope)
	}
	switch {
	case errors.Is(err, store.ErrNotFound):
		a.fail(w, http.StatusNotFound, "no task "+id)
	case err != nil:
		a.storeFailed(w, "heartbeat", err)
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
		if v := q.Get(p.key); v != "" && !labels.ValidName(v, p.extra) {
			a.fail(w, http.StatusBadRequest, "parameter "+p.key+": "+nameRule(p.extra))
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
			t, err := report.ParseDate(p.key, v)
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
		a.storeFailed(w, "tasks", err)
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
	t, err := a.cfg.Store.Task(r.Context(), id, scope)
	switch {
	case err != nil:
		a.storeFailed(w, "task", err)
	case t == nil:
		a.fail(w, http.StatusNotFound, "no task "+id)
	default:
		writeJSON(w, http.StatusOK, t)
	}
}

func (a *API) healthz(w http.ResponseWriter, r *http.Request) {
	if err := a.cfg.Store.Ping(r.Context()); err != nil {
		a.storeErrs.WithLabelValues("ping").Inc()
		a.cfg.Log.Error("health check: the database does not answer", "err", err)
		a.fail(w, http.StatusServiceUnavailable, "the database does not answer")
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}
