package main

// Black-box tests of the command line's habits on the built
// paddle-monitor: the report's default window and --month, one version
// format, each subcommand's own --help, and `token --add-to`.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// report without a window is the current UTC month, as GET /v1/report;
// --month and month= pick one; --from/--to go together and win.
func TestReportWindowDefaults(t *testing.T) {
	prices := fixtureFile(t, "prices.json")
	storetest.Each(t, func(t *testing.T, db string) {
		s := startServer(t, db, "--prices", prices)
		postFixture(t, s, "") // November 2025
		now := time.Now().UTC()
		month := now.Format("2006-01")
		first := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
		// A task of this month: started in its first second, ran 1 s.
		expect(t, s.do(t, registerReq(regBody("this-month", "thismonth", "ann@example.com", first.Unix()), "")), 201, "")
		expect(t, s.do(t, completeReq(endedBody("this-month", first.Unix(), 1))), 200, "")

		report := func(args ...string) ran {
			t.Helper()
			return runMonitor(t, append([]string{"report", "--db", db, "--prices", prices, "--format", "json"}, args...)...)
		}
		def := report()
		if time.Now().UTC().Format("2006-01") != month {
			t.Skip("the month changed while the test ran")
		}
		if def.code != 0 || !strings.Contains(def.stdout, `"project": "thismonth"`) || strings.Contains(def.stdout, `"vision"`) {
			t.Fatalf("report without a window: exit %d %s\n%s", def.code, def.stderr, def.stdout)
		}
		if !strings.Contains(def.stdout, `"from": "`+first.Format(time.RFC3339)+`"`) {
			t.Errorf("the default window does not start at %s:\n%s", first.Format(time.RFC3339), def.stdout)
		}
		for _, args := range [][]string{
			{"--month", month},
			{"--from", first.Format(time.DateOnly), "--to", first.AddDate(0, 1, 0).Format(time.DateOnly)},
			{"--from", month, "--to", first.AddDate(0, 1, 0).Format("2006-01")},
		} {
			if r := report(args...); r.code != 0 || r.stdout != def.stdout {
				t.Errorf("report %v: exit %d %s\n%s\nwant the default report:\n%s", args, r.code, r.stderr, r.stdout, def.stdout)
			}
		}
		golden := readFixture(t, "november-by-project.json")
		for _, args := range [][]string{
			{"--month", "2025-11"},
			{"--month", "2026-01", "--from", "2025-11-01", "--to", "2025-12-01"}, // from/to win
		} {
			if r := report(args...); r.code != 0 || r.stdout != golden {
				t.Errorf("report %v: exit %d %s\n%s\nwant november-by-project.json", args, r.code, r.stderr, r.stdout)
			}
		}
		// The same on HTTP: month=, and YYYY-MM in from/to.
		for _, q := range []string{"month=2025-11", "from=2025-11&to=2025-12", "from=2025-11-01&to=2025-12-01&month=2024-01"} {
			a := s.do(t, get("/v1/report?"+q, ""))
			if a.Status != 200 || string(a.Body) != golden {
				t.Errorf("GET /v1/report?%s: %d\n%s\nwant november-by-project.json", q, a.Status, a.Body)
			}
		}
		if a := s.do(t, get("/v1/report", "")); a.Status != 200 || string(a.Body) != def.stdout {
			t.Errorf("GET /v1/report: %d\n%s\nwant the command's default report:\n%s", a.Status, a.Body, def.stdout)
		}
		for q, want := range map[string]string{
			"month=2025-13":        `parameter month: "2025-13" is not YYYY-MM`,
			"month=2025-1":         `parameter month: "2025-1" is not YYYY-MM`,
			"from=2025-11":         "parameter to is required with from",
			"to=2025-12&month=x":   "parameter from is required with to",
			"from=2025-12&to=2025": `parameter to "2025" is neither RFC 3339`,
		} {
			if a := s.do(t, get("/v1/report?"+q, "")); a.Status != 400 || !strings.HasPrefix(a.Error(t), want) {
				t.Errorf("GET /v1/report?%s: %d %s; want 400 saying %q", q, a.Status, a.Body, want)
			}
		}
	})
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--from", "2025-11-01"}, "paddle-monitor: usage: --to is required with --from"},
		{[]string{"--to", "2025-11-01", "--month", "2025-10"}, "paddle-monitor: usage: --from is required with --to"},
		{[]string{"--month", "2025-13"}, `paddle-monitor: usage: --month: "2025-13" is not YYYY-MM`},
		{[]string{"--month", "november"}, `paddle-monitor: usage: --month: "november" is not YYYY-MM`},
	} {
		r := runMonitorEnv(t, dir, nil, append([]string{"report", "--db", filepath.Join(dir, "none.db")}, c.args...)...)
		if r.code != 2 || !strings.HasPrefix(r.stderr, c.want) || r.stdout != "" {
			t.Errorf("report %v: exit %d, stderr %q; want 2 and %q", c.args, r.code, r.stderr, c.want)
		}
	}
}

