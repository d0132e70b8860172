package monitorurl

import "strings"

// RedactedUserinfo replaces the userinfo of a URL in redacted text.
const RedactedUserinfo = "REDACTED"

// RedactURLs returns s with the userinfo (user:password@) of every URL in
// it replaced by RedactedUserinfo: in a setting quoted back to its owner, an
// error of Go's HTTP client, a spooled last_error. It looks for "://"
// followed by an authority holding '@', so it finds URLs inside any text
// (quoted, with a trailing newline, or cut short) and needs no parse that
// could fail on the very URL that is malformed.
func RedactURLs(s string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, "://")
		if i < 0 {
			break
		}
		auth := i + 3
		end := auth
		at := -1
		for end < len(s) && !authorityEnd(s[end]) {
			if s[end] == '@' {
				at = end
			}
			end++
		}
		if at < 0 {
			b.WriteString(s[:end])
		} else {
			b.WriteString(s[:auth])
			b.WriteString(RedactedUserinfo)
			b.WriteString(s[at:end])
		}
		s = s[end:]
	}
	if b.Len() == 0 {
		return s
	}
	b.WriteString(s)
	return b.String()
}

// authorityEnd reports whether c ends a URL's authority in free text: its
// path, query or fragment start, or the text around the URL resumes.
func authorityEnd(c byte) bool {
	switch c {
	case '/', '?', '#', '"', '\'', '`', '\\', ' ', '\t', '\r', '\n', '<', '>':
		return true
	}
	return c < 0x20 || c == 0x7f
}
