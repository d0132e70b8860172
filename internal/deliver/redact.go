package deliver

import "strings"

// fragmentLen is the shortest part of a token that counts as the token:
// an answer cut short, or one that echoes a part of the header, must not
// leave most of a token readable. Eight characters of a random token are
// far too rare in ordinary text to redact anything else.
const fragmentLen = 8

// redactor finds a token, and every fragment of it of at least fragmentLen
// characters, in text.
type redactor struct {
	token string
	n     int                 // fragment length: fragmentLen, or the whole of a shorter token
	grams map[string]struct{} // every substring of token of length n
}

func newRedactor(tok string) *redactor {
	n := min(fragmentLen, len(tok))
	r := &redactor{token: tok, n: n, grams: make(map[string]struct{}, len(tok))}
	for i := 0; i+n <= len(tok); i++ {
		r.grams[tok[i:i+n]] = struct{}{}
	}
	return r
}

// redact replaces every run of s covered by fragments of the token with
// one "[REDACTED]". It costs one map look-up per byte of s.
func (r *redactor) redact(s string) string {
	if r.n == 0 || len(s) < r.n {
		return s
	}
	var b strings.Builder
	last, coverEnd, coverStart := 0, -1, -1
	for i := 0; i+r.n <= len(s); i++ {
		if _, ok := r.grams[s[i:i+r.n]]; !ok {
			continue
		}
		if i > coverEnd {
			if coverStart >= 0 {
				b.WriteString(s[last:coverStart])
				b.WriteString("[REDACTED]")
				last = coverEnd
			}
			coverStart = i
		}
		coverEnd = i + r.n
	}
	if coverStart < 0 {
		return s
	}
	b.WriteString(s[last:coverStart])
	b.WriteString("[REDACTED]")
	b.WriteString(s[coverEnd:])
	return b.String()
}
