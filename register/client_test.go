package register

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/deliver"
)

func TestClientHeaders(t *testing.T) {
	m := newMonitor(t, "200")
	tokenFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokenFile, []byte("  s3cret-token\n"), 0o600)
	c := newTestClient(t, m.URL+"/", func(c *deliver.ClientConfig) { c.TokenFile = tokenFile })
	if err := c.Post(context.Background(), Path, "task-42", []byte(testBody)); err != nil {
		t.Fatalf("Send: %v", err)
	}
	req := m.Requests()[0]
	want := map[string]string{
		"Content-Type":    "application/json",
		"Idempotency-Key": "task-42",
		"User-Agent":      "paddle-entrypoint/test",
		"Authorization":   "Bearer s3cret-token",
	}
	for k, v := range want {
		if got := req.Header.Get(k); got != v {
			t.Errorf("%s: %q, want %q", k, got, v)
		}
	}
}

// The token file is read at every attempt: a rotated token is used at the
// next one, a vanished file means no Authorization header (warned once), and
// a token a header cannot carry makes the attempt fail as unusable (the
// registration is spooled, not sent without it).
func TestClientTokenRotation(t *testing.T) {
	m := newMonitor(t, "200")
	tokenFile := filepath.Join(t.TempDir(), "token")
	var logs syncBuffer
	c := newTestClient(t, m.URL, func(c *deliver.ClientConfig) { c.TokenFile = tokenFile; c.Logger = testLogger(&logs) })
	steps := []struct {
		content string // "" removes the file
		want    string // "-": no request is sent
	}{
		{"first", "Bearer first"},
		{"second\n", "Bearer second"},
		{"", ""},
		{"", ""},
		{"third", "Bearer third"},
		{"with\nnewline", "-"},
	}
	sent := 0
	for i, s := range steps {
		if s.content == "" {
			os.Remove(tokenFile)
		} else {
			os.WriteFile(tokenFile, []byte(s.content), 0o600)
		}
		err := c.Post(context.Background(), Path, "t", []byte("{}"))
		if s.want == "-" {
			if !errors.Is(err, deliver.ErrClientUnusable) {
				t.Errorf("attempt %d: error %v, want deliver.ErrClientUnusable", i+1, err)
			}
			if n := len(m.Requests()); n != sent {
				t.Errorf("attempt %d: %d requests, want %d", i+1, n, sent)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		sent++
		if got := m.Requests()[i].Header.Get("Authorization"); got != s.want {
			t.Errorf("attempt %d: Authorization %q, want %q", i+1, got, s.want)
		}
	}
	if n := strings.Count(logs.String(), "token file not found"); n != 1 {
		t.Errorf("%d warnings about the missing token file, want 1:\n%s", n, logs.String())
	}
	for _, tok := range []string{"first", "second", "third"} {
		if strings.Contains(logs.String(), tok) {
			t.Errorf("token %q in the log", tok)
		}
	}
}

// An answer that echoes the token is redacted before it is kept anywhere.
func TestClientRedactsEchoedToken(t *testing.T) {
	m := newMonitor(t, "echo-auth 400")
	tokenFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokenFile, []byte("tok-XYZ-987"), 0o600)
	q := newFakeQueue()
	var logs syncBuffer
	r := &Registrar{Client: newTestClient(t, m.URL, func(c *deliver.ClientConfig) { c.TokenFile = tokenFile }), Queue: q, Logger: testLogger(&logs)}
	if got := r.Register(context.Background(), "t", []byte("{}")); got != Dead {
		t.Fatalf("outcome %v, want dead", got)
	}
	dead := q.Dead()
	if len(dead) != 1 {
		t.Fatalf("%d dead letters", len(dead))
	}
	for what, text := range map[string]string{"answer": dead[0].Answer, "last error": dead[0].LastError, "log": logs.String()} {
		if strings.Contains(text, "tok-XYZ-987") {
			t.Errorf("token in the %s: %q", what, text)
		}
	}
	if !strings.Contains(dead[0].Answer, "[REDACTED]") || !strings.Contains(dead[0].Answer, "400") {
		t.Errorf("answer %q should keep the status and show the redaction", dead[0].Answer)
	}
}

func TestAnswerClasses(t *testing.T) {
	tests := []struct {
		status int
		want   deliver.Class
	}{
		{200, deliver.Sent}, {201, deliver.Sent}, {202, deliver.Sent}, {204, deliver.Sent}, {409, deliver.Sent},
		{408, deliver.Retryable}, {429, deliver.Retryable}, {500, deliver.Retryable}, {502, deliver.Retryable}, {503, deliver.Retryable}, {504, deliver.Retryable}, {599, deliver.Retryable},
		{400, deliver.Refused}, {401, deliver.Refused}, {403, deliver.Refused}, {404, deliver.Refused}, {413, deliver.Refused}, {422, deliver.Refused},
		{501, deliver.Refused}, {301, deliver.Refused}, {307, deliver.Refused},
	}
	for _, tt := range tests {
		t.Run(http.StatusText(tt.status), func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Location", "/elsewhere")
				w.WriteHeader(tt.status)
			}))
			defer srv.Close()
			err := newTestClient(t, srv.URL).Post(context.Background(), Path, "t", []byte("{}"))
			if got := deliver.Classify(err); got != tt.want {
				t.Errorf("%d: deliver.Class %v (err %v), want %v", tt.status, got, err, tt.want)
			}
			var ae *deliver.AnswerError
			if err != nil && (!errors.As(err, &ae) || ae.Status != tt.status) {
				t.Errorf("%d: error %v is not an deliver.AnswerError with the status", tt.status, err)
			}
		})
	}
}

