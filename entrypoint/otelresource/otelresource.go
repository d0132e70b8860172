// Package otelresource builds the OTEL_RESOURCE_ATTRIBUTES value that the
// training command gets, so that its own OpenTelemetry SDK tags traces,
// metrics and logs with the task's identity.
//
// Guarantees: the caller's own attributes are kept byte for byte and win
// over ours (a key the caller set is never added again); every value we add
// is percent-encoded so that it holds only ASCII letters, digits and
// "-._~@" plus %XX escapes — a subset of the W3C baggage octets that the
// OpenTelemetry SDK environment specification requires, decoded the same
// way by every SDK; no value can add an attribute or break the list.
package otelresource

import (
	"strings"

	"github.com/paddle-entrypoint/paddle-entrypoint/labels"
)

// Var is the environment variable read by OpenTelemetry SDKs.
const Var = "OTEL_RESOURCE_ATTRIBUTES"

// Attr is one resource attribute.
type Attr struct{ Key, Value string }

// Attributes returns the task's resource attributes, those with a value
// only: OTel's semantic convention names where one exists (cicd.*, k8s.*),
// paddle.* otherwise.
func Attributes(s *labels.Set) []Attr {
	all := []Attr{
		{"paddle.task.id", s.TaskID},
		{"paddle.task.name", s.TaskName},
		{"paddle.project", s.Project},
		{"paddle.owner", s.Owner},
		{"cicd.pipeline.name", s.Pipeline},
		{"cicd.pipeline.run.id", s.PipelineRun},
		{"cicd.pipeline.task.name", s.Step},
		{"k8s.namespace.name", s.K8sNamespace},
		{"k8s.pod.name", s.K8sPod},
		{"k8s.node.name", s.K8sNode},
		{"k8s.pod.uid", s.K8sPodUID},
	}
	out := all[:0]
	for _, a := range all {
		if a.Value != "" {
			out = append(out, a)
		}
	}
	return out
}

// Merge returns caller (the command's OTEL_RESOURCE_ATTRIBUTES as the
// caller set it, "" when unset) with ours appended, except the keys the
// caller already set.
func Merge(caller string, ours []Attr) string {
	taken := map[string]bool{}
	for _, member := range strings.Split(caller, ",") {
		if k, _, ok := strings.Cut(member, "="); ok {
			taken[strings.TrimSpace(k)] = true
		}
	}
	var b strings.Builder
	if strings.TrimSpace(caller) != "" {
		b.WriteString(caller)
	}
	for _, a := range ours {
		if taken[a.Key] {
			continue
		}
		taken[a.Key] = true
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(a.Key)
		b.WriteByte('=')
		b.WriteString(Encode(a.Value))
	}
	return b.String()
}

// Encode percent-encodes every byte of v except ASCII letters, digits and
// "-._~@". Non-ASCII letters (names may use any script) become their UTF-8
// bytes as %XX; '%', ',', '=', ';', '+', whitespace and controls are
// escaped too ('+' because some decoders read it as a space).
func Encode(v string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
			c == '-', c == '.', c == '_', c == '~', c == '@':
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		}
	}
	return b.String()
}
