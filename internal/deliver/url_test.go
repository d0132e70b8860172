package deliver

import (
	"errors"
	"strings"
	"testing"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
)

func TestEndpoint(t *testing.T) {
	tests := []struct{ base, path, want string }{
		{"http://h", wire.RegisterPath, "http://h/v1/task/register"},
		{"http://h/", wire.RegisterPath, "http://h/v1/task/register"},
		{"http://h/api?x=1", wire.RegisterPath, "http://h/api/v1/task/register?x=1"},
		{"http://h/api/?x=1&y=2", "/v1/task/complete", "http://h/api/v1/task/complete?x=1&y=2"},
		{"https://h:8443/a/b", "/v1/task/heartbeat", "https://h:8443/a/b/v1/task/heartbeat"},
		{"HTTP://h/api#frag", wire.RegisterPath, "http://h/api/v1/task/register"},
		{"http://[::1]:8080", wire.RegisterPath, "http://[::1]:8080/v1/task/register"},
		{"http://h/a%20b", wire.RegisterPath, "http://h/a%20b/v1/task/register"},
	}
	for _, tt := range tests {
		got, err := Endpoint(tt.base, tt.path)
		if err != nil || got != tt.want {
			t.Errorf("Endpoint(%q, %q) = %q, %v; want %q", tt.base, tt.path, got, err, tt.want)
		}
	}
}

func TestParseBaseRefusesURLsThatCannotWork(t *testing.T) {
	tests := []struct{ raw, rule string }{
		{"", "no scheme"},
		{"monitor:8080", `scheme "monitor" is not http or https`},
		{"ftp://h", `scheme "ftp" is not http or https`},
		{"//h/api", "no scheme"},
		{"http://", "no host"},
		{"http://:8080", "no host"},
		{"http:h", "no host"},
		{"http://h:0", `port "0" is not 1 to 65535`},
		{"http://h:65536", `port "65536" is not 1 to 65535`},
		{"http://h:", `port "" is not 1 to 65535`},
		{"http://h:http", "invalid port"},
		{"http://h/\napi", "control character at byte 9"},
		{"http://h\x7f", "control character at byte 8"},
		{"http://h/a b\t", "control character at byte 12"},
	}
	for _, tt := range tests {
		_, err := ParseBase(tt.raw)
		if !errors.Is(err, ErrBadURL) || !strings.Contains(err.Error(), tt.rule) {
			t.Errorf("ParseBase(%q) = %v; want ErrBadURL naming %q", tt.raw, err, tt.rule)
		}
	}
}

// The error never repeats the URL: it may carry credentials.
func TestParseBaseErrorHidesURL(t *testing.T) {
	for _, raw := range []string{"ftp://user:s3cret@h", "http://user:s3cret@h:99999", "http://user:s3cret@h:x"} {
		if _, err := ParseBase(raw); err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("ParseBase(%q) = %v", raw, err)
		}
	}
}

func FuzzEndpoint(f *testing.F) {
	for _, s := range []string{"http://h/api?x=1", "https://h:1/", "http://h:0", "ftp://x", "http://h/\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, base string) {
		got, err := Endpoint(base, wire.RegisterPath)
		if err != nil {
			return
		}
		u, err := ParseBase(got)
		if err != nil {
			t.Fatalf("Endpoint(%q) = %q, which does not parse: %v", base, got, err)
		}
		if !strings.HasSuffix(u.Path, wire.RegisterPath) {
			t.Fatalf("Endpoint(%q) = %q: path %q does not end in %s", base, got, u.Path, wire.RegisterPath)
		}
	})
}
