package report

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/mountfile"
)

// names maps names (models, projects) to values, as the prices and the
// budgets files key them: a name without glob characters is exact and
// wins; otherwise the longest glob (path.Match) that matches, ties in byte
// order.
type names[V any] struct {
	exact map[string]V
	globs []namedGlob[V] // longest pattern first, then in byte order
}

type namedGlob[V any] struct {
	pattern string
	value   V
}

// add keys v by name; the error is path.Match's for a malformed glob.
func (n *names[V]) add(name string, v V) error {
	if !strings.ContainsAny(name, `*?[\`) {
		if n.exact == nil {
			n.exact = map[string]V{}
		}
		n.exact[name] = v
		return nil
	}
	if _, err := path.Match(name, ""); err != nil {
		return err
	}
	g := namedGlob[V]{name, v}
	i, _ := slices.BinarySearchFunc(n.globs, g, func(a, b namedGlob[V]) int {
		return cmp.Or(cmp.Compare(len(b.pattern), len(a.pattern)), cmp.Compare(a.pattern, b.pattern))
	})
	n.globs = slices.Insert(n.globs, i, g)
	return nil
}

// lookup returns the value of name: the exact one, else the first glob's
// that matches.
func (n *names[V]) lookup(name string) (v V, ok bool) {
	if v, ok := n.exact[name]; ok {
		return v, true
	}
	for _, g := range n.globs {
		if m, _ := path.Match(g.pattern, name); m {
			return g.value, true
		}
	}
	return v, false
}

// all lists every value, the exact names' and the globs'.
func (n *names[V]) all() []V {
	out := make([]V, 0, len(n.exact)+len(n.globs))
	for _, v := range n.exact {
		out = append(out, v)
	}
	for _, g := range n.globs {
		out = append(out, g.value)
	}
	return out
}

// decodeFile decodes one JSON value of a prices or budgets file into v:
// unknown fields and a second value are errors, classified by bad.
func decodeFile(r io.Reader, v any, bad error) error {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %w", bad, err)
	}
	if dec.More() {
		return fmt.Errorf("%w: more than one JSON value", bad)
	}
	return nil
}

// loadFile reads the file at name (a regular file of at most
// mountfile.MaxMonitorFile bytes, opened without blocking) and parses it;
// errors name what (a "prices file") and the file.
func loadFile[T any](what, name string, parse func(io.Reader) (T, error)) (T, error) {
	var zero T
	raw, err := mountfile.ReadAs(what, name, mountfile.MaxMonitorFile)
	if err != nil {
		return zero, err
	}
	v, err := parse(bytes.NewReader(raw))
	if err != nil {
		return zero, fmt.Errorf("%s %s: %w", what, name, err)
	}
	return v, nil
}
