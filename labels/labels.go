// Package labels reads a task's labels from its PADDLE_* environment,
// checks them, and writes them as the labels file that node agents scan.
//
// Guarantees: every value in a Set follows the name rule (see wire.ValidName) or
// is one of a closed list, so no value can add a line to the labels file or a
// key to a JSON body; sensitive data (see package sensitive) never reaches a
// Set; and Parse never fails: a bad value is dropped, its default kept, and
// the problem reported, so the caller chooses between warn and enforce.
package labels

import (
	"crypto/rand"
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

// ExtraPrefix starts the environment variables of extra labels.
const ExtraPrefix = "PADDLE_LABEL_"

// Defaults of the three labels the shell script always wrote.
const (
	DefaultTaskName = "unknown_task"
	DefaultProject  = "default"
	DefaultOwner    = "anonymous"
)

// MaxDurationEst is the longest duration estimate accepted, in seconds (a year).
const MaxDurationEst = 31536000

// reserved are the keys an extra label may not take: every built-in or
// computed key, and every top-level key of the registration body.
var reserved = map[string]bool{
	"task_name": true, "project": true, "owner": true, "priority": true,
	"env": true, "duration_est": true, "task_id": true, "gpu_count": true,
	"gpu_uuids": true, "hostname": true, "start_time": true, "submit_time": true,
	"trainer_id": true, "trainers_num": true, "invalid_labels": true,
	"schema_version": true, "labels": true, "gpus": true, "driver_version": true,
}

// Set is a task's checked labels.
type Set struct {
	TaskName, Project, Owner string
	Priority                 string // "" when not set
	Env                      string // "" when not set
	DurationEst              int64  // seconds; 0 when not set
	TaskID                   string
	Hostname                 string
	StartTime                int64 // Unix seconds
	// SubmitTime is when the task was submitted (PADDLE_SUBMIT_TIME), Unix
	// seconds; 0 when not set. It is sent in the registration only: the
	// labels file keeps its keys.
	SubmitTime             int64
	TrainerID, TrainersNum string
	GPUCount               int
	GPUUUIDs               []string
	// Identity is the task's pipeline step and Kubernetes pod.
	Identity
	// Extra holds the PADDLE_LABEL_<NAME> labels by lower-cased key.
	Extra map[string]string
	// Invalid lists the keys whose value was dropped, in file order.
	Invalid []string
}

// Pair is one key=value line of the labels file.
type Pair struct{ Key, Value string }

// Problem is one rule a task's labels broke. Its text names the variable and
// the rule, never a sensitive value.
type Problem struct {
	Var  string // the environment variable, e.g. PADDLE_PROJECT
	Key  string // the label key, "" when the key itself is unusable
	Rule string // what is wrong, without the value when it is sensitive
	// Sensitive is the kind of sensitive data found, "" for other problems.
	Sensitive sensitive.Kind
	// Notice marks a problem that never rejects a start, even in enforce
	// mode, and is not listed in invalid_labels: a value an orchestrator
	// set (the task's author did not write it), or an extra label that
	// now names a built-in key.
	Notice bool
}

func (p Problem) Error() string { return p.Var + ": " + p.Rule }

// Options are the inputs of Parse that do not come from the environment.
type Options struct {
	Policy   *policy.Policy // nil: built-in rules only
	Hostname string
	Now      time.Time
	// NewID returns a fresh task id; nil means a random UUID.
	NewID func() string
}

// Parse reads the labels from environ (KEY=VALUE strings; the first of a
// repeated name wins, as with getenv). It always returns a usable Set:
// problems drop the offending value and keep the key's default.
func Parse(environ []string, opt Options) (*Set, []Problem) {
	env := envMap(environ)
	p := &parser{env: env, policy: opt.Policy}
	s := &Set{Extra: map[string]string{}, StartTime: opt.Now.Unix()}

	s.TaskName = p.name("PADDLE_TASK_NAME", "task_name", "", DefaultTaskName)
	s.Project = p.name("PADDLE_PROJECT", "project", "", DefaultProject)
	s.Owner = p.name("PADDLE_OWNER", "owner", "@+", DefaultOwner)
	s.Priority = p.oneOf("PADDLE_PRIORITY", "priority", "high", "medium", "low")
	s.Env = p.oneOf("PADDLE_ENV", "env", "dev", "staging", "prod")
	s.DurationEst = p.duration("PADDLE_DURATION_EST", "duration_est")
	s.SubmitTime = p.submitTime("PADDLE_SUBMIT_TIME", "submit_time", s.StartTime)
	s.TaskID = p.name("PADDLE_TASK_ID", "task_id", "", "")
	if s.TaskID == "" {
		s.TaskID = newID(opt.NewID)
	}
	s.TrainerID = p.count("PADDLE_TRAINER_ID", "trainer_id")
	s.TrainersNum = p.count("PADDLE_TRAINERS_NUM", "trainers_num")
	if wire.ValidName(opt.Hostname, "") {
		s.Hostname = opt.Hostname
	}
	p.extras(s)
	p.identity(s)
	p.required()
	s.Invalid = p.invalid
	return s, p.problems
}

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

// SetGPUs records the GPUs the training will use: count includes GPUs whose
// UUID is unknown (counted from device nodes, or not queryable), and uuids
// lists the known ones. A UUID that breaks the name rule is left out.
func (s *Set) SetGPUs(count int, uuids []string) {
	s.GPUCount = count
	s.GPUUUIDs = nil
	for _, u := range uuids {
		if wire.ValidName(u, "") {
			s.GPUUUIDs = append(s.GPUUUIDs, u)
		}
	}
}

// Pairs returns the labels in the order of the labels file: the shell
// script's five keys first, then the other built-in keys, the extra labels
// sorted by key, and invalid_labels. Keys without a value are left out.
func (s *Set) Pairs() []Pair {
	ps := []Pair{
		{"task_name", s.TaskName},
		{"project", s.Project},
		{"owner", s.Owner},
		{"gpu_count", strconv.Itoa(s.GPUCount)},
		{"start_time", strconv.FormatInt(s.StartTime, 10)},
		{"task_id", s.TaskID},
		{"priority", s.Priority},
		{"env", s.Env},
		{"duration_est", ""},
		{"gpu_uuids", strings.Join(s.GPUUUIDs, ",")},
		{"hostname", s.Hostname},
		{"trainer_id", s.TrainerID},
		{"trainers_num", s.TrainersNum},
	}
	ps = append(ps, s.Identity.pairs()...)
	if s.DurationEst > 0 {
		ps[8].Value = strconv.FormatInt(s.DurationEst, 10)
	}
	keys := make([]string, 0, len(s.Extra))
	for k := range s.Extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		ps = append(ps, Pair{k, s.Extra[k]})
	}
	ps = append(ps, Pair{"invalid_labels", strings.Join(s.Invalid, ",")})
	out := ps[:0]
	for _, p := range ps {
		if p.Value != "" {
			out = append(out, p)
		}
	}
	return out
}

