package entrypoint

// Black-box tests of the monitor URL: one that can never work, and one
// with a path and a query.

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// A monitor URL that can never work costs no retry: one warning, the
// registration spooled at once, and a later flush with a good URL sends it.
func TestUnworkableMonitorURL(t *testing.T) {
	m := newRegMonitor(t, "201")
	for _, c := range []struct{ name, url, rule string }{
		{"bad scheme", "ftp://monitor", `scheme \"ftp\" is not http or https`},
		{"no scheme", "monitor:8080", "is not http or https"},
		{"no host", "http://:8080/api", "no host"},
		{"bad port", "http://monitor:99999", `port \"99999\" is not 1 to 65535`},
		{"control character", "http://monitor\x01/api", "control character at byte 14"},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := regTask(t, c.url, 5*time.Second)
			k.Setenv("PADDLE_TASK_ID", "bad-url-1")
			r := k.Run()
			if r.Code != 0 || r.Elapsed > 2*time.Second {
				t.Fatalf("exit %d after %v; want 0 at once\n%s", r.Code, r.Elapsed, r.Stderr)
			}
			warnings := 0
			for _, line := range strings.Split(r.Stderr, "\n") {
				if strings.Contains(line, "level=ERROR") {
					t.Errorf("a URL that cannot work is the task's setting: a warning, not an error: %s", line)
				}
				if strings.Contains(line, "level=WARN") {
					warnings++
					if !strings.Contains(line, "PADDLE_MONITOR_URL") || !strings.Contains(line, c.rule) {
						t.Errorf("warning does not name the variable and the rule %q: %s", c.rule, line)
					}
				}
			}
			if warnings != 1 || !strings.Contains(r.Stderr, "outcome=spooled attempts=1") {
				t.Errorf("want one warning and the registration spooled after one attempt:\n%s", r.Stderr)
			}
			wantStats(t, k, 1, 0)
			k.Setenv("PADDLE_MONITOR_URL", m.URL)
			if r := spoolRun(k, "flush"); r.Code != 0 {
				t.Fatalf("flush: exit %d\n%s", r.Code, r.Stderr)
			}
			wantStats(t, k, 0, 0)
		})
	}
	if got, want := strings.Join(m.Delivered(), " "), strings.TrimSpace(strings.Repeat("bad-url-1 ", 5)); got != want {
		t.Errorf("delivered %q, want bad-url-1 five times", got)
	}
	k := newTask(t, "spool", "flush")
	k.Setenv("PADDLE_MONITOR_URL", "http://:8080")
	if r := k.Run(); r.Code != 2 || !strings.Contains(r.Stderr, "spool flush: monitor URL (PADDLE_MONITOR_URL) cannot work: no host") {
		t.Errorf("spool flush with a URL that cannot work: exit %d, want a usage error\n%s", r.Code, r.Stderr)
	}
	r := newTask(t, "--monitor-url", "ftp://monitor", "/bin/true").Run()
	if r.Code != 2 || !strings.Contains(r.Stderr, "--monitor-url") {
		t.Errorf("--monitor-url ftp://monitor: exit %d, want a usage error\n%s", r.Code, r.Stderr)
	}
}

// A base URL with a path and a query keeps both around the API path.
func TestMonitorURLWithPathAndQuery(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.RequestURI())
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()
	for _, c := range []struct{ base, want string }{
		{"/api?x=1", "POST /api/v1/task/register?x=1"},
		{"/api/?x=1&y=a%20b", "POST /api/v1/task/register?x=1&y=a%20b"},
		{"/", "POST /v1/task/register"},
		{"/monitor/v2", "POST /monitor/v2/v1/task/register"},
	} {
		mu.Lock()
		got = nil
		mu.Unlock()
		r := regTask(t, srv.URL+c.base, 5*time.Second).Run()
		mu.Lock()
		if r.Code != 0 || len(got) != 1 || got[0] != c.want {
			t.Errorf("base %q: exit %d, requests %q; want %q\n%s", c.base, r.Code, got, c.want, r.Stderr)
		}
		mu.Unlock()
	}
}
