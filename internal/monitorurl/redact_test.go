package monitorurl

import "testing"

func TestRedactURLs(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"http://h:1/x", "http://h:1/x"},
		{"http://alice:pw@h:1/x", "http://REDACTED@h:1/x"},
		{`parse "http://alice:p@ss@h\n": bad`, `parse "http://REDACTED@h\n": bad`},
		{`Post "https://u:***@h/v1": refused; again https://bob@h`, `Post "https://REDACTED@h/v1": refused; again https://REDACTED@h`},
		{"htp://a:b@h", "htp://REDACTED@h"},
		{"no url here", "no url here"},
		{"://@", "://REDACTED@"},
		{"mail a@b and http://x/y@z", "mail a@b and http://x/y@z"},
	} {
		if got := RedactURLs(c.in); got != c.want {
			t.Errorf("RedactURLs(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func FuzzRedactURLs(f *testing.F) {
	f.Add("http://alice:pw@h:1/x")
	f.Fuzz(func(t *testing.T, s string) {
		out := RedactURLs(s)
		if RedactURLs(out) != out {
			t.Errorf("not idempotent: %q -> %q", s, out)
		}
	})
}
