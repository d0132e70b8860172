package ledger

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/mountfile"
)

// ErrBadNamespaces classifies every error about a namespace-projects file.
var ErrBadNamespaces = errors.New("bad namespace-projects file")

// NamespaceProjects charges undeclared use to projects by the user's
// Kubernetes namespace (--namespace-projects): {"team-a": "search_default",
// "*": "unassigned"}. An exact namespace beats the longest matching glob
// (ties by the pattern's byte order); globs never match the empty
// namespace. Applied when answering, never stored.
type NamespaceProjects struct {
	exact map[string]string
	globs [][2]string // pattern, project; longest first
}

// ParseNamespaceProjects reads the file's JSON object; a project that is
// empty, or a malformed glob, is an error naming the key.
func ParseNamespaceProjects(b []byte) (*NamespaceProjects, error) {
	var m map[string]string
	d := json.NewDecoder(bytes.NewReader(b))
	if err := d.Decode(&m); err != nil {
		return nil, fmt.Errorf("%w: not a JSON object of namespace globs to projects: %w", ErrBadNamespaces, err)
	}
	n := &NamespaceProjects{exact: map[string]string{}}
	for k, v := range m {
		if strings.TrimSpace(v) == "" {
			return nil, fmt.Errorf("%w: %q: the project is empty", ErrBadNamespaces, k)
		}
		if !strings.ContainsAny(k, `*?[\`) {
			n.exact[k] = v
			continue
		}
		if _, err := path.Match(k, ""); err != nil {
			return nil, fmt.Errorf("%w: %q: not a valid glob: %w", ErrBadNamespaces, k, err)
		}
		n.globs = append(n.globs, [2]string{k, v})
	}
	sort.Slice(n.globs, func(i, j int) bool {
		a, b := n.globs[i][0], n.globs[j][0]
		if len(a) != len(b) {
			return len(a) > len(b)
		}
		return a < b
	})
	return n, nil
}

// LoadNamespaceProjects reads the file at name (a regular file of at most
// mountfile.MaxMonitorFile bytes, opened without blocking: a FIFO or a
// device is refused); errors name the file.
func LoadNamespaceProjects(name string) (*NamespaceProjects, error) {
	b, err := mountfile.ReadAs("--namespace-projects", name, mountfile.MaxMonitorFile)
	if err != nil {
		return nil, err
	}
	n, err := ParseNamespaceProjects(b)
	if err != nil {
		return nil, fmt.Errorf("--namespace-projects %s: %w", name, err)
	}
	return n, nil
}

// Project returns the project namespace's undeclared use is charged to.
func (n *NamespaceProjects) Project(namespace string) (string, bool) {
	if n == nil {
		return "", false
	}
	if p, ok := n.exact[namespace]; ok {
		return p, true
	}
	if namespace == "" {
		return "", false
	}
	for _, g := range n.globs {
		if m, _ := path.Match(g[0], namespace); m {
			return g[1], true
		}
	}
	return "", false
}
