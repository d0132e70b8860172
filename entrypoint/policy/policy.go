// Package policy loads an administrator's policy file: the rules for label
// values, and the entrypoint's settings it gives (settings) and those a
// task cannot change (locked).
//
// Guarantees: Load accepts only a well-formed policy: strict JSON with no
// unknown field at any level, a mode of warn or enforce, glob patterns that
// path.Match can use, and keys a task can actually set; any other file is an
// error naming the file and what is wrong, never a half-read policy. Resolve
// gives SystemPath precedence over any path the task's environment names,
// so the environment can never replace or weaken an administrator's policy.
// Settings and locked name variables of the form of a setting (a JSON
// string, number or boolean each, a variable given once); CheckSettings
// holds them to the entrypoint's own table. A nil *Policy allows
// everything and locks nothing.
//
// Matching is case-insensitive (both pattern and value are lower-cased) and
// nothing else: letters that look alike in other scripts (Cyrillic а for
// Latin a) are different letters, so only allow-lists hold; see
// docs/security.md.
package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/mountfile"
)

// SystemPath is the policy file that, when it exists, always applies.
const SystemPath = "/etc/paddle-entrypoint/policy.json"

// MaxFileSize bounds what Load reads: a policy is a few kilobytes, and a
// task-named path must not make the start read a huge file.
const MaxFileSize = 1 << 20

// Modes a policy may set.
const (
	ModeWarn    = "warn"
	ModeEnforce = "enforce"
)

// Errors, for errors.Is. Every error Load and Resolve return wraps one of
// these, or the file system's error (fs.ErrNotExist, fs.ErrPermission).
var (
	// ErrMalformed: the file is not a valid policy (syntax, unknown field,
	// bad mode, bad pattern, unusable key).
	ErrMalformed = errors.New("malformed policy")
	// ErrNotRegular: the path names a directory, device or pipe.
	ErrNotRegular = mountfile.ErrNotRegular
	// ErrTooLarge: the file is over MaxFileSize.
	ErrTooLarge = mountfile.ErrTooLarge
)

// Errors of CheckValue, for errors.Is.
var (
	// ErrNotAllowed: the value matches none of the key's allow patterns.
	ErrNotAllowed = errors.New("not in the policy's allow-list")
	// ErrDenied: the value matches one of the key's deny patterns.
	ErrDenied = errors.New("matches the policy's deny-list")
)

// Policy is an administrator's label policy. A nil *Policy allows everything.
type Policy struct {
	// Mode is "warn", "enforce", or "" when the file does not set it.
	Mode string
	// Required lists keys the task itself must set.
	Required []string
	// Source is the file the policy was read from.
	Source string
	// Labels holds the value rules per label key.
	Labels map[string]Rule
	// ExtraLabels lists the extra label keys accepted when ExtraListed is
	// true; otherwise every well-formed extra label is.
	ExtraLabels []string
	// ExtraListed is true when the file has an extra_labels list (even an
	// empty one, which accepts no extra label).
	ExtraListed bool
	// Settings are values of the entrypoint's settings, by variable name
	// (PADDLE_MONITOR_URL), as text: a setting's default for the task, or,
	// when locked, its value whatever the task says.
	Settings map[string]string
	// Locked are the settings a task cannot set (by variable or by flag),
	// "accounting" expanded to Accounting: each takes its value from
	// Settings, or the built-in default.
	Locked []string
}

// Rule is the allow and deny patterns of one label key, lower-cased.
type Rule struct {
	Allow []string // when not empty, a value must match one
	Deny  []string // a value must match none
}

// computed are the keys the entrypoint computes itself: a policy can neither
// require them nor restrict their values, and saying so is a mistake the
// administrator should hear about.
var computed = map[string]bool{
	"gpu_count": true, "gpu_uuids": true, "hostname": true,
	"start_time": true, "invalid_labels": true,
}

// builtin are the keys of built-in labels a task sets with PADDLE_<KEY>;
// every other key is an extra label.
var builtin = map[string]bool{
	"task_name": true, "project": true, "owner": true, "priority": true,
	"env": true, "duration_est": true, "task_id": true,
	"trainer_id": true, "trainers_num": true,
}