// endedBody is the completion of a one-GPU task of regBody that started at
// start and ran for seconds, exit 0.
func endedBody(id string, start, seconds int64) string {
	return fmt.Sprintf(`{"schema_version":1,"task_id":%q,"start_time":%d,"end_time":%d,"duration_seconds":%d,
		"exit_code":0,"gpu_count":1,"gpu_seconds":%d,"gpus":[{"uuid":"GPU-%s","samples":3,"util_mean":50,"util_p95":60,"memory_used_peak_bytes":1000,"idle_share":0}]}`,
		id, start, start+seconds, seconds, seconds, id)
}

func completeReq(body string) request {
	var c struct {
		TaskID string `json:"task_id"`
	}
	json.Unmarshal([]byte(body), &c)
	r := post("/v1/task/complete", body, "")
	r.Header = map[string]string{"Idempotency-Key": c.TaskID + "/complete"}
	return r
}

// Both spellings print "paddle-monitor version X", as the entrypoint does.
func TestVersionFormat(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		r := runMonitor(t, args...)
		if r.code != 0 || !regexp.MustCompile(`^paddle-monitor version \S+\n$`).MatchString(r.stdout) || r.stderr != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want \"paddle-monitor version X\"", args, r.code, r.stdout, r.stderr)
		}
	}
	if r := runMonitor(t, "version", "x"); r.code != 2 || r.stdout != "" {
		t.Errorf("version x: exit %d, stdout %q", r.code, r.stdout)
	}
}

// Each subcommand's --help is its own usage line and its own flags, each
// with its description and default, on stdout, exit 0.
func TestSubcommandHelp(t *testing.T) {
	for _, c := range []struct {
		cmd   string
		lines []string // lines the help must hold, as pflag prints them
		not   []string // flags of other commands
	}{
		{"serve", []string{
			"usage: paddle-monitor serve  [flags]",
			`      --listen string               address to listen on (env PADDLE_MONITOR_LISTEN) (default "127.0.0.1:8080")`,
			`      --open-ttl duration           open tasks not seen for this long leave /metrics (env PADDLE_MONITOR_OPEN_TTL) (default 168h0m0s)`,
		}, []string{"--month", "--add-to", "--by"}},
		{"report", []string{
			"usage: paddle-monitor report [flags]",
			`--by string`, `(default "project")`,
			`--month string`, `calendar month YYYY-MM (UTC); default: the current month`,
			`--format string`, `(default "table")`,
		}, []string{"--listen", "--add-to"}},
		{"token", []string{
			"usage: paddle-monitor token  NAME (--project GLOB)...",
			`--add-to string`, `--project stringArray`,
		}, []string{"--listen", "--month"}},
	} {
		for _, args := range [][]string{{c.cmd, "--help"}, {c.cmd, "-h"}, {"help", c.cmd}} {
			r := runMonitor(t, args...)
			if r.code != 0 || r.stderr != "" {
				t.Errorf("%v: exit %d, stderr %q", args, r.code, r.stderr)
				continue
			}
			// The columns widen with the longest flag: compared with runs
			// of blanks as one.
			for _, want := range c.lines {
				if !strings.Contains(squashBlanks(r.stdout), squashBlanks(want)) {
					t.Errorf("%v lacks %q:\n%s", args, want, r.stdout)
				}
			}
			for _, other := range c.not {
				if strings.Contains(r.stdout, other) {
					t.Errorf("%v shows %s, another command's flag:\n%s", args, other, r.stdout)
				}
			}
			for _, other := range []string{"serve", "report", "token"} {
				if other != c.cmd && strings.Contains(r.stdout, "paddle-monitor "+other) {
					t.Errorf("%v shows the usage of %s:\n%s", args, other, r.stdout)
				}
			}
		}
	}
	r := runMonitor(t, "--help")
	for _, want := range []string{"paddle-monitor serve  [flags]", "paddle-monitor report [flags]", "paddle-monitor token  NAME", "paddle-monitor version"} {
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Errorf("--help: exit %d, lacks %q:\n%s", r.code, want, r.stdout)
		}
	}
}

