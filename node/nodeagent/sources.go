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

	// cri: the source is the kubelet with a CRI socket; criOK says
	// whether CRI answered its last call, and criContainers is that
	// answer (the running containers), for the CRI check of kubepods paths.
	cri           bool
	criOK         bool
	criContainers []Container
}

func (c *cachedSource) snapshot(ctx context.Context) Snapshot {
	ctx, cancel := context.WithTimeout(ctx, sourceTimeout)
	defer cancel()
	s, err := c.src.Snapshot(ctx)
	if c.cri {
		c.criOK = !errors.Is(err, podresources.ErrCRI)
		c.criContainers = nil
		if c.criOK {
			c.criContainers = s.Containers
		}
	}
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
	add := func(s Source) *cachedSource {
		c := &cachedSource{src: s, agent: a}
		out = append(out, c)
		return c
	}
	_, errPR := os.Stat(a.cfg.PodResourcesSocket)
	_, errCRI := os.Stat(a.cfg.CRISocket)
	if a.cfg.CRISocket == "" {
		errCRI = os.ErrNotExist
	}
	if errPR != nil && errCRI != nil {
		a.log.Info("not on Kubernetes: no pod-resources or CRI socket", "pod_resources_socket", a.cfg.PodResourcesSocket, "cri_socket", a.cfg.CRISocket)
	} else {
		add(a.withGrants(newKubelet(a.cfg.PodResourcesSocket, a.cfg.CRISocket))).cri = a.cfg.CRISocket != ""
	}
	if a.cfg.DockerSocket != "" {
		if _, err := os.Stat(a.cfg.DockerSocket); err == nil {
			add(newDocker(a.cfg.DockerSocket))
		}
	}
	return out
}

// criSource is the kubelet source whose CRI answers check kubepods paths,
// nil when there is none (not on Kubernetes, or no CRI socket).
func (a *agent) criSource() *cachedSource {
	for _, s := range a.sources {
		if s.cri {
			return s
		}
	}
	return nil
}

// criCheck says how this sample's kubepods paths are checked (docs/node.md,
// "Who owns each process"): against CRI's answer when it came; while CRI fails, trusted for
// at most maxReuse samples in a row (counted), then not at all.
func (a *agent) criCheck() criView {
	s := a.criSource()
	if s == nil {
		return criView{mode: criNone}
	}
	if s.criOK {
		a.criFailing = 0
		pods := make(map[string]string, len(s.criContainers))
		for _, c := range s.criContainers {
			if c.ID != "" {
				pods[c.ID] = c.PodUID
			}
		}
		return criView{mode: criVerify, pods: pods}
	}
	a.criFailing++
	if a.criFailing <= maxReuse {
		a.metrics.criUnverified.Inc()
		return criView{mode: criTrust}
	}
	return criView{mode: criDistrust}
}

func newKubelet(podResources, cri string) Source { return podresources.New(podResources, cri) }

func newDocker(socket string) Source { return dockerapi.New(socket) }