// identity are the pipeline and Kubernetes keys. They became built-in after
// tasks had set them as extra labels (PADDLE_LABEL_STEP), so a policy may
// still list them in extra_labels, and may require or restrict them whether
// or not it does.
var identity = map[string]bool{
	"pipeline": true, "pipeline_run": true, "step": true, "orchestrator": true,
	"k8s_namespace": true, "k8s_pod": true, "k8s_node": true,
	"k8s_pod_uid": true, "k8s_job_index": true, "slurm_job": true,
}

// Resolve finds and loads the policy: systemPath whenever it exists (a
// dangling link or an unreadable file included), otherwise userPath when it
// is not empty. It returns nil, nil when there is no policy. systemPath is
// a parameter so tests can point it elsewhere; the entrypoint passes
// SystemPath, and no setting changes it.
//
// A userPath that does not exist is an error: the operator asked for it.
func Resolve(systemPath, userPath string) (*Policy, error) {
	_, err := os.Lstat(systemPath)
	switch {
	case err == nil:
		return Load(systemPath)
	case !errors.Is(err, fs.ErrNotExist):
		// Cannot tell whether it exists (a directory on the way is not
		// searchable): failing is the only safe answer.
		return nil, fmt.Errorf("policy file %s: %w", systemPath, err)
	case userPath == "":
		return nil, nil
	}
	return Load(userPath)
}

// file is the policy file's JSON, read strictly.
type file struct {
	Mode        *string         `json:"mode"`
	Required    []string        `json:"required"`
	Labels      map[string]rule `json:"labels"`
	ExtraLabels *[]string       `json:"extra_labels"`
	Settings    json.RawMessage `json:"settings"`
	Locked      json.RawMessage `json:"locked"`
}

type rule struct {
	Allow []string `json:"allow"`
	Deny  []string `json:"deny"`
}

// Load reads and checks the policy file at path. Every error names the file
// and the problem.
func Load(name string) (*Policy, error) {
	data, err := mountfile.ReadAs("policy file", name, MaxFileSize)
	if err != nil {
		return nil, err
	}
	p, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("policy file %s: %w", name, err)
	}
	p.Source = name
	return p, nil
}

// Parse checks a policy's JSON text. The error does not name a file; Load's
// does.
func Parse(data []byte) (*Policy, error) {
	if err := strictFields(data); err != nil {
		return nil, err
	}
	var f file
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, malformed("%v", err)
	}
	p := &Policy{Labels: map[string]Rule{}}
	var err error
	if p.Settings, err = parseSettings(f.Settings); err != nil {
		return nil, err
	}
	if p.Locked, err = parseLocked(f.Locked); err != nil {
		return nil, err
	}
	if f.Mode != nil {
		switch *f.Mode {
		case ModeWarn, ModeEnforce:
			p.Mode = *f.Mode
		default:
			return nil, malformed("mode %q: must be %q or %q", *f.Mode, ModeWarn, ModeEnforce)
		}
	}
	if f.ExtraLabels != nil {
		p.ExtraListed = true
		for _, k := range *f.ExtraLabels {
			if err := checkKey(k); err != nil {
				return nil, malformed("extra_labels: %v", err)
			}
			if builtin[k] {
				return nil, malformed("extra_labels: %q is a built-in label, not an extra one", k)
			}
			p.ExtraLabels = append(p.ExtraLabels, k)
		}
	}
	for _, k := range f.Required {
		if err := checkKey(k); err != nil {
			return nil, malformed("required: %v", err)
		}
		if !builtin[k] && !identity[k] && p.ExtraListed && !slices.Contains(p.ExtraLabels, k) {
			return nil, malformed("required: %q can never be set: extra_labels does not list it", k)
		}
		if !slices.Contains(p.Required, k) {
			p.Required = append(p.Required, k)
		}
	}
	keys := make([]string, 0, len(f.Labels))
	for k := range f.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys) // the first problem reported is the same every time
	for _, k := range keys {
		r := f.Labels[k]
		if err := checkKey(k); err != nil {
			return nil, malformed("labels: %v", err)
		}
		if !builtin[k] && !identity[k] && p.ExtraListed && !slices.Contains(p.ExtraLabels, k) {
			return nil, malformed("labels: %q can never be set: extra_labels does not list it", k)
		}
		allow, err := patterns(r.Allow)
		if err != nil {
			return nil, malformed("labels.%s.allow: %w", k, err)
		}
		deny, err := patterns(r.Deny)
		if err != nil {
			return nil, malformed("labels.%s.deny: %w", k, err)
		}
		p.Labels[k] = Rule{Allow: allow, Deny: deny}
	}
	return p, nil
}

