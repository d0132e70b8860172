package otelresource

import (
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/paddle-entrypoint/paddle-entrypoint/labels"
)

func TestAttributes(t *testing.T) {
	s := &labels.Set{TaskID: "t-1", TaskName: "resnet50", Project: "vision", Owner: "ann+ml@example.com",
		Identity: labels.Identity{Pipeline: "ocr", PipelineRun: "991", Step: "eval", Orchestrator: "gitlab",
			K8sNamespace: "ml", K8sPod: "eval-x", K8sNode: "gpu-7", K8sPodUID: "u-1", K8sJobIndex: "2"}}
	got := Merge("", Attributes(s))
	want := "paddle.task.id=t-1,paddle.task.name=resnet50,paddle.project=vision,paddle.owner=ann%2Bml@example.com," +
		"cicd.pipeline.name=ocr,cicd.pipeline.run.id=991,cicd.pipeline.task.name=eval," +
		"k8s.namespace.name=ml,k8s.pod.name=eval-x,k8s.node.name=gpu-7,k8s.pod.uid=u-1"
	if got != want {
		t.Errorf("Merge =\n%s\nwant\n%s", got, want)
	}
	// Unset keys are left out.
	got = Merge("", Attributes(&labels.Set{TaskID: "t", TaskName: "n", Project: "p", Owner: "o"}))
	if want := "paddle.task.id=t,paddle.task.name=n,paddle.project=p,paddle.owner=o"; got != want {
		t.Errorf("Merge = %s, want %s", got, want)
	}
}

func TestMerge(t *testing.T) {
	ours := []Attr{{"paddle.task.id", "t-1"}, {"k8s.pod.name", "p-1"}, {"paddle.project", "文档"}}
	tests := []struct{ caller, want string }{
		{"", "paddle.task.id=t-1,k8s.pod.name=p-1,paddle.project=%E6%96%87%E6%A1%A3"},
		{"  ", "paddle.task.id=t-1,k8s.pod.name=p-1,paddle.project=%E6%96%87%E6%A1%A3"},
		// The caller's keys win and the caller's text is kept as it is.
		{"k8s.pod.name=mine,service.version=1.2", "k8s.pod.name=mine,service.version=1.2,paddle.task.id=t-1,paddle.project=%E6%96%87%E6%A1%A3"},
		{" paddle.task.id = x ", " paddle.task.id = x ,k8s.pod.name=p-1,paddle.project=%E6%96%87%E6%A1%A3"},
		{"deployment.environment=prod%20eu", "deployment.environment=prod%20eu,paddle.task.id=t-1,k8s.pod.name=p-1,paddle.project=%E6%96%87%E6%A1%A3"},
		// A malformed member of the caller's is the caller's business: kept.
		{"junk", "junk,paddle.task.id=t-1,k8s.pod.name=p-1,paddle.project=%E6%96%87%E6%A1%A3"},
	}
	for _, tt := range tests {
		if got := Merge(tt.caller, ours); got != tt.want {
			t.Errorf("Merge(%q) =\n%s\nwant\n%s", tt.caller, got, tt.want)
		}
	}
}

func TestEncode(t *testing.T) {
	tests := []struct{ in, want string }{
		{"abc-XYZ_0.9~", "abc-XYZ_0.9~"},
		{"a@b", "a@b"},
		{"a+b", "a%2Bb"},
		{"a b,c=d;e%f\"g\\h", "a%20b%2Cc%3Dd%3Be%25f%22g%5Ch"},
		{"é", "%C3%A9"},
		{"\x00\n\x7f", "%00%0A%7F"},
	}
	for _, tt := range tests {
		if got := Encode(tt.in); got != tt.want {
			t.Errorf("Encode(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// isBaggageOctet is the W3C baggage value octet range the OTel SDK
// environment specification requires of OTEL_RESOURCE_ATTRIBUTES values.
func isBaggageOctet(c byte) bool {
	return c == 0x21 || (c >= 0x23 && c <= 0x2B) || (c >= 0x2D && c <= 0x3A) ||
		(c >= 0x3C && c <= 0x5B) || (c >= 0x5D && c <= 0x7E)
}

// FuzzMerge: whatever the values, the result parses back as the caller's
// members followed by ours, each of our values decodes to itself, and every
// byte we add is a baggage octet.
func FuzzMerge(f *testing.F) {
	f.Add("service.name=x", "v", "w")
	f.Add("", "a,b=c", "%zz")
	f.Add("paddle.task.id=1", "\xff\n", "文档 智能")
	f.Fuzz(func(t *testing.T, caller, v1, v2 string) {
		if strings.TrimSpace(caller) != "" && !utf8.ValidString(caller) {
			t.Skip()
		}
		ours := []Attr{{"paddle.task.id", v1}, {"paddle.project", v2}}
		got := Merge(caller, ours)
		rest := got
		if strings.TrimSpace(caller) != "" {
			if !strings.HasPrefix(got, caller) {
				t.Fatalf("caller's text not kept: %q -> %q", caller, got)
			}
			rest = strings.TrimPrefix(strings.TrimPrefix(got, caller), ",")
		}
		taken := map[string]bool{}
		for _, m := range strings.Split(caller, ",") {
			if k, _, ok := strings.Cut(m, "="); ok {
				taken[strings.TrimSpace(k)] = true
			}
		}
		var want []Attr
		for _, a := range ours {
			if !taken[a.Key] {
				want = append(want, a)
			}
		}
		var members []string
		if rest != "" {
			members = strings.Split(rest, ",")
		}
		if len(members) != len(want) {
			t.Fatalf("added members %q, want %d", members, len(want))
		}
		for i, m := range members {
			k, v, ok := strings.Cut(m, "=")
			if !ok || k != want[i].Key || strings.Contains(v, "=") {
				t.Fatalf("member %q, want key %q", m, want[i].Key)
			}
			for j := 0; j < len(v); j++ {
				if !isBaggageOctet(v[j]) {
					t.Fatalf("byte %q of %q is not a baggage octet", v[j], v)
				}
			}
			dec, err := url.PathUnescape(v)
			if err != nil || dec != want[i].Value {
				t.Fatalf("value %q decodes to %q (%v), want %q", v, dec, err, want[i].Value)
			}
		}
	})
}