// Network failures are worth a retry: refused, reset, closed mid-answer,
// and a monitor that never answers (the attempt's timeout).
func TestNetworkErrorsRetry(t *testing.T) {
	refused := func(t *testing.T) string {
		l, _ := net.Listen("tcp", "127.0.0.1:0")
		l.Close()
		return "http://" + l.Addr().String()
	}
	reset := func(t *testing.T) string {
		l, _ := net.Listen("tcp", "127.0.0.1:0")
		t.Cleanup(func() { l.Close() })
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				c.(*net.TCPConn).SetLinger(0)
				c.Read(make([]byte, 512))
				c.Close()
			}
		}()
		return "http://" + l.Addr().String()
	}
	hang := func(t *testing.T) string { return newMonitor(t, "hang").URL }
	for name, url := range map[string]func(*testing.T) string{"refused": refused, "reset": reset, "hang": hang} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			err := newTestClient(t, url(t)).Post(ctx, Path, "t", []byte("{}"))
			if err == nil || deliver.Classify(err) != deliver.Retryable {
				t.Errorf("error %v: deliver.Class %v, want deliver.Retryable", err, deliver.Classify(err))
			}
		})
	}
}

// writeCA writes cert as a PEM file and returns its path.
func writeCA(t *testing.T, cert *x509.Certificate) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// otherCA returns a self-signed CA certificate that signed nothing we serve.
func otherCA(t *testing.T) *x509.Certificate {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "not the monitor's CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return cert
}

func TestClientTLS(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // failed handshakes are the point
	srv.StartTLS()
	defer srv.Close()
	garbage := filepath.Join(t.TempDir(), "garbage.pem")
	os.WriteFile(garbage, []byte("not a certificate"), 0o644)
	tests := []struct {
		name    string
		caFile  string
		newErr  bool
		wantCls deliver.Class
	}{
		{"monitor's CA in the CA file", writeCA(t, srv.Certificate()), false, deliver.Sent},
		{"no CA file: system roots only", "", false, deliver.Retryable},
		{"wrong CA", writeCA(t, otherCA(t)), false, deliver.Retryable},
		{"missing CA file", filepath.Join(t.TempDir(), "absent.pem"), true, deliver.Unusable},
		{"CA file without a certificate", garbage, true, deliver.Unusable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := deliver.NewClient(deliver.ClientConfig{URL: srv.URL, CAFile: tt.caFile, UserAgent: "x"})
			if (err != nil) != tt.newErr {
				t.Fatalf("deliver.NewClient error %v, want error: %v", err, tt.newErr)
			}
			if err != nil && !strings.Contains(err.Error(), "PADDLE_MONITOR_CA_FILE") {
				t.Errorf("error %q does not name the setting", err)
			}
			err = c.Post(context.Background(), Path, "t", []byte("{}"))
			if got := deliver.Classify(err); got != tt.wantCls {
				t.Errorf("Send: %v, deliver.Class %v, want %v", err, got, tt.wantCls)
			}
			var verr *tls.CertificateVerificationError
			if tt.wantCls == deliver.Retryable && !errors.As(err, &verr) {
				t.Errorf("Send: %v, want a certificate verification error", err)
			}
		})
	}
}

// A client whose CA file is deliver.Unusable spools at once and makes no further
// try: it would fail the same way, and verification is never skipped.
func TestRegistrarUnusableClient(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Error("a request reached the monitor without the CA")
	}))
	defer srv.Close()
	c, err := deliver.NewClient(deliver.ClientConfig{URL: srv.URL, CAFile: filepath.Join(t.TempDir(), "absent.pem")})
	if err == nil {
		t.Fatal("no error for a missing CA file")
	}
	q := newFakeQueue()
	r := &Registrar{Client: c, Queue: q}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	if got := r.Register(ctx, "t", []byte("{}")); got != Spooled {
		t.Errorf("outcome %v, want spooled", got)
	}
	if el := time.Since(start); el > 200*time.Millisecond {
		t.Errorf("took %v: retried a client that cannot send", el)
	}
	if len(q.Pending()) != 1 {
		t.Errorf("%d pending, want 1", len(q.Pending()))
	}
}
