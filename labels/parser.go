package labels

// The parser of the environment: one PADDLE_* variable at a time, each
// under its rule, every problem recorded against its variable.

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/entrypoint/policy"
	"github.com/paddle-entrypoint/paddle-entrypoint/entrypoint/sensitive"
	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
)

type parser struct {
	env      map[string]string
	policy   *policy.Policy
	problems []Problem
	invalid  []string
	given    map[string]bool // keys the task itself set to an accepted value
	// legacy holds the extra labels that name an identity key.
	legacy map[string]legacyValue
}

func (p *parser) fail(v, key, rule string, kind sensitive.Kind) {
	p.problems = append(p.problems, Problem{Var: v, Key: key, Rule: rule, Sensitive: kind})
	if key != "" && wire.ValidName(key, "") {
		for _, k := range p.invalid {
			if k == key {
				return
			}
		}
		p.invalid = append(p.invalid, key)
	}
}

// lookup returns the raw value of v after the sensitive-data check, which
// runs before every other rule.
func (p *parser) lookup(v, key string) (string, bool) {
	raw := p.env[v]
	if raw == "" {
		// Empty is unset, as ${VAR:-default} in the shell script.
		return "", false
	}
	if kind, found := sensitive.Scan(raw); found {
		p.fail(v, key, "value holds sensitive data ("+string(kind)+"); never written, sent or logged", kind)
		return "", false
	}
	return raw, true
}

// accept applies the policy to an otherwise valid value.
func (p *parser) accept(v, key, value string) bool {
	if err := p.policy.CheckValue(key, value); err != nil {
		p.fail(v, key, fmt.Sprintf("value %s: %v", quote(value), err), "")
		return false
	}
	if p.given == nil {
		p.given = map[string]bool{}
	}
	p.given[key] = true
	return true
}

func (p *parser) name(v, key, extra, def string) string {
	raw, ok := p.lookup(v, key)
	if !ok {
		return def
	}
	if !wire.ValidName(raw, extra) {
		p.fail(v, key, fmt.Sprintf("value %s breaks the name rule (1-%d letters, digits, '.', '_', '-'%s, starting with a letter or digit)", quote(raw), wire.MaxNameLen, extraText(extra)), "")
		return def
	}
	if !p.accept(v, key, raw) {
		return def
	}
	return raw
}

func (p *parser) oneOf(v, key string, allowed ...string) string {
	raw, ok := p.lookup(v, key)
	if !ok {
		return ""
	}
	low := strings.ToLower(raw)
	for _, a := range allowed {
		if low == a {
			if !p.accept(v, key, low) {
				return ""
			}
			return low
		}
	}
	p.fail(v, key, fmt.Sprintf("value %s is not one of %s", quote(raw), strings.Join(allowed, ", ")), "")
	return ""
}

func (p *parser) duration(v, key string) int64 {
	raw, ok := p.lookup(v, key)
	if !ok {
		return 0
	}
	secs, ok := parseSeconds(raw)
	if !ok || secs < 1 || secs > MaxDurationEst {
		p.fail(v, key, fmt.Sprintf("value %s is not a whole number of seconds from 1 to %d (or a Go duration such as 2h)", quote(raw), MaxDurationEst), "")
		return 0
	}
	if !p.accept(v, key, strconv.FormatInt(secs, 10)) {
		return 0
	}
	return secs
}

// submitTime reads when the task was submitted: Unix seconds, or an RFC
// 3339 time (what orchestrators write, e.g. Argo's
// {{workflow.creationTimestamp}}); a fraction of a second is dropped. A
// time after the start is refused: the queue wait it would give is
// negative.
func (p *parser) submitTime(v, key string, start int64) int64 {
	raw, ok := p.lookup(v, key)
	if !ok {
		return 0
	}
	var secs int64
	if isDigits(raw) {
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil || n < 1 || n > maxUnix {
			p.fail(v, key, fmt.Sprintf("value %s is not Unix seconds or an RFC 3339 time (2026-11-30T08:00:00Z)", quote(raw)), "")
			return 0
		}
		secs = n
	} else {
		t, err := time.Parse(time.RFC3339, raw)
		if err != nil || t.Unix() < 1 || t.Unix() > maxUnix {
			p.fail(v, key, fmt.Sprintf("value %s is not Unix seconds or an RFC 3339 time (2026-11-30T08:00:00Z)", quote(raw)), "")
			return 0
		}
		secs = t.Unix()
	}
	if secs > start {
		p.fail(v, key, fmt.Sprintf("value %s is after the task's start (%d): a submission precedes its start", quote(raw), start), "")
		return 0
	}
	if !p.accept(v, key, strconv.FormatInt(secs, 10)) {
		return 0
	}
	return secs
}

