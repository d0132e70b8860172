// Package dockerapi asks a Docker-compatible runtime API (Docker, or
// podman's compatible socket) over its unix socket which running
// containers were given which GPUs, as dcgm-exporter does on hosts without
// Kubernetes.
//
// Guarantees: a container's GPUs are its HostConfig.DeviceRequests of the
// NVIDIA driver or the "gpu" capability (explicit device IDs; a count of
// -1 is every GPU, a count N the first N), and, failing those, its
// NVIDIA_VISIBLE_DEVICES ("all", UUIDs, MIG UUIDs or indexes; "none",
// "void" and empty: none). Every call ends by its context's deadline.
package dockerapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/paddle-entrypoint/paddle-entrypoint/node/allocation"
)

// maxAnswer bounds what one answer may hold.
const maxAnswer = 8 << 20

// API is a Docker-compatible API on a unix socket.
type API struct {
	socket string
	http   *http.Client

	mu      sync.Mutex
	runtime string
}

// New returns a source for the socket.
func New(socket string) *API {
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}}
	return &API{socket: socket, http: &http.Client{Transport: tr}}
}

// Name names the source.
func (a *API) Name() string { return "docker" }

// Close closes idle connections.
func (a *API) Close() error {
	a.http.CloseIdleConnections()
	return nil
}

func (a *API) get(ctx context.Context, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://docker"+path, nil)
	if err != nil {
		return err
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", a.socket, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: answered %d", a.socket, path, resp.StatusCode)
	}
	return json.NewDecoder(io.LimitReader(resp.Body, maxAnswer)).Decode(v)
}

type summary struct {
	ID string `json:"Id"`
}

type inspect struct {
	ID     string `json:"Id"`
	Name   string `json:"Name"`
	State  struct{ Running bool }
	Config struct {
		Env []string
	}
	HostConfig struct {
		DeviceRequests []struct {
			Driver       string
			Count        int
			DeviceIDs    []string
			Capabilities [][]string
		}
	}
}

// Snapshot lists the running containers and their GPUs.
func (a *API) Snapshot(ctx context.Context) (allocation.Snapshot, error) {
	var snap allocation.Snapshot
	rt := a.runtimeName(ctx)
	var list []summary
	if err := a.get(ctx, "/containers/json", &list); err != nil {
		return snap, err
	}
	for _, s := range list {
		var c inspect
		if err := a.get(ctx, "/containers/"+url.PathEscape(s.ID)+"/json", &c); err != nil {
			return snap, err
		}
		if !c.State.Running {
			continue
		}
		ctr := allocation.Container{ID: c.ID, Runtime: rt, Name: strings.TrimPrefix(c.Name, "/")}
		snap.Containers = append(snap.Containers, ctr)
		if devs := devices(c); len(devs) > 0 {
			snap.Allocations = append(snap.Allocations, allocation.Allocation{Container: ctr, Devices: devs})
		}
	}
	return snap, nil
}

// runtimeName is "podman" for podman's compatible API, else "docker".
func (a *API) runtimeName(ctx context.Context) string {
	a.mu.Lock()
	rt := a.runtime
	a.mu.Unlock()
	if rt != "" {
		return rt
	}
	var v struct {
		Components []struct{ Name string }
	}
	rt = "docker"
	if err := a.get(ctx, "/version", &v); err != nil {
		return rt
	}
	if slices.ContainsFunc(v.Components, func(c struct{ Name string }) bool { return strings.Contains(strings.ToLower(c.Name), "podman") }) {
		rt = "podman"
	}
	a.mu.Lock()
	a.runtime = rt
	a.mu.Unlock()
	return rt
}

// devices is a container's GPUs (see the package comment).
func devices(c inspect) []string {
	var out []string
	for _, r := range c.HostConfig.DeviceRequests {
		gpu := r.Driver == "nvidia"
		for _, caps := range r.Capabilities {
			if slices.Contains(caps, "gpu") {
				gpu = true
			}
		}
		if !gpu {
			continue
		}
		switch {
		case len(r.DeviceIDs) > 0:
			out = append(out, r.DeviceIDs...)
		case r.Count < 0:
			out = append(out, "all")
		default:
			for i := range r.Count {
				out = append(out, strconv.Itoa(i))
			}
		}
	}
	if len(out) > 0 {
		return out
	}
	for _, kv := range c.Config.Env {
		v, ok := strings.CutPrefix(kv, "NVIDIA_VISIBLE_DEVICES=")
		if !ok {
			continue
		}
		switch v = strings.TrimSpace(v); v {
		case "", "none", "void":
			return nil
		}
		for _, d := range strings.Split(v, ",") {
			if d = strings.TrimSpace(d); d != "" {
				out = append(out, d)
			}
		}
	}
	return out
}
