package resourceslices

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"sync"
	"time"
)

// object is the metadata every listed object has.
type object struct {
	Metadata struct {
		Name            string `json:"name"`
		Namespace       string `json:"namespace"`
		ResourceVersion string `json:"resourceVersion"`
	} `json:"metadata"`
}

func (o object) key() string { return o.Metadata.Namespace + "/" + o.Metadata.Name }

// collection keeps one resource's objects by a list and a watch.
type collection struct {
	client   *Client
	path     string // the collection's REST path
	selector string // a field selector, or ""
	// decode turns one object into what is kept (nil: not kept).
	decode func(raw json.RawMessage) (key string, v any, err error)
	failed func(err error)

	mu      sync.Mutex
	objects map[string]any
	synced  bool // a list has succeeded once
}

func (c *collection) query(extra url.Values) string {
	q := url.Values{}
	if c.selector != "" {
		q.Set("fieldSelector", c.selector)
	}
	for k, v := range extra {
		q[k] = v
	}
	return c.path + "?" + q.Encode()
}

// list replaces the objects with the server's list and returns its
// resourceVersion.
func (c *collection) list(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := c.client.request(ctx, c.query(nil))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var l struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
		Items []json.RawMessage `json:"items"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil {
		return "", fmt.Errorf("%s: the list does not decode: %w", c.path, err)
	}
	objs := make(map[string]any, len(l.Items))
	for _, raw := range l.Items {
		k, v, err := c.decode(raw)
		if err != nil {
			return "", fmt.Errorf("%s: %w", c.path, err)
		}
		if v != nil {
			objs[k] = v
		}
	}
	c.mu.Lock()
	c.objects, c.synced = objs, true
	c.mu.Unlock()
	return l.Metadata.ResourceVersion, nil
}

// errGone: the watch's resourceVersion is too old; list again.
var errGone = errors.New("resource version gone")

// watch applies the watch's events from rv until the stream ends, and
// returns the last resourceVersion seen.
func (c *collection) watch(ctx context.Context, rv string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	resp, err := c.client.request(ctx, c.query(url.Values{"watch": {"1"}, "resourceVersion": {rv},
		"allowWatchBookmarks": {"true"}, "timeoutSeconds": {"300"}}))
	if err != nil {
		return rv, err
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	for {
		var ev struct {
			Type   string          `json:"type"`
			Object json.RawMessage `json:"object"`
		}
		if err := dec.Decode(&ev); err != nil {
			if errors.Is(err, io.EOF) {
				return rv, nil // the server's end of the watch (timeoutSeconds)
			}
			if ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return rv, nil // our own end of a long watch
			}
			return rv, fmt.Errorf("%s: the watch ended: %w", c.path, err)
		}
		var o object
		if err := json.Unmarshal(ev.Object, &o); err != nil {
			return rv, fmt.Errorf("%s: a watch event does not decode: %w", c.path, err)
		}
		switch ev.Type {
		case "ERROR":
			var st struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			}
			json.Unmarshal(ev.Object, &st)
			if st.Code == 410 {
				return rv, errGone
			}
			return rv, fmt.Errorf("%s: watch error %d %s", c.path, st.Code, st.Message)
		case "BOOKMARK":
		case "DELETED":
			c.mu.Lock()
			delete(c.objects, o.key())
			c.mu.Unlock()
		case "ADDED", "MODIFIED":
			k, v, err := c.decode(ev.Object)
			if err != nil {
				return rv, fmt.Errorf("%s: %w", c.path, err)
			}
			c.mu.Lock()
			if v == nil {
				delete(c.objects, k)
			} else {
				c.objects[k] = v
			}
			c.mu.Unlock()
		}
		if o.Metadata.ResourceVersion != "" {
			rv = o.Metadata.ResourceVersion
		}
	}
}

// run lists and watches until ctx ends; a failure keeps the objects
// already known, is reported to failed and retried with backoff (1 s
// doubling to 30 s).
func (c *collection) run(ctx context.Context) {
	backoff := time.Second
	rv := ""
	for ctx.Err() == nil {
		var err error
		if rv == "" {
			rv, err = c.list(ctx)
		}
		if err == nil {
			rv, err = c.watch(ctx, rv)
			if err == nil {
				backoff = time.Second
				continue
			}
			if errors.Is(err, errGone) {
				rv = ""
				continue
			}
		}
		if ctx.Err() != nil {
			return
		}
		rv = "" // list again: events may have been missed
		if c.failed != nil {
			c.failed(err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

// get returns the object kept under key.
func (c *collection) get(key string) (any, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.objects[key]
	return v, ok
}

func (c *collection) isSynced() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.synced
}

func (c *collection) each(f func(v any)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, v := range c.objects {
		f(v)
	}
}
