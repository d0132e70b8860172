package entrypoint

// Black-box tests of what the logs may hold: no secret of a URL or an
// answer, nothing unprefixed from the standard library, no key a label
// could forge (docs/security.md, Secrets in URLs, answers and logs).

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The monitor URL's userinfo is never printed or stored: not in a warning
// about a malformed setting (a trailing newline from a Secret), not in a
// usage error, not in a spool entry's last_error, not in flush's output.
func TestURLUserinfoRedacted(t *testing.T) {
	const pw = "s3cretPassw0rd"
	down := strings.Replace(regDownURL(t), "http://", "http://alice:"+pw+"@", 1)
	check := func(t *testing.T, what, text string) {
		t.Helper()
		if strings.Contains(text, pw) || strings.Contains(text, "alice") {
			t.Errorf("%s holds the URL's userinfo:\n%s", what, text)
		}
	}
	t.Run("trailing newline", func(t *testing.T) {
		k := regTask(t, down+"\n", time.Second)
		r := k.Run()
		check(t, "stderr", r.Stderr)
		if !strings.Contains(r.Stderr, "PADDLE_MONITOR_URL") {
			t.Errorf("the warning does not name the variable:\n%s", r.Stderr)
		}
	})
	t.Run("htp scheme", func(t *testing.T) {
		k := regTask(t, strings.Replace(down, "http://", "htp://", 1), time.Second)
		r := k.Run()
		check(t, "stderr", r.Stderr)
	})
	t.Run("usage error", func(t *testing.T) {
		k := newTask(t, "--monitor-url", strings.Replace(down, "http://", "htp://", 1), "/bin/true")
		r := k.Run()
		if r.Code != 2 {
			t.Errorf("exit %d, want 2", r.Code)
		}
		check(t, "stderr", r.Stderr)
	})
	t.Run("spool and flush", func(t *testing.T) {
		k := regTask(t, down, 500*time.Millisecond)
		k.Setenv("PADDLE_ENTRYPOINT_LOG", "debug")
		r := k.Run()
		check(t, "start's stderr", r.Stderr)
		l := spoolRun(k, "list")
		if !strings.Contains(l.Stdout, "last_error") {
			t.Fatalf("no pending entry with a last_error: %q", l.Stdout)
		}
		check(t, "spool list", l.Stdout)
		f := spoolRun(k, "flush")
		check(t, "flush stdout", f.Stdout)
		check(t, "flush stderr", f.Stderr)
		check(t, "spool list after flush", spoolRun(k, "list").Stdout)
	})
}

// A monitor answer that echoes the token is redacted before it is cut, and
// any long fragment of the token counts as the token.
func TestTokenEchoCut(t *testing.T) {
	tok := strings.Repeat("Zq7vK2mXp9", 60) // 600 characters
	m := newRegMonitor(t, "echo-auth 400")
	k := regTask(t, m.URL, 2*time.Second)
	tf := filepath.Join(k.Dir, "token")
	os.WriteFile(tf, []byte(tok+"\n"), 0o600)
	k.Setenv("PADDLE_MONITOR_TOKEN_FILE", tf)
	k.Setenv("PADDLE_ENTRYPOINT_LOG", "debug")
	r := k.Run()
	if r.Code != 0 {
		t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
	}
	dead := spoolRun(k, "list", "--dead")
	if !strings.Contains(dead.Stdout, "REDACTED") {
		t.Errorf("dead letter does not show the redaction: %q", dead.Stdout)
	}
	for what, text := range map[string]string{"stderr": r.Stderr, "dead letter": dead.Stdout} {
		if strings.Contains(text, tok[:12]) || strings.Contains(text, tok[len(tok)-12:]) {
			t.Errorf("%s holds part of the token:\n%s", what, text)
		}
	}
}

// net/http's own log lines ("Unsolicited response received on idle HTTP
// channel") go through the structured logger: every stderr line is JSON.
func TestNetHTTPLogRouted(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				br := bufio.NewReader(conn)
				for {
					if _, err := readRequest(br); err != nil {
						return
					}
					io.WriteString(conn, "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\nHTTP/1.1 200 OK\r\n\r\n")
				}
			}()
		}
	}()
	k := regTask(t, "http://"+l.Addr().String(), time.Second)
	k.Setenv("PADDLE_ENTRYPOINT_LOG_FORMAT", "json")
	r := k.Run()
	if r.Code != 0 {
		t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
	}
	unsolicited := false
	for _, line := range strings.Split(strings.TrimSpace(r.Stderr), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("stderr line is not JSON: %q", line)
			continue
		}
		if rec["logger"] != "paddle-entrypoint" {
			t.Errorf("record without our logger field: %q", line)
		}
		unsolicited = unsolicited || strings.Contains(line, "Unsolicited")
	}
	if !unsolicited {
		t.Logf("net/http did not complain this time:\n%s", r.Stderr)
	}
}

// readRequest reads one HTTP request (headers and a Content-Length body).
func readRequest(br *bufio.Reader) (string, error) {
	var head strings.Builder
	n := 0
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return "", err
		}
		head.WriteString(line)
		if k, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(k, "Content-Length") {
			fmt.Sscan(strings.TrimSpace(v), &n)
		}
		if line == "\r\n" {
			break
		}
	}
	_, err := io.CopyN(io.Discard, br, int64(n))
	return head.String(), err
}

// Labels cannot forge the record's own keys: in JSON they sit in a
// "labels" group, in text behind a "labels." prefix.
func TestLabelsCannotForgeLogKeys(t *testing.T) {
	for _, format := range []string{"json", "text"} {
		t.Run(format, func(t *testing.T) {
			k := newTask(t, "/bin/true")
			k.Setenv("PADDLE_ENTRYPOINT_LOG_FORMAT", format)
			k.Setenv("PADDLE_LABEL_LEVEL", "error")
			k.Setenv("PADDLE_LABEL_LOGGER", "training")
			k.Setenv("PADDLE_LABEL_MSG", "forged")
			k.Setenv("PADDLE_LABEL_TIME", "yesterday")
			r := k.Run()
			if r.Code != 0 {
				t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
			}
			found := false
			for _, line := range strings.Split(strings.TrimSpace(r.Stderr), "\n") {
				if format == "text" {
					if strings.Contains(line, "task labels") {
						found = true
						for _, forged := range []string{" level=error", " logger=training", " msg=forged", " time=yesterday"} {
							if strings.Contains(line, forged) {
								t.Errorf("label forged %q: %s", forged, line)
							}
						}
						if !strings.Contains(line, "labels.level=error") {
							t.Errorf("label not logged under labels.: %s", line)
						}
					}
					continue
				}
				var rec map[string]any
				if err := json.Unmarshal([]byte(line), &rec); err != nil {
					t.Fatalf("not JSON: %q", line)
				}
				if rec["msg"] != "task labels" {
					continue
				}
				found = true
				if rec["level"] != "INFO" || rec["logger"] != "paddle-entrypoint" {
					t.Errorf("record keys forged: %s", line)
				}
				if lb, _ := rec["labels"].(map[string]any); lb["level"] != "error" || lb["msg"] != "forged" {
					t.Errorf("labels group %v", rec["labels"])
				}
			}
			if !found {
				t.Errorf("no task labels line:\n%s", r.Stderr)
			}
		})
	}
}