// Format returns the labels file's bytes: one key=value per line, LF.
func (s *Set) Format() []byte {
	var b strings.Builder
	for _, p := range s.Pairs() {
		b.WriteString(p.Key)
		b.WriteByte('=')
		b.WriteString(p.Value)
		b.WriteByte('\n')
	}
	return []byte(b.String())
}

func envMap(environ []string) map[string]string {
	m := make(map[string]string)
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(k, "PADDLE_") && !foreignVars[k] {
			continue
		}
		if _, dup := m[k]; !dup {
			m[k] = v
		}
	}
	return m
}

func newID(gen func() string) string {
	if gen != nil {
		return gen()
	}
	return NewUUID()
}

// NewUUID returns a random (version 4) UUID.
func NewUUID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		// crypto/rand does not fail on Linux; a time-based id still
		// keeps registrations apart.
		return fmt.Sprintf("t-%d", time.Now().UnixNano())
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// quote shows a rejected value safely in a log line: escaped, and cut short.
func quote(s string) string {
	const max = 64
	if len(s) > max {
		s = s[:max] + "..."
	}
	return strconv.QuoteToASCII(s)
}

func extraText(extra string) string {
	var parts []string
	for _, r := range extra {
		parts = append(parts, "'"+string(r)+"'")
	}
	if len(parts) == 0 {
		return ""
	}
	return ", " + strings.Join(parts, ", ")
}
