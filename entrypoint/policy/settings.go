package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// AccountingSet is the name "locked" takes for Accounting.
const AccountingSet = "accounting"

// Accounting is the documented set of settings that decide what a task is
// billed for (docs/contract.md, "Settings a task cannot change"): where and
// whether it registers (monitor URL, CA and token file, the spool and the
// registration budget), whether its completion is sent (mode and its
// budget), whether the monitor sees it alive (heartbeat), how many GPUs it
// counts and at what share (GPU probe, its timeout, GPU share), and where
// its labels file is. "locked": "accounting" locks exactly these.
var Accounting = []string{
	"PADDLE_MONITOR_URL", "PADDLE_MONITOR_CA_FILE", "PADDLE_MONITOR_TOKEN_FILE",
	"PADDLE_ENTRYPOINT_MODE", "PADDLE_REGISTER_BUDGET", "PADDLE_COMPLETE_BUDGET",
	"PADDLE_HEARTBEAT", "PADDLE_ENTRYPOINT_GPU_PROBE", "PADDLE_GPU_TIMEOUT",
	"PADDLE_GPU_SHARE", "PADDLE_LABELS_FILE", "PADDLE_SPOOL_PATH",
}

// notSettable are variables a policy file can neither set nor lock: the
// policy file's own path (the file has been found already).
var notSettable = map[string]string{
	"PADDLE_POLICY_FILE": "the policy file cannot choose where the policy file is",
}

// Known is what CheckSettings checks the names and values against: the
// entrypoint's table of settings.
type Known interface {
	// Has reports whether variable is a setting.
	Has(variable string) bool
	// Check returns the rule a value breaks, or nil.
	Check(variable, value string) error
}

// parseSettings reads the policy's "settings" object: variable name to
// value, a JSON string, number or boolean, kept as its text.
func parseSettings(raw json.RawMessage) (map[string]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, malformed("settings: must be an object of variable names and values: %v", err)
	}
	out := make(map[string]string, len(m))
	for _, k := range sortedKeys(m) {
		if err := checkVariable(k); err != nil {
			return nil, malformed("settings: %v", err)
		}
		v, err := settingText(m[k])
		if err != nil {
			return nil, malformed("settings.%s: %v", k, err)
		}
		out[k] = v
	}
	return out, nil
}

// settingText is a setting's value as the entrypoint reads text: a string
// as it is, a number or a boolean as written.
func settingText(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return "", fmt.Errorf("null is not a value (give a string, such as \"\", or leave the key out)")
	case raw[0] == '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", err
		}
		return s, nil
	case raw[0] == '{' || raw[0] == '[':
		return "", fmt.Errorf("must be a string, a number or a boolean")
	}
	return string(raw), nil // a number or true/false, as written
}

// parseLocked reads "locked": a list of variable names, where the name
// "accounting" stands for Accounting, or the string "accounting" alone.
func parseLocked(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var names []string
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		if one != AccountingSet {
			return nil, malformed("locked: %q: a string must be %q (or give a list of variable names)", one, AccountingSet)
		}
		names = []string{one}
	} else if err := json.Unmarshal(raw, &names); err != nil {
		return nil, malformed("locked: must be %q or a list of variable names", AccountingSet)
	}
	var out []string
	for _, n := range names {
		expanded := []string{n}
		if n == AccountingSet {
			expanded = Accounting
		} else if err := checkVariable(n); err != nil {
			return nil, malformed("locked: %v", err)
		}
		for _, v := range expanded {
			if !slices.Contains(out, v) {
				out = append(out, v)
			}
		}
	}
	return out, nil
}

// checkVariable accepts the form of a setting's variable name.
func checkVariable(v string) error {
	switch {
	case v == "":
		return fmt.Errorf("an empty variable name")
	case !strings.HasPrefix(v, "PADDLE_") || strings.TrimLeft(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") != "":
		return fmt.Errorf("%q is not a setting's variable (PADDLE_ and upper-case letters, digits, _)", v)
	case strings.HasPrefix(v, "PADDLE_LABEL_"):
		return fmt.Errorf("%q is a label, not a setting", v)
	case notSettable[v] != "":
		return fmt.Errorf("%q: %s", v, notSettable[v])
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// CheckSettings checks the policy's settings and locked lists against the
// entrypoint's settings: every name one of them, every value one its
// setting accepts. The error is ErrMalformed, naming the file and the key
// (settings.PADDLE_GPU_SHARE, locked). A nil policy has nothing to check.
func (p *Policy) CheckSettings(known Known) error {
	if p == nil {
		return nil
	}
	wrap := func(err error) error {
		if p.Source == "" {
			return err
		}
		return fmt.Errorf("policy file %s: %w", p.Source, err)
	}
	for _, k := range sortedKeys(p.Settings) {
		if !known.Has(k) {
			return wrap(malformed("settings: %q is not a setting of the entrypoint", k))
		}
		if err := known.Check(k, p.Settings[k]); err != nil {
			return wrap(malformed("settings.%s: %q: %v", k, p.Settings[k], err))
		}
	}
	for _, k := range p.Locked {
		if !known.Has(k) {
			return wrap(malformed("locked: %q is not a setting of the entrypoint", k))
		}
	}
	return nil
}

// Setting is the policy's value for variable, if it gives one.
func (p *Policy) Setting(variable string) (string, bool) {
	if p == nil {
		return "", false
	}
	v, ok := p.Settings[variable]
	return v, ok
}

// IsLocked reports whether the task may not set variable (by its variable
// or its flag): it takes the policy's value, or the built-in default.
func (p *Policy) IsLocked(variable string) bool {
	return p != nil && slices.Contains(p.Locked, variable)
}
