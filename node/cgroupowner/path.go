package cgroupowner

import (
	"strings"

	"github.com/prometheus/procfs"
)

// Depths is, per hierarchy, how many "/.." components lead from the
// agent's cgroup namespace root to the host's root: "" keys the v2
// hierarchy, a controller name ("pids", "memory", "name=systemd") a v1
// one. Missing: 0 (no namespace).
type Depths map[string]int

// keys names the hierarchy of a /proc/PID/cgroup line.
func keys(c procfs.Cgroup) []string {
	if c.HierarchyID == 0 && len(c.Controllers) == 0 {
		return []string{""}
	}
	return c.Controllers
}

// dotdots splits a path seen from a cgroup namespace into its leading
// "/.." components and the rest ("/" when nothing is left).
func dotdots(p string) (int, string) {
	k := 0
	for {
		rest, ok := strings.CutPrefix(p, "/..")
		if !ok || rest != "" && rest[0] != '/' {
			break
		}
		p = rest
		k++
	}
	if p == "" {
		p = "/"
	}
	return k, p
}

// resolve turns a path seen from the agent's namespace into the host's
// path: a path climbs to the host's root exactly when it has as many
// "/.." components as the namespace root is deep. Any other path lies
// inside the agent's own namespace (or names no place at all), whose place
// on the host the agent cannot name: it does not resolve.
func resolve(p string, depth int) (string, bool) {
	k, rest := dotdots(p)
	if k != depth {
		return p, false
	}
	return rest, true
}

// Own is the agent's own cgroup path per hierarchy (keyed as Depths), as
// it reads it: a process in the agent's own group of a v1 hierarchy is,
// there, where the agent is — "/" when the agent has a namespace of its
// own — and such a line never disagrees, as "/" never does.
type Own map[string]string

// line is one hierarchy's path, as read and resolved.
type line struct {
	raw, path string
	ok        bool
}

// Path picks the cgroup path that tells the owner, resolved to the host's
// root with d. ok false: the process is a host user keyed by the path
// returned, whatever it names — a path that does not resolve, or v1 lines
// that disagree. The rule (hybrid nodes included): the v2 line's path when
// it names a container or a Slurm job; else the v1 lines of pids, memory
// and name=systemd that are not "/" (nor the agent's own group, own) must
// name one owner, and their path is used; else the v2 line's path when it
// is not "/", else "/".
func (t Table) Path(cgs []procfs.Cgroup, d Depths, own Own) (string, bool) {
	get := func(c procfs.Cgroup, key string) line {
		p, ok := resolve(c.Path, d[key])
		return line{raw: c.Path, path: p, ok: ok}
	}
	var v2 *line
	for _, c := range cgs {
		if c.HierarchyID == 0 && len(c.Controllers) == 0 {
			l := get(c, "")
			v2 = &l
		}
	}
	if v2 != nil && !v2.ok {
		return v2.raw, false
	}
	if v2 != nil && v2.path != "/" && t.Classify(v2.path).Kind != KindHost {
		return v2.path, true
	}
	var v1 []line
	for _, want := range []string{"pids", "memory", "name=systemd"} {
		for _, c := range cgs {
			if c.HierarchyID == 0 || !has(c.Controllers, want) {
				continue
			}
			if o, ok := own[want]; ok && c.Path == o {
				continue // where the agent itself is: never disagrees
			}
			l := get(c, want)
			if !l.ok {
				return l.raw, false
			}
			if l.path != "/" {
				v1 = append(v1, l)
			}
		}
	}
	host := "/"
	if v2 != nil {
		host = v2.path
	}
	if len(v1) == 0 {
		return host, true
	}
	first := t.Classify(v1[0].path)
	for _, l := range v1[1:] {
		if t.Classify(l.path) != first {
			// Lines that disagree: no line is believed over another.
			if host == "/" {
				host = v1[0].path
			}
			return host, false
		}
	}
	if first.Kind == KindHost && host != "/" {
		return host, true
	}
	return v1[0].path, true
}

func has(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
