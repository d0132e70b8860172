package monitorurl

import (
	"errors"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct{ raw, rule string }{
		{"http://monitor:8080", ""},
		{"https://u:p@monitor/api?x=1#frag", ""},
		{"monitor:8080", "scheme"},
		{"ftp://monitor", "scheme"},
		{"http://", "no host"},
		{"http://monitor:0", "port"},
		{"http://monitor:65536", "port"},
		{"http://monitor:", "port"},
		{"http://mon\nitor", "control character at byte 10"},
	}
	for _, tt := range tests {
		u, err := Parse(tt.raw)
		if tt.rule == "" {
			if err != nil || u.Fragment != "" {
				t.Errorf("Parse(%q) = %v, %v", tt.raw, u, err)
			}
			continue
		}
		if !errors.Is(err, ErrBad) || !strings.Contains(err.Error(), tt.rule) {
			t.Errorf("Parse(%q) = %v; want ErrBad naming %q", tt.raw, err, tt.rule)
		}
	}
}

// FuzzParse: an accepted URL is http or https with a host; a refusal is
// ErrBad and never repeats the userinfo (user:password) of the input.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"http://u:s3cret@h:1/p", "https://s3cret@[::1]:99999", "ftp://u:s3cret@h", "http://h\x7fs3cret"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := Parse(raw)
		if err == nil {
			if s := strings.ToLower(u.Scheme); (s != "http" && s != "https") || u.Hostname() == "" {
				t.Fatalf("Parse(%q) accepted %v", raw, u)
			}
			return
		}
		if !errors.Is(err, ErrBad) {
			t.Fatalf("Parse(%q) = %v, not ErrBad", raw, err)
		}
		_, rest, _ := strings.Cut(raw, "://")
		if cred, host, ok := strings.Cut(rest, "@"); ok && len(cred) >= 4 && !strings.Contains(host, cred) && strings.Contains(err.Error(), cred) {
			t.Fatalf("Parse(%q) error repeats the userinfo: %v", raw, err)
		}
	})
}
