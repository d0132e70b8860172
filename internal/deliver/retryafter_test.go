package deliver

import (
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		h    string
		want time.Duration
		ok   bool
	}{
		{"", 0, false},
		{"1", time.Second, true},
		{" 120 ", 2 * time.Minute, true},
		{"0", 0, true},
		{"-1", 0, false},
		{"1.5", 0, false},
		{"soon", 0, false},
		{"99999999999999999999", maxRetryAfter, true}, // too large for 64 bits: capped, not ignored
		{"9999999999", maxRetryAfter, true},
		{"Thu, 02 Jan 2025 03:04:35 GMT", 30 * time.Second, true},
		{"Thu, 02 Jan 2025 03:00:00 GMT", 0, true},
		{"Thursday, 02-Jan-25 03:05:05 GMT", time.Minute, true},
	}
	for _, tt := range tests {
		got, ok := parseRetryAfter(tt.h, now)
		if got != tt.want || ok != tt.ok {
			t.Errorf("parseRetryAfter(%q) = %v, %v; want %v, %v", tt.h, got, ok, tt.want, tt.ok)
		}
	}
}
