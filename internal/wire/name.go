package wire

import (
	"unicode"
	"unicode/utf8"
)

// MaxNameLen is the longest key or value the name rule accepts, in characters.
const MaxNameLen = 63

// ValidName reports whether s follows the name rule: 1 to 63 characters,
// letters of any script with their combining marks, digits, '.', '_' and
// '-', beginning with a letter or digit. extra lists further characters
// allowed after the first one ("@+" for owners).
//
// The rule is what keeps a value from forging structure: no control
// character, whitespace, quote, '=' or '\\' can pass, so a value can never
// start a new line of the labels file, close a JSON string or a Prometheus
// label.
func ValidName(s, extra string) bool {
	if s == "" || !utf8.ValidString(s) || utf8.RuneCountInString(s) > MaxNameLen {
		return false
	}
	for i, r := range s {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r):
		case i == 0:
			return false
		case r == '.', r == '_', r == '-':
		case unicode.Is(unicode.M, r):
		case containsRune(extra, r):
		default:
			return false
		}
	}
	return true
}

func containsRune(s string, r rune) bool {
	for _, c := range s {
		if c == r {
			return true
		}
	}
	return false
}
