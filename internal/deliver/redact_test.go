package deliver

import "testing"

func TestRedactorFragments(t *testing.T) {
	tok := "Zq7vK2mXp9Lr4sT8"
	r := newRedactor(tok)
	for _, c := range []struct{ in, want string }{
		{"Bearer " + tok, "Bearer [REDACTED]"},
		{"cut: Bearer " + tok[:9], "cut: Bearer [REDACTED]"},
		{"tail " + tok[5:] + " end", "tail [REDACTED] end"},
		{"two " + tok + "," + tok, "two [REDACTED],[REDACTED]"},
		{"short " + tok[:7], "short " + tok[:7]},
		{"nothing here", "nothing here"},
		{"", ""},
	} {
		if got := r.redact(c.in); got != c.want {
			t.Errorf("redact(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	short := newRedactor("abc")
	if got := short.redact("x abc ab"); got != "x [REDACTED] ab" {
		t.Errorf("short token: %q", got)
	}
}
