package sensitive

import (
	"strings"
	"testing"
	"time"
	"unicode"
)

// Published test numbers and the standard's own examples, so the detectors
// are checked against values computed by someone else.
const (
	// GB 11643-1999's example of an 18-character number ending in X.
	idWithX = "11010519491231002X"
	// A valid 18-digit number: province 11, born 1990-03-07, check digit 4.
	id18 = "110101199003074514"
	// The 15-digit form: province 11, born 1949-12-31.
	id15 = "110105491231002"
)

func TestSensitiveScanFinds(t *testing.T) {
	tests := []struct {
		name, value string
		want        Kind
	}{
		{"id 18 digits", id18, KindIdentity},
		{"id ending in X", idWithX, KindIdentity},
		{"id ending in lower-case x", strings.ToLower(idWithX), KindIdentity},
		{"id embedded in a name", "run-" + id18 + "-x", KindIdentity},
		{"id after letters", "id" + id18, KindIdentity},
		{"id with X followed by letters", idWithX + "abc", KindIdentity},
		{"id printed 6-8-4", "110101 19900307 4514", KindIdentity},
		{"id printed with hyphens", "p-110105-19491231-002X", KindIdentity},
		{"id in full-width digits", "１１０１０１１９９００３０７４５１４", KindIdentity},
		{"id in Arabic-Indic digits", "١١٠١٠١١٩٩٠٠٣٠٧٤٥١٤", KindIdentity},
		{"id of a Hong Kong resident's permit", "810000199408230021", KindIdentity},
		{"id 15 digits", id15, KindIdentity},
		{"id 15 digits embedded", "u_" + id15 + "_x", KindIdentity},
		{"visa 16", "4111111111111111", KindCard},
		{"visa 13", "4222222222222", KindCard},
		{"visa embedded", "card-4111111111111111-x", KindCard},
		{"mastercard", "5555555555554444", KindCard},
		{"mastercard 2-series", "2223003122003222", KindCard},
		{"amex", "378282246310005", KindCard},
		{"amex 34", "371449635398431", KindCard},
		{"discover", "6011111111111117", KindCard},
		{"discover 65", "6500000000000002", KindCard},
		{"unionpay", "6200000000000005", KindCard},
		{"unionpay 19", "6212345678901232", KindCard},
		{"jcb", "3530111333300000", KindCard},
		{"diners 14", "30569309025904", KindCard},
		{"diners 16", "3056930009020004", KindCard},
		{"diners 36", "36227206271667", KindCard},
		{"maestro", "6759649826438453", KindCard},
		{"card with spaces", "4111 1111 1111 1111", KindCard},
		{"card with hyphens", "pay-4111-1111-1111-1111", KindCard},
		{"card with underscores", "pay_4111_1111_1111_1111", KindCard},
		{"card with dots", "4111.1111.1111.1111", KindCard},
		{"identity with underscores", "110101_19900307_4514", KindIdentity},
		{"identity with dots", "id.110101.19900307.4514", KindIdentity},
		{"amex printed 4-6-5", "3782 822463 10005", KindCard},
		{"card in full-width digits", "４１１１１１１１１１１１１１１１", KindCard},
		{"password assignment", "password=hunter2", KindAssignment},
		{"password with colon", "Password: hunter2", KindAssignment},
		{"secret colon", "secret:abc", KindAssignment},
		{"token equals", "token=abc", KindAssignment},
		{"passwd", "passwd=x", KindAssignment},
		{"pwd", "pwd=x", KindAssignment},
		{"api_key", "api_key=x", KindAssignment},
		{"apikey in camel case", "myApiKey=x", KindAssignment},
		{"db_password", "DB_PASSWORD=x", KindAssignment},
		{"access token", "access_token = 'abc'", KindAssignment},
		{"token in a query string", "https://h/x?token=abc", KindAssignment},
		{"full-width equals", "password＝x", KindAssignment},
		{"pass exact", "pass=x", KindAssignment},
		{"url with password", "https://user:s3cr3t@example.com/x", KindURLPassword},
		{"pem rsa", "-----BEGIN RSA PRIVATE KEY-----", KindPrivateKey},
		{"pem pkcs8", "-----BEGIN PRIVATE KEY-----\nMIIE", KindPrivateKey},
		{"openssh", "-----BEGIN OPENSSH PRIVATE KEY-----", KindPrivateKey},
		{"encrypted", "BEGIN ENCRYPTED PRIVATE KEY", KindPrivateKey},
		{"pgp", "-----BEGIN PGP PRIVATE KEY BLOCK-----", KindPrivateKey},
		{"header with underscores", "x_begin_ec_private_key", KindPrivateKey},
		{"putty", "PuTTY-User-Key-File-3: ssh-ed25519", KindPrivateKey},
		{"jwt", "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U", KindJWT},
		{"jwt alg none", "eyJhbGciOiJub25lIn0.eyJzdWIiOiIxIn0.", KindJWT},
		{"jwt embedded", "tok-eyJhbGciOiJub25lIn0.e30.sig", KindJWT},
		{"aws long-term", "AKIAIOSFODNN7EXAMPLE", KindCloudKey},
		{"aws temporary", "key-ASIAY34FZKBOKMUTVV7A", KindCloudKey},
		{"alibaba", "LTAI5tQ8n9xJkVb2YpWm", KindCloudKey},
		{"gcp", "AIzaSyDaGmWKa4JsXZ-HjGw7ISLn_3namBGewQe", KindCloudKey},
		{"tencent", "AKIDz8krbsJ5yKBZQpn74WFkmLPx3EXAMPLE", KindCloudKey},
		{"github", "ghp_16C7e42F292c6912E7710c838347Ae178B4a", KindAPIToken},
		{"hugging face", "hf_AbCdEfGhIjKlMnOpQrStUvWxYzAbCdEfGh", KindAPIToken},
		{"slack", "xoxb-123456789012-abcdefghij", KindAPIToken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Scan(tt.value)
			if !ok || got != tt.want {
				t.Errorf("Scan(%q) = %q, %v; want %q", tt.value, got, ok, tt.want)
			}
		})
	}
}

