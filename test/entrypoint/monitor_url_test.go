package entrypoint

// Black-box tests of what a platform engineer tries first: --version and
// --help, a script without a "#!" line, a monitor URL that can never work or
// that has a path and a query, and starts during a monitor outage.

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}, {"-v"}, {"--version", "python", "x"}} {
		r := newTask(t, args...).Run()
		if r.Code != 0 || r.Stdout != "paddle-entrypoint version dev\n" || r.Stderr != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 0 and \"paddle-entrypoint version dev\\n\"", args, r.Code, r.Stdout, r.Stderr)
		}
	}
	r := newTask(t, "version", "extra").Run()
	if r.Code != 2 || r.Stdout != "" || !strings.Contains(r.Stderr, `version takes no argument, got "extra"`) {
		t.Errorf("version extra: exit %d, stdout %q, stderr %q; want a usage error (2)", r.Code, r.Stdout, r.Stderr)
	}
}

func TestHelpShowsFlagTypes(t *testing.T) {
	r := newTask(t, "--help").Run()
	for _, want := range []string{
		"--register-budget duration", "--gpu-timeout duration", "--outage-hold duration",
		"--spool-max int", "(env PADDLE_REGISTER_BUDGET) (default 5s)", "(env PADDLE_SPOOL_MAX) (default 10000)",
		"-v, --version",
	} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("--help lacks %q:\n%s", want, r.Stdout)
		}
	}
	if r.Code != 0 || strings.Contains(r.Stdout, "register-budget string") {
		t.Errorf("exit %d; a duration shown as a string?\n%s", r.Code, r.Stdout)
	}
}

