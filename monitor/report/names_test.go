package report

import (
	"errors"
	"path"
	"testing"
)

// names: an exact name beats every glob, the longest matching glob beats
// shorter ones, equal lengths go in byte order, whatever the order of
// adding; a malformed glob is path.ErrBadPattern.
func TestNamesLookup(t *testing.T) {
	var n names[string]
	for _, kv := range [][2]string{{"a*", "short"}, {"ab*c", "long"}, {"a?*", "a?*"}, {"a*?", "a*?"}, {"abc", "exact"}} {
		if err := n.add(kv[0], kv[1]); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ name, want string }{
		{"abc", "exact"}, // exact, though ab*c and a* match
		{"abxc", "long"}, // ab*c (4) beats a?* and a*? (3)
		{"axy", "a*?"},   // a*? and a?* (3): "a*?" < "a?*" in bytes
		{"a", "short"},   // only a*
		{"b", ""},
	} {
		got, ok := n.lookup(c.name)
		if got != c.want || ok != (c.want != "") {
			t.Errorf("lookup(%q) = %q, %v; want %q", c.name, got, ok, c.want)
		}
	}
	if err := n.add("[a", "bad"); !errors.Is(err, path.ErrBadPattern) {
		t.Errorf("add([a) = %v, want path.ErrBadPattern", err)
	}
}