// Near misses: one thing wrong each, so each proof a detector asks for is
// shown to be needed.
func TestSensitiveScanNearMisses(t *testing.T) {
	tests := []struct{ name, value string }{
		{"id wrong check digit", "110101199003074513"},
		{"id X where a digit is due", "11010119900307451X"},
		{"id impossible date 1990-02-30", withCheck("11010119900230001")},
		{"id month 13", withCheck("11010119901301001")},
		{"id born before 1900", withCheck("11010118991231001")},
		{"id born in the future", withCheck("11010139991231001")},
		{"id invalid province 99", withCheck("99010119900307451")},
		{"id invalid province 00", withCheck("00010119900307451")},
		{"id inside a longer run", "9" + id18},
		{"id inside a longer run after", id18 + "7"},
		{"id printed 6-8-4 with a wrong check digit", "110101 19900307 4513"},
		{"id 15 impossible date", "110105490230002"},
		{"id 15 invalid province", "990105491231002"},
		{"id 15 inside 16 digits", "1" + id15},
		{"card luhn invalid", "4111111111111112"},
		{"card no network prefix", "1111111111111117"},
		{"card prefix with a wrong length", "41111111111111"},    // Visa is 13, 16 or 19 digits
		{"mastercard with 15 digits", "555555555555449"},         // Luhn-valid, but Mastercard is 16
		{"card too short", "411111111111"},                       // 12 digits
		{"card too long", "41111111111111111111"},                // 20 digits
		{"card groups of two", "41-11-11-11-11-11-11-11"},        // not a printed card form
		{"card groups mixing separators", "4111-1111 1111-1111"}, // not one printed form
		{"unix milliseconds", "run-1732950000007"},
		{"unix nanoseconds", "job-1732950000123456789"},
		{"tokenizer", "tokenizer=bert"},
		{"secretary", "secretary=alice"},
		{"bypass", "bypass=1"},
		{"password without a value", "password="},
		{"password as a word", "password-reset-service"},
		{"url without password", "https://user@example.com/x"},
		{"url with a port", "https://example.com:8443/x"},
		{"public key", "-----BEGIN PUBLIC KEY-----"},
		{"certificate", "-----BEGIN CERTIFICATE-----"},
		{"jwt-like without alg", "eyJ0eXAiOiJKV1QifQ.eyJzdWIiOiIxIn0.sig"},
		{"eyJ alone", "eyJhbGciOiJub25lIn0"},
		{"aws prefix too short", "AKIAIOSFODNN7EXAMP"},
		{"aws lower case", "akiaiosfodnn7example"},
		{"sk- inside a word", "task-0123456789abcdef0123456789abcdef"},
		{"hf_ inside a word", "graphhf_AbCdEfGhIjKlMnOpQrStUvWxYzAbCdEfGh"},
		{"uuid", "3f2b8c1e-9d4a-4f6b-8e2c-1a2b3c4d5e6f"},
		{"all-digit uuid", "12345678-1234-4234-8234-123456789012"},
		{"git sha-1", "0a1b2c3d4e5f60718293a4b5c6d7e8f901234567"},
		{"sha-1 holding a luhn-valid visa run", "ab4111111111111111cdef0123456789abcdef01"},
		{"empty", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if k, ok := Scan(tt.value); ok {
				t.Errorf("Scan(%q) = %q; want nothing found", tt.value, k)
			}
		})
	}
}

// withCheck appends the GB 11643 check character to 17 digits, computed here
// independently of the package (weights 2^(17-i) mod 11), so near misses
// differ from a valid number in exactly one respect.
func withCheck(d17 string) string {
	sum := 0
	w := 1
	for i := 16; i >= 0; i-- {
		w = w * 2 % 11
		sum += int(d17[i]-'0') * w
	}
	return d17 + string("10X98765432"[sum%11])
}

