// Package access decides who may write and read which tasks on the monitor:
// the tokens file (names, SHA-256 of the secret, project and owner glob
// patterns, admin), constant-time token checks, and minting new tokens.
//
// Guarantees: a token's secret is never stored or logged, only its SHA-256;
// comparisons take the same time whatever the candidate; a nil *Scope means
// "everything" (no tokens file, or an admin token), so every caller that
// narrows must pass a non-nil one.
package access

import (
	"path"
	"strings"
)

// Scope is what one token may write and read: tasks whose project matches
// one of Projects and whose owner matches one of Owners (no Owners: any
// owner). Patterns are path.Match globs, matched case-insensitively.
type Scope struct {
	Projects []string `json:"projects"`
	Owners   []string `json:"owners,omitempty"`
}

// Allows reports whether a task of this project and owner is within s. A
// nil Scope allows everything.
func (s *Scope) Allows(project, owner string) bool {
	if s == nil {
		return true
	}
	if !matchAny(s.Projects, project) {
		return false
	}
	return len(s.Owners) == 0 || matchAny(s.Owners, owner)
}

func matchAny(patterns []string, value string) bool {
	value = strings.ToLower(value)
	for _, p := range patterns {
		if ok, err := path.Match(strings.ToLower(p), value); err == nil && ok {
			return true
		}
	}
	return false
}

// ValidPattern reports whether p is a well-formed glob (path.Match's syntax).
func ValidPattern(p string) bool {
	_, err := path.Match(p, "")
	return err == nil
}