// token --add-to appends the entry (file created 0600, other entries kept
// byte for byte), refuses a duplicate name and a file that does not load
// (leaving it as it was), loses none of many concurrent adds, and a serve
// picks the new token up on SIGHUP.
func TestTokenAddTo(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tokens.json")
	mint := func(args ...string) (secret string, entry string) {
		t.Helper()
		r := runMonitor(t, append([]string{"token"}, append(args, "--add-to", path)...)...)
		lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
		if r.code != 0 || len(lines) != 2 || !strings.HasPrefix(lines[0], "pdm_") {
			t.Fatalf("token %v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
		return lines[0], lines[1]
	}
	searchSecret, searchEntry := mint("search", "--project", "search_*")
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the new tokens file: %v, %v; want mode 0600", fi, err)
	}
	if b, _ := os.ReadFile(path); string(b) != "{\"tokens\": [\n  "+searchEntry+"\n]}\n" {
		t.Errorf("the new tokens file holds:\n%s", b)
	}

	// An entry written by hand, with its own spacing, is kept as it is.
	hand := `{ "name": "hand",  "sha256": "` + hashHex("hand-secret") + `", "projects": ["ads_*"] }`
	writeFile(t, path, "{\"tokens\": [\n  "+searchEntry+",\n  "+hand+"\n]}\n")
	os.Chmod(path, 0o640)
	s := startServer(t, storetest.SQLiteDSN(t), "--tokens", path)
	adsSecret, adsEntry := mint("ads-ci", "--project", "ads_*", "--owner", "*@example.com")
	want := "{\"tokens\": [\n  " + searchEntry + ",\n  " + hand + ",\n  " + adsEntry + "\n]}\n"
	if b, _ := os.ReadFile(path); string(b) != want {
		t.Errorf("after the second add:\n%s\nwant:\n%s", b, want)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o640 {
		t.Errorf("an existing file's mode became %v; want it kept (0640)", fi.Mode().Perm())
	}

	// The running serve takes the new token on SIGHUP.
	body := regBody("add-1", "ads_a", "ann@example.com", 1794700000)
	expect(t, s.do(t, registerReq(body, adsSecret)), 401, "")
	s.Signal(syscall.SIGHUP)
	s.waitLog(t, `"tokens":3`)
	expect(t, s.do(t, registerReq(body, adsSecret)), 201, "")
	expect(t, s.do(t, registerReq(regBody("add-2", "search_a", "ann@example.com", 1794700000), searchSecret)), 201, "")

	// A duplicate name, or a file that does not load: refused, file as it
	// was, no secret printed.
	for _, c := range []struct {
		content, args []string
		want          string
	}{
		{nil, []string{"ads-ci", "--admin"}, `tokens file ` + path + `: a token named "ads-ci" exists already`},
		{[]string{`{"tokens": [{"name": "x"`}, []string{"new", "--admin"}, "tokens file " + path + ": not the expected JSON"},
		{[]string{`{"tokens": [{"name": "x", "sha256": "00"}]}`}, []string{"new", "--admin"}, "tokens file " + path + ": tokens[0] (x): sha256 must be 64 hexadecimal digits"},
	} {
		if c.content != nil {
			writeFile(t, path, c.content[0])
		}
		before, _ := os.ReadFile(path)
		r := runMonitor(t, append([]string{"token"}, append(c.args, "--add-to", path)...)...)
		after, _ := os.ReadFile(path)
		if r.code != 1 || !strings.Contains(r.stderr, c.want) || r.stdout != "" || !bytes.Equal(before, after) {
			t.Errorf("token %v: exit %d, stdout %q, stderr %q, file changed %v; want 1 saying %q", c.args, r.code, r.stdout, r.stderr, !bytes.Equal(before, after), c.want)
		}
	}

	// Concurrent adds to one file: every one is there.
	path = filepath.Join(dir, "concurrent.json")
	const n = 12
	var wg sync.WaitGroup
	codes := make([]int, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i] = runMonitor(t, "token", fmt.Sprintf("team-%02d", i), "--project", "p*", "--add-to", path).code
		}()
	}
	wg.Wait()
	var f struct{ Tokens []struct{ Name string } }
	b, _ := os.ReadFile(path)
	if err := json.Unmarshal(b, &f); err != nil || len(f.Tokens) != n {
		t.Fatalf("after %d concurrent adds (exits %v): %v\n%s", n, codes, err, b)
	}
}

// The page tells small rows apart: GPU-hours with three significant digits
// (a 30 s and a 90 s one-GPU task are 0.00833 and 0.0250 GPU-hours, not
// both "0.0").
func TestPageDigits(t *testing.T) {
	now := time.Now().UTC()
	first := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	if now.Sub(first) < 5*time.Minute {
		t.Skip("too close to the start of the month for tasks ending in it")
	}
	s := startServer(t, storetest.SQLiteDSN(t))
	for id, seconds := range map[string]int64{"short": 30, "longer": 90} {
		expect(t, s.do(t, registerReq(regBody(id, "p-"+id, "ann@example.com", first.Unix()), "")), 201, "")
		expect(t, s.do(t, completeReq(endedBody(id, first.Unix(), seconds))), 200, "")
	}
	resp, err := http.Get(s.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	page := string(b)
	for _, want := range []string{
		`<td class="key">p-short</td><td>0.00833</td>`,
		`<td class="key">p-longer</td><td>0.0250</td>`,
		`<tr class="total"><td class="key">Total</td><td>0.0333</td>`,
		`<title>p-short: 0.00833 GPU-h</title>`,
		`<title>p-longer: 0.0250 GPU-h</title>`,
	} {
		if resp.StatusCode != 200 || !strings.Contains(page, want) {
			t.Errorf("the page lacks %s:\n%s", want, page)
		}
	}
}

// squashBlanks is s with each run of spaces as one.
func squashBlanks(s string) string {
	for strings.Contains(s, "  ") {
		s = strings.ReplaceAll(s, "  ", " ")
	}
	return s
}