// A script without "#!" runs through /bin/sh, as execvp and the shell
// entrypoint ran it; a binary the kernel cannot run stays 126.
func TestScriptWithoutShebang(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "train")
	if err := os.WriteFile(script, []byte("echo \"ran $0 with $1 $2, task $PADDLE_TASK_ID\"\nexit 7\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	k := newTask(t, "train", "--lr", "0.1")
	k.Setenv("PATH", dir+":/usr/bin:/bin")
	k.Setenv("PADDLE_TASK_ID", "t-sh")
	r := k.Run()
	if want := "ran " + script + " with --lr 0.1, task t-sh\n"; r.Code != 7 || r.Stdout != want {
		t.Errorf("exit %d, stdout %q; want 7 and %q\nstderr:\n%s", r.Code, r.Stdout, want, r.Stderr)
	}

	binary := filepath.Join(dir, "foreign")
	if err := os.WriteFile(binary, []byte("\x7fELF\x02\x01\x01\x00\x00garbage for another machine"), 0o755); err != nil {
		t.Fatal(err)
	}
	r = newTask(t, binary).Run()
	if r.Code != 126 || !strings.Contains(r.Stderr, "exec format error") {
		t.Errorf("binary: exit %d, stderr:\n%s\nwant 126 and exec format error", r.Code, r.Stderr)
	}
}

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

// Outage memory: during a monitor outage the first start spends its budget,
// the next ones within PADDLE_OUTAGE_HOLD make one short attempt and exec
// at once, nothing is lost, and the first start after the monitor comes
// back delivers (and clears the record, so the next failure gets the full
// budget again).
func TestOutageMemory(t *testing.T) {
	const budget = 2 * time.Second
	m := newRegMonitor(t, "hang")
	spoolPath := filepath.Join(t.TempDir(), "spool-1000.db")
	start := func(id string) result {
		t.Helper()
		k := regTask(t, m.URL, budget)
		k.Setenv("PADDLE_SPOOL_PATH", spoolPath)
		k.Setenv("PADDLE_TASK_ID", id)
		r := k.Run()
		if r.Code != 0 {
			t.Fatalf("%s: exit %d\n%s", id, r.Code, r.Stderr)
		}
		return r
	}
	r := start("outage-1")
	t.Logf("first start during the outage: exec after %v (budget %v)", r.Elapsed, budget)
	if r.Elapsed < budget-300*time.Millisecond || r.Elapsed > budget+regMargin {
		t.Errorf("first start: exec after %v, want about the budget %v", r.Elapsed, budget)
	}
	if !strings.Contains(r.Stderr, "monitor unreachable: starts within the hold make one short attempt") {
		t.Errorf("first start did not record the outage:\n%s", r.Stderr)
	}
	for i := 2; i <= 6; i++ {
		id := "outage-" + string(rune('0'+i))
		r := start(id)
		t.Logf("%s: exec after %v", id, r.Elapsed)
		if r.Elapsed > 900*time.Millisecond {
			t.Errorf("%s: exec after %v during a known outage, want well under a second", id, r.Elapsed)
		}
		if !strings.Contains(r.Stderr, "monitor outage known") || !strings.Contains(r.Stderr, "outcome=spooled attempts=1 ") {
			t.Errorf("%s: not one short attempt:\n%s", id, r.Stderr)
		}
	}
	k := newTask(t)
	k.Setenv("PADDLE_SPOOL_PATH", spoolPath)
	pending, _ := spoolList(t, k, false)
	if got := strings.Join(taskIDs(pending), " "); got != "outage-1 outage-2 outage-3 outage-4 outage-5 outage-6" {
		t.Errorf("pending %q, want all six starts", got)
	}

	m.SetScript("201")
	r = start("outage-7")
	if !strings.Contains(r.Stderr, "outcome=delivered") || !strings.Contains(r.Stderr, "older pending registrations sent") {
		t.Errorf("first start after recovery did not deliver:\n%s", r.Stderr)
	}
	if d := m.Delivered(); len(d) < 2 || d[0] != "outage-7" || d[1] != "outage-1" {
		t.Errorf("delivered %q, want outage-7, then the backlog oldest first", d)
	}
	// Nothing lost: what the start's backlog left (an entry attempted a
	// moment ago waits out its own backoff) the node's flush sends.
	k.Setenv("PADDLE_MONITOR_URL", m.URL)
	for deadline := time.Now().Add(30 * time.Second); spoolStats(t, k)["pending"] > 0 && time.Now().Before(deadline); {
		spoolRun(k, "flush")
		time.Sleep(100 * time.Millisecond)
	}
	delivered := map[string]bool{}
	for _, id := range m.Delivered() {
		delivered[id] = true
	}
	for i := 1; i <= 7; i++ {
		if id := "outage-" + string(rune('0'+i)); !delivered[id] {
			t.Errorf("%s never delivered (delivered %q)", id, m.Delivered())
		}
	}

	// The delivery cleared the record: a new outage gets the full budget.
	m.SetScript("503")
	r = start("outage-8")
	// Not its elapsed time: the backoff's jitter may leave a last wait that
	// does not fit, and the start then stops well before the budget.
	if strings.Contains(r.Stderr, "monitor outage known") || strings.Contains(r.Stderr, "outcome=spooled attempts=1 ") {
		t.Errorf("start after a delivery: exec after %v, still in the old outage?\n%s", r.Elapsed, r.Stderr)
	}
	if r = start("outage-9"); !strings.Contains(r.Stderr, "monitor outage known") {
		t.Errorf("503 for a whole budget did not record an outage:\n%s", r.Stderr)
	}

	// A flush that delivers clears it too.
	m.SetScript("201")
	for deadline := time.Now().Add(30 * time.Second); spoolStats(t, k)["pending"] > 0 && time.Now().Before(deadline); {
		spoolRun(k, "flush")
		time.Sleep(100 * time.Millisecond)
	}
	m.SetScript("503")
	if r = start("outage-10"); strings.Contains(r.Stderr, "monitor outage known") {
		t.Errorf("start after a flush delivered: still in the old outage\n%s", r.Stderr)
	}
}

// PADDLE_OUTAGE_HOLD=0 turns the memory off; an outage of one monitor URL
// says nothing about another.
func TestOutageMemoryOffAndPerURL(t *testing.T) {
	const budget = time.Second
	down := newRegMonitor(t, "503")
	other := newRegMonitor(t, "503")
	spoolPath := filepath.Join(t.TempDir(), "spool.db")
	start := func(url, hold string) result {
		t.Helper()
		k := regTask(t, url, budget)
		k.Setenv("PADDLE_SPOOL_PATH", spoolPath)
		k.Setenv("PADDLE_OUTAGE_HOLD", hold)
		return k.Run()
	}
	start(down.URL, "0")
	// A full-budget start, told by its attempts, not its time: the
	// backoff's jitter may leave a last wait that does not fit the budget,
	// and the start then stops well before it (as in TestOutageMemory).
	if r := start(down.URL, "0"); strings.Contains(r.Stderr, "outage") || strings.Contains(r.Stderr, "outcome=spooled attempts=1 ") ||
		!strings.Contains(r.Stderr, "outcome=spooled attempts=") {
		t.Errorf("PADDLE_OUTAGE_HOLD=0: exec after %v, not a full-budget start\n%s", r.Elapsed, r.Stderr)
	}
	start(down.URL, "60s")
	if r := start(other.URL, "60s"); strings.Contains(r.Stderr, "monitor outage known") {
		t.Errorf("outage of %s applied to %s:\n%s", down.URL, other.URL, r.Stderr)
	}
	if r := start(down.URL, "60s"); !strings.Contains(r.Stderr, "monitor outage known") {
		t.Errorf("outage not remembered:\n%s", r.Stderr)
	}
}
