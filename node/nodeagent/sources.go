package nodeagent

import (
	"context"
	"errors"
	"github.com/paddle-entrypoint/paddle-entrypoint/node/dockerapi"
	"github.com/paddle-entrypoint/paddle-entrypoint/node/podresources"
	"os"
	"time"
)

// sourceTimeout bounds one call to an allocation source.
const sourceTimeout = 2 * time.Second

// maxReuse is how many samples a failed source's previous answer stands in.
const maxReuse = 3

// cachedSource reuses a source's previous answer for up to maxReuse
// samples after a failed call, counting the failures.
type cachedSource struct {
	src      Source
	last     Snapshot
	have     bool
	reused   int
	failures func()
	logged   bool
	agent    *agent
}

func (c *cachedSource) snapshot(ctx context.Context) Snapshot {
	ctx, cancel := context.WithTimeout(ctx, sourceTimeout)
	defer cancel()
	s, err := c.src.Snapshot(ctx)
	if err == nil {
		c.last, c.have, c.reused, c.logged = s, true, 0, false
		return s
	}
	name := c.src.Name()
	if errors.Is(err, podresources.ErrCRI) {
		name = "cri"
	}
	c.agent.metrics.sourceFailures.WithLabelValues(name).Inc()
	if !c.logged {
		c.agent.log.Warn("allocation source failed", "source", c.src.Name(), "error", err)
		c.logged = true
	}
	if c.have && c.reused < maxReuse {
		c.reused++
		return c.last
	}
	return Snapshot{}
}

// allocationSources are the kubelet with CRI where their sockets exist,
// and a Docker-compatible API where its socket exists.
func (a *agent) allocationSources() []*cachedSource {
	var out []*cachedSource
	add := func(s Source) { out = append(out, &cachedSource{src: s, agent: a}) }
	_, errPR := os.Stat(a.cfg.PodResourcesSocket)
	_, errCRI := os.Stat(a.cfg.CRISocket)
	if a.cfg.CRISocket == "" {
		errCRI = os.ErrNotExist
	}
	if errPR != nil && errCRI != nil {
		a.log.Info("not on Kubernetes: no pod-resources or CRI socket", "pod_resources_socket", a.cfg.PodResourcesSocket, "cri_socket", a.cfg.CRISocket)
	} else {
		add(a.withGrants(newKubelet(a.cfg.PodResourcesSocket, a.cfg.CRISocket)))
	}
	if a.cfg.DockerSocket != "" {
		if _, err := os.Stat(a.cfg.DockerSocket); err == nil {
			add(newDocker(a.cfg.DockerSocket))
		}
	}
	return out
}

func newKubelet(podResources, cri string) Source { return podresources.New(podResources, cri) }

func newDocker(socket string) Source { return dockerapi.New(socket) }
