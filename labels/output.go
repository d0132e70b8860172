package labels

// What a parsed Set becomes: the GPUs it records, its key=value pairs and
// the labels file's bytes.

import (
	"crypto/rand"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
)

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