func TestSensitiveWithCheckAgreesWithTheStandard(t *testing.T) {
	for _, id := range []string{idWithX, id18, "440524188001010014"} {
		if got := withCheck(id[:17]); got != id {
			t.Errorf("withCheck(%q) = %q; want %q", id[:17], got, id)
		}
	}
}

func TestSensitiveSecretName(t *testing.T) {
	tests := []struct {
		key  string
		want bool
	}{
		{"db_password", true},
		{"password", true},
		{"passwd", true},
		{"pwd", true},
		{"secret", true},
		{"client_secret", true},
		{"github_token", true},
		{"token", true},
		{"apikey", true},
		{"api_key", true},
		{"openai_api_key", true},
		{"private_key", true},
		{"private_key_path", true},
		{"credential", true},
		{"aws_credentials", true},
		{"access_key", true},
		{"DB_PASSWORD", true},
		{"db-password", true},
		{"tokenizer", false},
		{"secretary", false},
		{"keyword", false},
		{"api", false},
		{"key", false},
		{"private", false},
		{"key_api", false},
		{"cost_center", false},
		{"passwords_policy_version", false},
		{"tokens", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := SecretName(tt.key); got != tt.want {
			t.Errorf("SecretName(%q) = %v; want %v", tt.key, got, tt.want)
		}
	}
}

// TestSensitiveDigitValue checks digitValue's assumption against Unicode's
// table: every decimal digit set is ten consecutive code points, so each
// Nd rune's value is its offset from its range's start modulo ten, and the
// value agrees with the digit's position in its set.
func TestSensitiveDigitValue(t *testing.T) {
	n := 0
	for r := rune(0x80); r <= unicode.MaxRune; r++ {
		if !unicode.Is(unicode.Nd, r) {
			continue
		}
		n++
		// The zero of r's set is r-v; it and the nine after it are all Nd.
		v := digitValue(r)
		zero := r - rune(v)
		for k := rune(0); k < 10; k++ {
			if !unicode.Is(unicode.Nd, zero+k) || digitValue(zero+k) != int(k) {
				t.Fatalf("U+%04X: value %d, but its set from U+%04X is not ten digits 0-9", r, v, zero)
			}
		}
	}
	if n < 600 {
		t.Fatalf("only %d non-ASCII decimal digits checked", n)
	}
	if got := fold("x٣Ｘ"); got != "x3X" {
		t.Errorf("fold = %q; want %q", got, "x3X")
	}
}

// FuzzSensitiveScan checks that Scan never panics, gives one answer for one
// value, and that finding something never depends on what surrounds it
// with a separator: a secret stays found when it is embedded in a name.
func FuzzSensitiveScan(f *testing.F) {
	for _, s := range []string{id18, idWithX, id15, "4111111111111111", "password=x",
		"eyJhbGciOiJub25lIn0.e30.", "AKIAIOSFODNN7EXAMPLE", "run-1732950000007", "", "１２３"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k1, ok1 := Scan(s)
		k2, ok2 := Scan(s)
		if k1 != k2 || ok1 != ok2 {
			t.Fatalf("Scan(%q) not deterministic", s)
		}
		if ok1 && k1 == "" || !ok1 && k1 != "" {
			t.Fatalf("Scan(%q) = %q, %v", s, k1, ok1)
		}
		if ok1 && k1 != KindAssignment && k1 != KindAPIToken && k1 != KindURLPassword {
			// Detectors that need no word boundary keep firing inside a
			// longer name.
			if k, ok := Scan("run-" + s + "-x"); !ok {
				t.Fatalf("Scan(%q) = %q, but Scan of it embedded found nothing (%q)", s, k1, k)
			}
		}
	})
}

// TestSensitiveScanLinear feeds the worst shapes for each detector at the
// largest size an environment string can have (128 KiB) and bounds the
// time generously: a quadratic detector would take minutes here.
func TestSensitiveScanLinear(t *testing.T) {
	const size = 128 << 10
	shapes := map[string]string{
		"digits and hex letters": strings.Repeat("1a", size/2),
		"digit groups":           strings.Repeat("1234-", size/5),
		"operators":              strings.Repeat("a=", size/2),
		"blanks and operators":   strings.Repeat(" =", size/2),
		"long key":               strings.Repeat("x", size) + "=y",
		"jwt-like":               strings.Repeat("eyJ.", size/4),
		"all digits":             strings.Repeat("7", size),
	}
	for name, s := range shapes {
		done := make(chan struct{})
		go func() { Scan(s); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: Scan of %d bytes took over 10s", name, len(s))
		}
	}
}

// BenchmarkSensitiveScan measures the cost per label value on a start: the
// values a typical task sets, one of them sensitive.
func BenchmarkSensitiveScan(b *testing.B) {
	values := []string{"resnet50-run-1732950000007", "search_ranking", "alice@example.com",
		"3f2b8c1e-9d4a-4f6b-8e2c-1a2b3c4d5e6f", "cc-1024", "high", "7200", id18}
	for b.Loop() {
		for _, v := range values {
			Scan(v)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(values)), "ns/value")
}
