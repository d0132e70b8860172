package entrypoint

// Black-box tests of one node spool shared by teams whose containers run
// as the same UID (docs/spool.md, One spool, several teams): each entry records the
// fingerprint of the token it was written for, and is sent only with that
// token, against a real paddle-monitor with a tokens file.

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/monitorproc"
	bolt "go.etcd.io/bbolt"
)

var buildMonitor struct {
	once sync.Once
	path string
	err  error
}

// monitorBin builds bin/paddle-monitor once, beside the entrypoint.
func monitorBin(t *testing.T) string {
	t.Helper()
	buildMonitor.once.Do(func() {
		buildMonitor.path = filepath.Join(bin.dir, "paddle-monitor")
		if out, err := goBuild(buildMonitor.path, "./cmd/paddle-monitor", "0").CombinedOutput(); err != nil {
			buildMonitor.err = fmt.Errorf("%v\n%s", err, out)
		}
	})
	if buildMonitor.err != nil {
		t.Fatal(buildMonitor.err)
	}
	return buildMonitor.path
}

// Team tokens of the node's monitor: vision and search, each bound to its
// projects, and an admin (a node drainer's token, more powerful).
const (
	visionSecret = "vision-secret-0123456789"
	searchSecret = "search-secret-0123456789"
	adminSecret  = "admin-secret-0123456789"
)

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// fingerprint is what a spool entry records for a token.
func fingerprint(s string) string { return sha(s)[:16] }

type teamMonitor struct {
	*monitorproc.Proc
	dir string
}