// maxUnix bounds a time in Unix seconds (the monitor's bound too).
const maxUnix = 1 << 40

// parseSeconds accepts plain decimal seconds or a Go duration that is a
// whole number of seconds.
func parseSeconds(s string) (int64, bool) {
	if isDigits(s) {
		n, err := strconv.ParseInt(s, 10, 64)
		return n, err == nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d%time.Second != 0 {
		return 0, false
	}
	return int64(d / time.Second), true
}

// count reads a non-negative decimal integer such as a trainer id.
func (p *parser) count(v, key string) string {
	raw, ok := p.lookup(v, key)
	if !ok {
		return ""
	}
	if !isDigits(raw) || len(raw) > 9 {
		p.fail(v, key, fmt.Sprintf("value %s is not a non-negative integer", quote(raw)), "")
		return ""
	}
	if !p.accept(v, key, raw) {
		return ""
	}
	return raw
}

func (p *parser) extras(s *Set) {
	var vars []string
	for v := range p.env {
		if strings.HasPrefix(v, ExtraPrefix) {
			vars = append(vars, v)
		}
	}
	sort.Strings(vars)
	for _, v := range vars {
		key := strings.ToLower(strings.TrimPrefix(v, ExtraPrefix))
		switch kind, found := sensitive.Scan(strings.TrimPrefix(v, ExtraPrefix)); {
		case found:
			// The variable's own name holds the data: it is not repeated.
			p.fail(ExtraPrefix+"...", "", "label name holds sensitive data ("+string(kind)+"); never written, sent or logged", kind)
			continue
		case !wire.ValidName(key, ""):
			p.fail(v, "", fmt.Sprintf("label name %s breaks the name rule", quote(key)), "")
			continue
		case sensitive.SecretName(key):
			p.fail(v, key, "label name says it holds a secret; never written, sent or logged", sensitive.KindSecretName)
			continue
		}
		raw, ok := p.lookup(v, key)
		if !ok {
			continue
		}
		switch {
		case identityKey[key]:
			if !wire.ValidName(raw, "") {
				p.fail(v, key, fmt.Sprintf("value %s breaks the name rule (1-%d letters, digits, '.', '_', '-', starting with a letter or digit)", quote(raw), wire.MaxNameLen), "")
			} else if p.accept(v, key, raw) {
				if p.legacy == nil {
					p.legacy = map[string]legacyValue{}
				}
				p.legacy[key] = legacyValue{v, raw}
			}
		case reserved[key]:
			p.fail(v, key, fmt.Sprintf("label %s would shadow a built-in key", key), "")
		case s.Extra[key] != "":
			p.fail(v, key, fmt.Sprintf("label %s is set twice (names differ only in case)", key), "")
		case !p.policy.AllowsExtra(key):
			p.fail(v, key, fmt.Sprintf("label %s is not in the policy's extra_labels", key), "")
		case !wire.ValidName(raw, ""):
			p.fail(v, key, fmt.Sprintf("value %s breaks the name rule (1-%d letters, digits, '.', '_', '-', starting with a letter or digit)", quote(raw), wire.MaxNameLen), "")
		case p.accept(v, key, raw):
			s.Extra[key] = raw
		}
	}
}

// required reports the policy's required keys that the task did not set
// itself; a default does not count. A key whose value was rejected is
// already reported, once.
func (p *parser) required() {
	if p.policy == nil {
		return
	}
	for _, key := range p.policy.Required {
		if !p.given[key] && !slices.Contains(p.invalid, key) {
			p.fail(varOf(key), key, "required by policy "+p.policy.Source+" but not set", "")
		}
	}
}

// varOf names the environment variable that sets key.
func varOf(key string) string {
	switch key {
	case "task_name", "project", "owner", "priority", "env", "duration_est", "submit_time", "task_id", "trainer_id", "trainers_num":
		return "PADDLE_" + strings.ToUpper(key)
	}
	for _, k := range identityKeys {
		if k.key == key && k.own != "" {
			return k.own
		}
	}
	return ExtraPrefix + strings.ToUpper(key)
}
