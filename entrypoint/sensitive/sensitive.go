// Package sensitive recognises values that must never be written, sent or
// logged: identity numbers, payment cards, secrets, keys and tokens.
//
// Guarantees: Scan and SecretName are pure functions of their argument
// (Scan also reads the current year, the latest plausible birth year), run
// in time linear in the value's length, and never return any part of the
// value: a caller reports the Kind, which is safe to log.
//
// Every detector is built to keep false positives rare, because a false
// positive costs a task its label (in enforce mode, its start): numbers must
// carry their own proof (a check digit, a card network's prefix and a Luhn
// digit, a calendar date), and words must stand alone (tokenizer is not
// token). The rates measured on generated benign names are in
// docs/security.md and in the package's tests.
//
// A value is scanned as written and also after folding full-width ASCII
// (U+FF01-U+FF5E) and every Unicode decimal digit to ASCII, because the
// name rule accepts letters and digits of any script and an identity number
// in full-width digits is still an identity number.
package sensitive

import (
	"strings"
	"unicode"
)

// Kind names a kind of sensitive data, for warnings that must not repeat
// the value itself.
type Kind string

// The kinds of sensitive data Scan and SecretName recognise.
const (
	// KindIdentity is a PRC resident identity number: 18 characters (GB
	// 11643, with its check digit) or the older 15-digit form.
	KindIdentity Kind = "resident identity number"
	// KindCard is a payment card number: 13 to 19 digits with a card
	// network's prefix and length, and a valid Luhn digit.
	KindCard Kind = "payment card number"
	// KindAssignment is a password, secret or token assignment such as
	// db_password=... or token: ....
	KindAssignment Kind = "password assignment"
	// KindURLPassword is a URL carrying a password (scheme://user:pass@host).
	KindURLPassword Kind = "password in a URL"
	// KindPrivateKey is a private key's header (PEM, OpenSSH, PGP, PuTTY).
	KindPrivateKey Kind = "private key"
	// KindJWT is a JSON Web Token: base64url segments whose header is JSON
	// naming an "alg".
	KindJWT Kind = "JWT"
	// KindCloudKey is a cloud provider's access key id (AWS, Alibaba Cloud,
	// Google Cloud, Tencent Cloud).
	KindCloudKey Kind = "cloud access key"
	// KindAPIToken is a service's API token with a recognisable prefix
	// (GitHub, GitLab, Slack, Hugging Face, OpenAI, Anthropic).
	KindAPIToken Kind = "API token"
	// KindSecretName is an extra label whose name says it holds a secret.
	KindSecretName Kind = "secret label name"
)

// detectors run in this order; the first that fires names the kind. The
// cheap, specific text detectors come before the digit-run ones.
var detectors = []struct {
	kind Kind
	find func(s string) bool
}{
	{KindPrivateKey, hasPrivateKey},
	{KindJWT, hasJWT},
	{KindCloudKey, hasCloudKey},
	{KindAPIToken, hasAPIToken},
	{KindURLPassword, hasURLPassword},
	{KindAssignment, hasAssignment},
	{KindIdentity, hasIdentityNumber},
	{KindCard, hasCardNumber},
}

// Scan reports whether value holds sensitive data, and of which kind. It
// looks anywhere in the value, so a secret embedded in a longer name
// (run-110101199003074514-x) is found.
func Scan(value string) (Kind, bool) {
	folded := fold(value)
	for _, d := range detectors {
		if d.find(folded) {
			return d.kind, true
		}
	}
	return "", false
}

// secretWords are the parts of a label name that say it holds a secret.
var secretWords = map[string]bool{
	"password": true, "passwd": true, "pwd": true, "passphrase": true,
	"secret": true, "token": true, "apikey": true,
	"credential": true, "credentials": true,
}

// secretPairs are adjacent parts that together name a secret.
var secretPairs = map[[2]string]bool{
	{"api", "key"}: true, {"private", "key"}: true, {"access", "key"}: true,
}

// SecretName reports whether an extra label's key names a secret: one of its
// parts (split at '_', and at '-' and '.', which the name rule also allows)
// is exactly a secret word such as password, token or credentials, or two
// adjacent parts are api_key, private_key or access_key. Whole parts only:
// db_password and github_token are secret names; tokenizer, secretary and
// keyword are not.
func SecretName(key string) bool {
	parts := strings.FieldsFunc(strings.ToLower(key), func(r rune) bool {
		return r == '_' || r == '-' || r == '.'
	})
	for i, p := range parts {
		if secretWords[p] {
			return true
		}
		if i > 0 && secretPairs[[2]string{parts[i-1], p}] {
			return true
		}
	}
	return false
}

// fold maps full-width ASCII forms and every Unicode decimal digit to ASCII,
// leaving everything else as it is. It returns s itself when there is
// nothing to fold, the common case.
func fold(s string) string {
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			ascii = false
			break
		}
	}
	if ascii {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		switch {
		case r >= 0xFF01 && r <= 0xFF5E: // full-width ! to ~
			b.WriteRune(r - 0xFEE0)
		case r >= 0x80 && unicode.Is(unicode.Nd, r):
			b.WriteByte(byte('0' + digitValue(r)))
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// digitValue returns the value of a Unicode decimal digit (category Nd).
// Unicode encodes every decimal digit set as ten consecutive code points
// from zero to nine, and unicode.Nd's ranges each hold whole sets, so the
// value is the offset from the range's start, modulo ten (a test checks
// this against the table).
func digitValue(r rune) int {
	for _, rg := range unicode.Nd.R16 {
		if r >= rune(rg.Lo) && r <= rune(rg.Hi) {
			return int(r-rune(rg.Lo)) % 10
		}
	}
	for _, rg := range unicode.Nd.R32 {
		if r >= rune(rg.Lo) && r <= rune(rg.Hi) {
			return int(r-rune(rg.Lo)) % 10
		}
	}
	return 0
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