// strictFields rejects what encoding/json would let through: a field name
// that matches only case-insensitively ("Mode"), and a repeated field,
// whose last value would silently win.
func strictFields(data []byte) error {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return malformed("%v", err)
	}
	known := []string{"mode", "required", "labels", "extra_labels", "settings", "locked"}
	if err := exactFields(data, "", known); err != nil {
		return err
	}
	if raw, ok := top["settings"]; ok && string(raw) != "null" {
		// A variable given twice: the last value must not silently win.
		if err := exactFields(raw, "settings", nil); err != nil {
			return err
		}
	}
	raw, ok := top["labels"]
	if !ok || string(raw) == "null" {
		return nil
	}
	var labels map[string]json.RawMessage
	if err := json.Unmarshal(raw, &labels); err != nil {
		return malformed("labels: %v", err)
	}
	if err := exactFields(raw, "labels", nil); err != nil {
		return err
	}
	for k, r := range labels {
		if string(r) == "null" {
			continue
		}
		if err := exactFields(r, "labels."+k, []string{"allow", "deny"}); err != nil {
			return err
		}
	}
	return nil
}

// exactFields checks the names of a JSON object's fields: each one at most
// once, and, when known is not nil, each one exactly one of known.
func exactFields(obj []byte, where string, known []string) error {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		if where == "" {
			return malformed("not a JSON object")
		}
		return malformed("%s: not a JSON object", where)
	}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return malformed("%v", err)
		}
		name, _ := t.(string)
		at := name
		if where != "" {
			at = where + "." + name
		}
		if known != nil && !slices.Contains(known, name) {
			return malformed("unknown field %q (known: %s)", at, strings.Join(known, ", "))
		}
		if seen[name] {
			return malformed("field %q given twice", at)
		}
		seen[name] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return malformed("%v", err)
		}
	}
	return nil
}

// checkKey accepts a label key as it appears in the labels file: lower
// case, and not a key the entrypoint computes itself.
func checkKey(k string) error {
	switch {
	case k == "":
		return errors.New("empty label key")
	case k != strings.ToLower(k):
		return fmt.Errorf("%q: label keys are lower case (PADDLE_LABEL_COST_CENTER is cost_center)", k)
	case strings.ContainsAny(k, " \t\r\n=\"'"):
		return fmt.Errorf("%q is not a label key", k)
	case computed[k]:
		return fmt.Errorf("%q is computed by the entrypoint; a task cannot set it", k)
	}
	return nil
}

// patterns lower-cases glob patterns and checks each with path.Match, so a
// bad pattern is found when the file is loaded rather than never matching.
func patterns(ps []string) ([]string, error) {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		if p == "" {
			return nil, errors.New("empty pattern matches no value")
		}
		low := strings.ToLower(p)
		if _, err := path.Match(low, ""); err != nil {
			return nil, fmt.Errorf("pattern %q: %w", p, err)
		}
		out = append(out, low)
	}
	return out, nil
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %w", ErrMalformed, fmt.Errorf(format, args...))
}

// CheckValue returns an error naming the rule broken when value is not
// allowed for key: with allow patterns, it must match one; it must match no
// deny pattern. Patterns are path.Match globs, matched case-insensitively.
func (p *Policy) CheckValue(key, value string) error {
	if p == nil {
		return nil
	}
	r, ok := p.Labels[key]
	if !ok {
		return nil
	}
	v := strings.ToLower(value)
	for _, pat := range r.Deny {
		if match(pat, v) {
			return fmt.Errorf("%w: pattern %q in %s", ErrDenied, pat, p.source())
		}
	}
	if len(r.Allow) == 0 {
		return nil
	}
	for _, pat := range r.Allow {
		if match(pat, v) {
			return nil
		}
	}
	return fmt.Errorf("%w (%s) in %s", ErrNotAllowed, strings.Join(r.Allow, ", "), p.source())
}

func (p *Policy) source() string {
	if p.Source == "" {
		return "the policy"
	}
	return p.Source
}

// match is path.Match for a pattern Load already checked.
func match(pattern, value string) bool {
	ok, err := path.Match(pattern, value)
	return ok && err == nil
}

// AllowsExtra reports whether the extra label key is accepted.
func (p *Policy) AllowsExtra(key string) bool {
	if p == nil || !p.ExtraListed {
		return true
	}
	return slices.Contains(p.ExtraLabels, key)
}
