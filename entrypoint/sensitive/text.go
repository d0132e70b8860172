package sensitive

import (
	"encoding/base64"
	"encoding/json"
	"regexp"
	"strings"
	"sync"
)

// privateKey matches the header of a private key in PEM (-----BEGIN RSA
// PRIVATE KEY-----, BEGIN OPENSSH PRIVATE KEY, BEGIN ENCRYPTED PRIVATE KEY,
// BEGIN PGP PRIVATE KEY BLOCK) with any separators, and PuTTY's key files.
var privateKey = lazyRegexp(`(?i)begin[ _-]*(?:[a-z0-9]+[ _-]+){0,3}private[ _-]*key|putty-user-key-file`)

func hasPrivateKey(s string) bool {
	low := strings.ToLower(s)
	if !strings.Contains(low, "private") && !strings.Contains(low, "putty") {
		return false
	}
	return privateKey().MatchString(s)
}

// jwtCandidate matches three or more base64url segments, the first starting
// with eyJ (the base64 of `{"`).
var jwtCandidate = lazyRegexp(`eyJ[A-Za-z0-9_-]+=*\.[A-Za-z0-9_-]+=*\.[A-Za-z0-9_-]*`)

// hasJWT reports a JWT (or JWE): a candidate whose first segment decodes to
// a JSON header naming its "alg".
func hasJWT(s string) bool {
	if !strings.Contains(s, "eyJ") {
		return false
	}
	for _, m := range jwtCandidate().FindAllString(s, -1) {
		header, _, _ := strings.Cut(m, ".")
		if jwtHeader(strings.TrimRight(header, "=")) {
			return true
		}
	}
	return false
}

func jwtHeader(seg string) bool {
	// A header cut short by the value's end still shows "alg" in what
	// decodes; drop the trailing characters that do not make whole bytes.
	if len(seg)%4 == 1 {
		seg = seg[:len(seg)-1]
	}
	raw, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return false
	}
	var h map[string]json.RawMessage
	if json.Unmarshal(raw, &h) == nil {
		_, ok := h["alg"]
		return ok
	}
	return strings.Contains(string(raw), `"alg"`)
}

// cloudKey matches cloud providers' access key ids, by their fixed
// upper-case prefixes: AWS (AKIA long-term, ASIA temporary, ABIA, ACCA),
// Alibaba Cloud (LTAI), Google Cloud API keys (AIza), Tencent Cloud (AKID).
var cloudKey = lazyRegexp(`(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}|LTAI[A-Za-z0-9]{12,20}|AIza[A-Za-z0-9_-]{35}|AKID[A-Za-z0-9]{32}`)

func hasCloudKey(s string) bool {
	return containsAny(s, "AKIA", "ASIA", "ABIA", "ACCA", "LTAI", "AIza", "AKID") && cloudKey().MatchString(s)
}

// apiToken matches services' API tokens by their documented prefixes. The
// lower-case prefixes must start a word, so task-0123... is not sk-0123....
var apiToken = lazyRegexp(`(?:^|[^A-Za-z0-9])(?:gh[pousr]_[A-Za-z0-9]{36}|github_pat_[A-Za-z0-9_]{22,}|glpat-[A-Za-z0-9_-]{20}|xox[abposr]-[A-Za-z0-9-]{10,}|hf_[A-Za-z0-9]{34}|sk-(?:proj-|ant-)[A-Za-z0-9_-]{32,}|sk-[A-Za-z0-9]{32,})`)

func hasAPIToken(s string) bool {
	return containsAny(s, "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-", "xox", "hf_", "sk-") &&
		apiToken().MatchString(s)
}

// urlPassword matches a URL's user information with a password:
// scheme://user:password@host.
var urlPassword = lazyRegexp(`[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]+:[^/\s@]+@`)

func hasURLPassword(s string) bool {
	return strings.Contains(s, "://") && urlPassword().MatchString(s)
}

// lazyRegexp compiles a pattern on first use. Every container start scans its
// labels, and almost no label gets past the literal pre-checks above, so
// compiling every pattern at package init would cost each start for nothing.
func lazyRegexp(pattern string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(pattern) })
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// assignWords are the words that, ending a key's part, make "key=value" or
// "key: value" a secret assignment: db_password=, dbPassword=, api-token:.
// A part must end with the word, so tokenizer=bert is not an assignment.
var assignWords = []string{
	"password", "passwd", "pwd", "passphrase", "secret", "token",
	"apikey", "accesskey", "secretkey", "privatekey",
	"credential", "credentials", "authorization",
}

// assignExact are words that count only as a whole part (pass=..., but not
// bypass=...).
var assignExact = map[string]bool{"pass": true}

// hasAssignment reports a key that names a secret, followed by '=' or ':'
// and a value that is not empty.
func hasAssignment(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != '=' && s[i] != ':' {
			continue
		}
		if !hasValueAfter(s[i+1:]) {
			continue
		}
		if secretKey(keyBefore(s[:i])) {
			return true
		}
	}
	return false
}

// hasValueAfter reports whether a value follows an assignment's operator:
// something other than blanks, quotes or another operator.
func hasValueAfter(s string) bool {
	s = strings.TrimLeft(s, " \t\"'")
	return s != "" && s[0] != '=' && s[0] != ':' && s[0] != '\n' && s[0] != '\r'
}

// keyBefore returns the key that ends s: the word characters before the
// operator, after skipping blanks and quotes.
func keyBefore(s string) string {
	s = strings.TrimRight(s, " \t\"'")
	i := len(s)
	for i > 0 && isKeyByte(s[i-1]) {
		i--
	}
	return s[i:]
}

func isKeyByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || isDigit(c) || c == '_' || c == '-' || c == '.'
}

// secretKey reports whether key's last part names a secret, or any part
// does: db_password, dbPassword, api-key, x.auth_token.
func secretKey(key string) bool {
	if key == "" {
		return false
	}
	parts := strings.FieldsFunc(strings.ToLower(key), func(r rune) bool {
		return r == '_' || r == '-' || r == '.'
	})
	for i, p := range parts {
		if assignExact[p] {
			return true
		}
		for _, w := range assignWords {
			if strings.HasSuffix(p, w) {
				return true
			}
		}
		if i > 0 && secretPairs[[2]string{parts[i-1], p}] {
			return true
		}
	}
	return false
}
