// Package policy loads an administrator's label policy file and checks
// label values against it.
package policy

// SystemPath is the policy file that, when it exists, always applies.
const SystemPath = "/etc/paddle-entrypoint/policy.json"

// Policy is an administrator's label policy. A nil *Policy allows everything.
// CONTRACT PLACEHOLDER: implemented by the policy work.
type Policy struct {
	// Mode is "warn", "enforce", or "" when the file does not set it.
	Mode string
	// Required lists keys the task itself must set.
	Required []string
	// Source is the file the policy was read from.
	Source string
}

// Resolve finds and loads the policy: SystemPath whenever it exists,
// otherwise userPath when it is not empty. It returns nil, nil when there is
// no policy. systemPath is a parameter so tests can point it elsewhere.
func Resolve(systemPath, userPath string) (*Policy, error) { return nil, nil }

// CheckValue returns an error naming the rule broken when value is not
// allowed for key (allow/deny globs, case-insensitive).
func (p *Policy) CheckValue(key, value string) error { return nil }

// AllowsExtra reports whether the extra label key is accepted.
func (p *Policy) AllowsExtra(key string) bool { return true }