func startTeamMonitor(t *testing.T) *teamMonitor {
	t.Helper()
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.json")
	os.WriteFile(tokens, []byte(`{"tokens":[`+
		`{"name":"vision","sha256":"`+sha(visionSecret)+`","projects":["vision_*"]},`+
		`{"name":"search","sha256":"`+sha(searchSecret)+`","projects":["search_*"]},`+
		`{"name":"admin","sha256":"`+sha(adminSecret)+`","admin":true}]}`), 0o600)
	p, err := monitorproc.Start(monitorBin(t), []string{"--listen", "127.0.0.1:0", "--db", filepath.Join(dir, "monitor.db"), "--log-format", "json", "--tokens", tokens},
		monitorproc.Options{Env: []string{"PATH=/usr/bin:/bin"}, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	return &teamMonitor{Proc: p, dir: dir}
}

// tasks returns the monitor's task ids, as the admin sees them.
func (m *teamMonitor) tasks(t *testing.T) []string {
	t.Helper()
	req, _ := http.NewRequest("GET", m.URL+"/v1/tasks?limit=1000", nil)
	req.Header.Set("Authorization", "Bearer "+adminSecret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Tasks []struct {
			TaskID  string `json:"task_id"`
			Project string `json:"project"`
		} `json:"tasks"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /v1/tasks: %d %v", resp.StatusCode, err)
	}
	var ids []string
	for _, tk := range body.Tasks {
		ids = append(ids, tk.TaskID)
	}
	slices.Sort(ids)
	return ids
}

// tokenFile writes a token file and returns its path.
func tokenFile(t *testing.T, secret string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "token")
	os.WriteFile(p, []byte(secret+"\n"), 0o600)
	return p
}

// teamStart is a start of /bin/true for a team: its token and project, on
// the shared spool.
func teamStart(t *testing.T, spoolPath, url, secret, project, taskID string) *task {
	t.Helper()
	k := regTask(t, url, 300*time.Millisecond)
	k.Setenv("PADDLE_SPOOL_PATH", spoolPath)
	k.Setenv("PADDLE_MONITOR_TOKEN_FILE", tokenFile(t, secret))
	k.Setenv("PADDLE_PROJECT", project)
	k.Setenv("PADDLE_TASK_ID", taskID)
	return k
}

// fullEntry is a `spool list` line with the fingerprint.
type fullEntry struct {
	spoolEntry
	Fingerprint string `json:"fingerprint"`
}

func listFull(t *testing.T, k *task, args ...string) []fullEntry {
	t.Helper()
	r := spoolRun(k, append([]string{"list"}, args...)...)
	if r.Code != 0 {
		t.Fatalf("spool list: exit %d\n%s", r.Code, r.Stderr)
	}
	var out []fullEntry
	for _, line := range strings.Split(strings.TrimSpace(r.Stdout), "\n") {
		if line == "" {
			continue
		}
		var e fullEntry
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("spool list line %q: %v", line, err)
		}
		if strings.Contains(line, visionSecret) || strings.Contains(line, searchSecret) || strings.Contains(line, adminSecret) {
			t.Fatalf("a token in spool list: %s", line)
		}
		out = append(out, e)
	}
	return out
}

// bucketKeys counts the keys of each top-level bucket of a spool file.
func bucketKeys(t *testing.T, path string) map[string]int {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	out := map[string]int{}
	db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			out[string(name)] = b.Stats().KeyN
			return nil
		})
	})
	return out
}

// flushLine runs spool flush with extra settings and decodes its line.
func flushLine(t *testing.T, k *task, env map[string]string, args ...string) (map[string]any, result) {
	t.Helper()
	c := *k
	c.Env = slices.Clone(k.Env)
	for key, v := range env {
		c.Setenv(key, v)
	}
	r := spoolRun(&c, append([]string{"flush"}, args...)...)
	var line map[string]any
	json.Unmarshal([]byte(strings.TrimSpace(strings.Split(r.Stdout, "\n")[0])), &line)
	return line, r
}

// Two vision tasks spool while the monitor is down; a search start, a
// search drainer and an admin drainer send none of them, leave them pending
// and untouched (no attempt, no dead letter); a drainer with the vision
// token in its --token-dir delivers them under that token.
func TestSpoolEntriesSentOnlyWithTheirToken(t *testing.T) {
	m := startTeamMonitor(t)
	down := regDownURL(t)
	spoolPath := filepath.Join(t.TempDir(), "spool-1000.db")
	for _, id := range []string{"vision-a", "vision-b"} {
		if r := teamStart(t, spoolPath, down, visionSecret, "vision_ocr", id).Run(); r.Code != 0 {
			t.Fatalf("vision start: exit %d\n%s", r.Code, r.Stderr)
		}
	}
	before := listFull(t, newTask(t).Setenv("PADDLE_SPOOL_PATH", spoolPath))
	// The entrypoint writes its entries where older versions never look.
	if keys := bucketKeys(t, spoolPath); keys["pending"] != 0 || keys["pending_by_token"] != 2 {
		t.Errorf("buckets %v: want the two entries in pending_by_token, none in pending", keys)
	}

	// A search task starts with the monitor up: its own registration is
	// delivered, the vision entries are not sent with its token.
	s := teamStart(t, spoolPath, m.URL, searchSecret, "search_rank", "search-a")
	if r := s.Run(); r.Code != 0 {
		t.Fatalf("search start: exit %d\n%s", r.Code, r.Stderr)
	}
	if got := m.tasks(t); !slices.Equal(got, []string{"search-a"}) {
		t.Fatalf("monitor has %v, want only search-a", got)
	}
	es := listFull(t, s)
	if len(es) != 2 {
		t.Fatalf("pending %v, want the two vision entries", es)
	}
	for i, e := range es {
		if e.Fingerprint != fingerprint(visionSecret) || e.Attempts != before[i].Attempts || e.LastError != before[i].LastError || e.Answer != "" {
			t.Errorf("vision entry %+v: want fingerprint %s, untouched since its own start (%+v)", e, fingerprint(visionSecret), before[i])
		}
	}
	if dead := listFull(t, s, "--dead"); len(dead) != 0 {
		t.Fatalf("dead letters %v: another team's entries were sent", dead)
	}
	var st map[string]int
	r := spoolRun(s, "stats")
	json.Unmarshal([]byte(r.Stdout), &st)
	if st["pending"] != 2 || st["dead"] != 0 || st["foreign"] != 2 {
		t.Errorf("spool stats with the search token: %s, want pending 2, dead 0, foreign 2", r.Stdout)
	}

	// A drainer with the admin token sends nothing of it either, and is
	// done: exit 0, foreign 2.
	for _, secret := range []string{adminSecret, searchSecret} {
		line, r := flushLine(t, s, map[string]string{"PADDLE_MONITOR_URL": m.URL, "PADDLE_MONITOR_TOKEN_FILE": tokenFile(t, secret)})
		if r.Code != 0 || line["foreign"] != 2.0 || line["pending"] != 0.0 || line["delivered"] != 0.0 {
			t.Errorf("spool flush with the %s token: exit %d, %s\n%s", strings.Split(secret, "-")[0], r.Code, r.Stdout, r.Stderr)
		}
	}
	if got := m.tasks(t); !slices.Equal(got, []string{"search-a"}) {
		t.Fatalf("monitor has %v after the other tokens' flushes", got)
	}

	// The node drainer: a Kubernetes Secret volume of the teams' tokens.
	dir := t.TempDir()
	data := filepath.Join(dir, "..2026_12_01_00_00_00.000000000")
	os.Mkdir(data, 0o755)
	os.WriteFile(filepath.Join(data, "vision"), []byte(visionSecret+"\n"), 0o600)
	os.WriteFile(filepath.Join(data, "search"), []byte(searchSecret), 0o600)
	os.Symlink(filepath.Base(data), filepath.Join(dir, "..data"))
	os.Symlink("..data/vision", filepath.Join(dir, "vision"))
	os.Symlink("..data/search", filepath.Join(dir, "search"))
	line, r := flushLine(t, s, map[string]string{"PADDLE_MONITOR_URL": m.URL, "PADDLE_MONITOR_TOKEN_FILE": tokenFile(t, adminSecret)}, "--token-dir", dir)
	if r.Code != 0 || line["delivered"] != 2.0 || line["foreign"] != 0.0 {
		t.Fatalf("spool flush --token-dir: exit %d, %s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	if got := m.tasks(t); !slices.Equal(got, []string{"search-a", "vision-a", "vision-b"}) {
		t.Errorf("monitor has %v, want the vision tasks too", got)
	}
	wantStats(t, s, 0, 0)
}

// A forged registration (project=admin) written with a team's token is
// never sent under the admin's token: the admin drainer leaves it, the
// team's token delivers it to a monitor that refuses it (a dead letter of
// that token's answer).
func TestSpoolForgedEntryNeverSentWithAnAdminToken(t *testing.T) {
	m := startTeamMonitor(t)
	spoolPath := filepath.Join(t.TempDir(), "spool-1000.db")
	if r := teamStart(t, spoolPath, regDownURL(t), visionSecret, "admin", "forged-1").Run(); r.Code != 0 {
		t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
	}
	k := newTask(t)
	k.Setenv("PADDLE_SPOOL_PATH", spoolPath)
	line, r := flushLine(t, k, map[string]string{"PADDLE_MONITOR_URL": m.URL, "PADDLE_MONITOR_TOKEN_FILE": tokenFile(t, adminSecret)}, "--all")
	if r.Code != 0 || line["foreign"] != 1.0 || line["delivered"] != 0.0 {
		t.Fatalf("admin drainer: exit %d %s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	if got := m.tasks(t); len(got) != 0 {
		t.Fatalf("the monitor took %v from the admin drainer", got)
	}
	line, r = flushLine(t, k, map[string]string{"PADDLE_MONITOR_URL": m.URL, "PADDLE_MONITOR_TOKEN_FILE": tokenFile(t, visionSecret)})
	if r.Code != 0 || line["dead"] != 1.0 {
		t.Fatalf("vision flush: exit %d %s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	if dead := listFull(t, k, "--dead"); len(dead) != 1 || !strings.Contains(dead[0].Answer, "403") {
		t.Errorf("dead letters %+v: want the forged entry, refused 403 under its own token", dead)
	}
	if got := m.tasks(t); len(got) != 0 {
		t.Fatalf("the monitor took %v", got)
	}
}

// Entries of the previous format (no fingerprint, in the pending bucket)
// stay where they are: a start logs once how many wait, flush leaves them
// (foreign), and only flush --legacy sends them, with the token given.
func TestSpoolLegacyEntriesWaitForFlushLegacy(t *testing.T) {
	m := startTeamMonitor(t)
	k := newTask(t)
	writeShape(t, k.SpoolPath(), []shapeEntry{{pad: 10}, {pad: 10}})
	// Projects the search token may register.
	db, _ := bolt.Open(k.SpoolPath(), 0o600, nil)
	db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("pending"))
		return b.ForEach(func(key, v []byte) error {
			id := fmt.Sprintf("legacy-%d", binary.BigEndian.Uint64(key))
			rec := fmt.Sprintf(`{"id":%d,"record_version":1,"task_id":%q,"payload":{"schema_version":1,"task_id":%q,"task_name":"old","project":"search_old","owner":"o","gpu_count":0,"start_time":1796000000,"hostname":"h"},"queued_at":"2026-11-30T00:00:00Z","attempts":1}`, binary.BigEndian.Uint64(key), id, id)
			return b.Put(key, []byte(rec))
		})
	})
	db.Close()

	start := teamStart(t, k.SpoolPath(), m.URL, searchSecret, "search_rank", "search-new")
	r := start.Run()
	if r.Code != 0 || logLine(r.Stderr, "WARN", "previous format", "count=2") == "" {
		t.Fatalf("start: exit %d, want one warning counting 2 entries waiting for spool flush --legacy\n%s", r.Code, r.Stderr)
	}
	if n := strings.Count(r.Stderr, "previous format"); n != 1 {
		t.Errorf("the start said it %d times", n)
	}
	if got := m.tasks(t); !slices.Equal(got, []string{"search-new"}) {
		t.Fatalf("monitor has %v: a start sent entries of the previous format", got)
	}
	env := map[string]string{"PADDLE_MONITOR_URL": m.URL, "PADDLE_MONITOR_TOKEN_FILE": tokenFile(t, searchSecret)}
	line, r := flushLine(t, k, env)
	if r.Code != 0 || line["foreign"] != 2.0 || line["legacy"] != 2.0 || line["delivered"] != 0.0 {
		t.Fatalf("spool flush: exit %d %s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	line, r = flushLine(t, k, env, "--legacy")
	if r.Code != 0 || line["delivered"] != 2.0 || line["foreign"] != 0.0 {
		t.Fatalf("spool flush --legacy: exit %d %s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	if got := m.tasks(t); !slices.Equal(got, []string{"legacy-1", "legacy-2", "search-new"}) {
		t.Errorf("monitor has %v", got)
	}
	if keys := bucketKeys(t, k.SpoolPath()); keys["pending"] != 0 {
		t.Errorf("buckets after --legacy: %v", keys)
	}
}

// Concurrent starts never take each other's write-ahead entries: a
// supervisor's registration is in the spool while its first attempt is in
// flight; another start of the same team, whose node policy refuses that
// project, delivers its own and drains the backlog. Before, it took the
// supervisor's entry and buried it ("not sent: ..."), and the supervisor's
// later delivery left a false dead letter.
func TestSpoolConcurrentStartsLeaveWriteAheadEntries(t *testing.T) {
	m := newRegMonitor(t, "hang", "200")
	m.onRequest = nil
	spoolPath := filepath.Join(t.TempDir(), "spool-1000.db")
	sup := supTask(t, "/bin/sh", "-c", "sleep 4")
	sup.Setenv("PADDLE_SPOOL_PATH", spoolPath)
	sup.Setenv("PADDLE_MONITOR_URL", m.URL)
	sup.Setenv("PADDLE_TASK_ID", "sup-1")
	sup.Setenv("PADDLE_PROJECT", "vision_ocr")
	done := make(chan result, 1)
	go func() { done <- sup.Run() }()
	deadline := time.Now().Add(10 * time.Second)
	for len(m.Requests()) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if len(m.Requests()) == 0 {
		t.Fatal("the supervisor never tried")
	}
	other := regTask(t, m.URL, 2*time.Second)
	other.Setenv("PADDLE_SPOOL_PATH", spoolPath)
	other.Setenv("PADDLE_TASK_ID", "other-1")
	other.Setenv("PADDLE_PROJECT", "search_rank")
	other.Setenv("PADDLE_POLICY_FILE", polFile(t, "warn", `"labels": {"project": {"deny": ["vision_*"]}}`))
	if r := other.Run(); r.Code != 0 {
		t.Fatalf("other start: exit %d\n%s", r.Code, r.Stderr)
	}
	r := <-done
	if r.Code != 0 {
		t.Fatalf("supervisor: exit %d\n%s", r.Code, r.Stderr)
	}
	if dead, _ := spoolList(t, sup, true); len(dead) != 0 {
		t.Errorf("dead letters %v: a delivered task became a false dead letter", taskIDs(dead))
	}
	got := m.Delivered()
	if !slices.Contains(got, "sup-1") || !slices.Contains(got, "other-1") {
		t.Errorf("delivered %v, want both", got)
	}
}

// Without a token an entry records "none"; with a token file that cannot
// be read safely (a directory here), "unusable": nobody knows its token,
// so only the operator's spool flush --legacy sends it.
func TestSpoolFingerprintNoneAndUnusable(t *testing.T) {
	down := regDownURL(t)
	k := regTask(t, down, 300*time.Millisecond)
	k.Setenv("PADDLE_TASK_ID", "no-token")
	if r := k.Run(); r.Code != 0 {
		t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
	}
	k.Setenv("PADDLE_TASK_ID", "bad-token")
	k.Setenv("PADDLE_MONITOR_TOKEN_FILE", t.TempDir())
	if r := k.Run(); r.Code != 0 {
		t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
	}
	got := map[string]string{}
	for _, e := range listFull(t, k) {
		got[e.TaskID] = e.Fingerprint
	}
	if got["no-token"] != "none" || got["bad-token"] != "unusable" {
		t.Errorf("fingerprints %v, want no-token none, bad-token unusable", got)
	}
	m := newRegMonitor(t, "200")
	c := *k
	c.Env = slices.Clone(k.Env)
	c.Setenv("PADDLE_MONITOR_URL", m.URL)
	c.Setenv("PADDLE_MONITOR_TOKEN_FILE", "")
	line, r := flushLine(t, &c, nil)
	if r.Code != 0 || line["delivered"] != 1.0 || line["foreign"] != 1.0 {
		t.Fatalf("flush: exit %d %s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	line, r = flushLine(t, &c, nil, "--legacy")
	if r.Code != 0 || line["delivered"] != 1.0 || line["foreign"] != 0.0 {
		t.Fatalf("flush --legacy: exit %d %s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	if d := m.Delivered(); !slices.Equal(d, []string{"no-token", "bad-token"}) {
		t.Errorf("delivered %v", d)
	}
}

// Supervise mode's completions carry their token's fingerprint too: a
// supervised vision task that ended during an outage leaves its
// registration and completion; a search start sends neither; the node
// drainer's --token-dir sends both, in order, under the vision token.
func TestSpoolCompletionsSentOnlyWithTheirToken(t *testing.T) {
	m := startTeamMonitor(t)
	spoolPath := filepath.Join(t.TempDir(), "spool-1000.db")
	v := supTask(t, "/bin/true")
	v.Setenv("PADDLE_SPOOL_PATH", spoolPath)
	v.Setenv("PADDLE_MONITOR_URL", regDownURL(t))
	v.Setenv("PADDLE_MONITOR_TOKEN_FILE", tokenFile(t, visionSecret))
	v.Setenv("PADDLE_PROJECT", "vision_ocr")
	v.Setenv("PADDLE_TASK_ID", "vision-sup")
	v.Setenv("PADDLE_COMPLETE_BUDGET", "500ms")
	if r := v.Run(); r.Code != 0 {
		t.Fatalf("supervised vision task: exit %d\n%s", r.Code, r.Stderr)
	}
	comps := listFull(t, v, "--completions")
	if len(comps) != 1 || comps[0].Fingerprint != fingerprint(visionSecret) {
		t.Fatalf("completions %+v, want vision-sup's, fingerprinted", comps)
	}
	if keys := bucketKeys(t, spoolPath); keys["completions"] != 0 || keys["completions_by_token"] != 1 {
		t.Errorf("buckets %v: the completion belongs in completions_by_token", keys)
	}
	s := teamStart(t, spoolPath, m.URL, searchSecret, "search_rank", "search-b")
	if r := s.Run(); r.Code != 0 {
		t.Fatalf("search start: exit %d\n%s", r.Code, r.Stderr)
	}
	if got := m.tasks(t); !slices.Equal(got, []string{"search-b"}) {
		t.Fatalf("monitor has %v, want only search-b", got)
	}
	if st := spoolStats(t, s); st["pending"] != 1 || st["completions_pending"] != 1 || st["dead"]+st["completions_dead"] != 0 {
		t.Errorf("stats %v: the vision entries must stay pending, untouched", st)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "vision"), []byte(visionSecret), 0o600)
	os.WriteFile(filepath.Join(dir, ".hidden"), []byte(searchSecret), 0o600)
	line, r := flushLine(t, s, map[string]string{"PADDLE_MONITOR_URL": m.URL, "PADDLE_SPOOL_TOKEN_DIR": dir})
	if r.Code != 0 || line["delivered"] != 2.0 || line["pending"] != 0.0 {
		t.Fatalf("spool flush with PADDLE_SPOOL_TOKEN_DIR: exit %d %s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	if got := m.tasks(t); !slices.Equal(got, []string{"search-b", "vision-sup"}) {
		t.Errorf("monitor has %v", got)
	}
}
