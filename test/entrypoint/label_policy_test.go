package entrypoint

// Black-box tests of labels an administrator can trust: the policy file
// (docs/contract.md, section 9), the sensitive-data guard (section 3) and
// least privilege, run against the built binary.

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/paddle-entrypoint/paddle-entrypoint/entrypoint/policy"
	"github.com/paddle-entrypoint/paddle-entrypoint/test/harness"
)

// polSpecPolicy is the example policy of section 9, without its mode.
const polSpecPolicy = `
  "required": ["task_name", "project", "owner"],
  "labels": {
    "project": {"allow": ["search_ranking", "document_intelligence", "ocr-*"], "deny": ["admin", "system*"]},
    "owner":   {"allow": ["*@example.com", "ai-team-*"]}
  },
  "extra_labels": ["cost_center", "note"]`

// polFile writes a policy file with the given mode ("" for none) and body.
func polFile(t *testing.T, mode, body string) string {
	t.Helper()
	text := "{" + body + "}"
	if mode != "" {
		sep := ","
		if strings.TrimSpace(body) == "" {
			sep = ""
		}
		text = `{"mode": "` + mode + `"` + sep + body + "}"
	}
	return polRaw(t, text)
}

// polRaw writes a policy file's exact text.
func polRaw(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// polNoSystemPolicy skips a test that names its policy with
// PADDLE_POLICY_FILE when this machine has a system policy, which would win.
func polNoSystemPolicy(t *testing.T) {
	t.Helper()
	if _, err := os.Lstat(policy.SystemPath); err == nil {
		t.Skipf("%s exists on this machine and would win over PADDLE_POLICY_FILE", policy.SystemPath)
	}
}

// polGoodTask sets labels the spec's example policy accepts.
func polGoodTask(k *task) *task {
	k.Setenv("PADDLE_TASK_NAME", "resnet50")
	k.Setenv("PADDLE_PROJECT", "search_ranking")
	k.Setenv("PADDLE_OWNER", "alice@example.com")
	return k
}

// polProblemLines returns the log lines that report a label problem.
func polProblemLines(stderr string) []string {
	var out []string
	for _, line := range strings.Split(stderr, "\n") {
		if strings.Contains(line, `msg="label rejected"`) || strings.Contains(line, `msg="label dropped"`) {
			out = append(out, line)
		}
	}
	return out
}

// polLineFor returns the problem line naming variable v, or "".
func polLineFor(lines []string, v string) string {
	for _, l := range lines {
		if strings.Contains(l, "var="+v+" ") {
			return l
		}
	}
	return ""
}

func polAbsent(t *testing.T, what, path string) {
	t.Helper()
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s exists (%v); want nothing written", what, err)
	}
}

// TestPolicyEnforceRejectsEveryProblem: in enforce mode every problem is
// printed on its own line naming the variable and the rule, the start exits
// 65, and nothing is written, sent or spooled, although the monitor is up
// (and answers 503, which would spool a registration).
func TestPolicyEnforceRejectsEveryProblem(t *testing.T) {
	polNoSystemPolicy(t)
	m := newRegMonitor(t, "503")
	k := newTask(t, bin.report)
	k.Setenv("PADDLE_POLICY_FILE", polFile(t, "enforce", polSpecPolicy))
	k.Setenv("PADDLE_MONITOR_URL", m.URL)
	k.Setenv("PADDLE_REGISTER_BUDGET", "2s")
	k.Setenv("PADDLE_PROJECT", "ADMIN")                   // denied, case-insensitively
	k.Setenv("PADDLE_OWNER", "mallory@evil.com")          // not allowed
	k.Setenv("PADDLE_LABEL_TEAM", "vision")               // extra label not listed
	k.Setenv("PADDLE_LABEL_NOTE", "110101199003074514")   // identity number
	k.Setenv("PADDLE_PRIORITY", "urgent")                 // built-in rule
	k.Setenv("PADDLE_LABEL_COST_CENTER", "cc-1024")       // fine
	k.Setenv("PADDLE_LABEL_DB_PASSWORD", "Hunter2Secret") // secret name
	// PADDLE_TASK_NAME is required and not set.
	r := k.Run()
	if r.Code != 65 || r.Stdout != "" {
		t.Fatalf("exit %d, stdout %q (the command must not run); stderr:\n%s", r.Code, r.Stdout, r.Stderr)
	}
	lines := polProblemLines(r.Stderr)
	want := map[string][]string{
		"PADDLE_PROJECT":           {"deny-list", `\"admin\"`},
		"PADDLE_OWNER":             {"allow-list"},
		"PADDLE_LABEL_TEAM":        {"extra_labels"},
		"PADDLE_LABEL_NOTE":        {"resident identity number"},
		"PADDLE_PRIORITY":          {"not one of"},
		"PADDLE_LABEL_DB_PASSWORD": {"secret"},
		"PADDLE_TASK_NAME":         {"required"},
	}
	if len(lines) != len(want) {
		t.Errorf("%d problem lines, want %d:\n%s", len(lines), len(want), strings.Join(lines, "\n"))
	}
	for v, parts := range want {
		line := polLineFor(lines, v)
		if line == "" || !strings.Contains(line, "level=ERROR") {
			t.Errorf("no error line names %s:\n%s", v, r.Stderr)
			continue
		}
		for _, p := range parts {
			if !strings.Contains(line, p) {
				t.Errorf("line for %s does not say %q: %s", v, p, line)
			}
		}
	}
	for _, secret := range []string{"110101199003074514", "Hunter2Secret"} {
		if strings.Contains(r.Stderr, secret) {
			t.Errorf("stderr repeats %q", secret)
		}
	}
	polAbsent(t, "labels file", k.LabelsFile())
	polAbsent(t, "spool file", k.SpoolPath())
	if n := len(m.Requests()); n != 0 {
		t.Errorf("monitor received %d requests; want none in enforce mode", n)
	}
	if entries, _ := os.ReadDir(k.Dir); len(entries) != 0 {
		t.Errorf("files left in the task's directory: %v", entries)
	}
}

// TestPolicyWarnDropsAndKeepsDefaults: in warn mode an offending value is
// dropped, its default kept, one warning logged per problem, and the keys
// listed in invalid_labels; the task starts and registers.
func TestPolicyWarnDropsAndKeepsDefaults(t *testing.T) {
	polNoSystemPolicy(t)
	m := newRegMonitor(t, "200")
	k := newTask(t, "/bin/true")
	k.Setenv("PADDLE_POLICY_FILE", polFile(t, "warn", polSpecPolicy))
	k.Setenv("PADDLE_MONITOR_URL", m.URL)
	polGoodTask(k)
	k.Setenv("PADDLE_PROJECT", "system-ops")
	k.Setenv("PADDLE_OWNER", "Alice@Example.COM") // allowed: matching ignores case
	k.Setenv("PADDLE_LABEL_TEAM", "vision")
	k.Setenv("PADDLE_LABEL_COST_CENTER", "cc-1024")
	r := k.Run()
	if r.Code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", r.Code, r.Stderr)
	}
	got := labelMap(t, k.LabelsFile())
	want := map[string]string{
		"task_name": "resnet50", "project": "default", "owner": "Alice@Example.COM",
		"cost_center": "cc-1024", "invalid_labels": "project,team",
	}
	for key, v := range want {
		if got[key] != v {
			t.Errorf("%s=%q; want %q (labels %v)", key, got[key], v, got)
		}
	}
	if _, ok := got["team"]; ok {
		t.Error("unlisted extra label team written")
	}
	lines := polProblemLines(r.Stderr)
	if len(lines) != 2 || !strings.Contains(polLineFor(lines, "PADDLE_PROJECT"), "level=WARN") ||
		!strings.Contains(polLineFor(lines, "PADDLE_LABEL_TEAM"), "level=WARN") {
		t.Errorf("want one warning each for PADDLE_PROJECT and PADDLE_LABEL_TEAM:\n%s", r.Stderr)
	}
	reqs := m.Requests()
	if len(reqs) != 1 {
		t.Fatalf("monitor received %d requests, want 1", len(reqs))
	}
	var body struct {
		Project       string            `json:"project"`
		InvalidLabels []string          `json:"invalid_labels"`
		Labels        map[string]string `json:"labels"`
	}
	if err := json.Unmarshal(reqs[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	if body.Project != "default" || !slices.Equal(body.InvalidLabels, []string{"project", "team"}) ||
		body.Labels["team"] != "" || body.Labels["cost_center"] != "cc-1024" {
		t.Errorf("registration body %s", reqs[0].Body)
	}
}

// TestPolicyModeWins: the policy file's mode wins over PADDLE_LABELS_MODE
// both ways; a policy without a mode leaves it to the environment.
func TestPolicyModeWins(t *testing.T) {
	polNoSystemPolicy(t)
	tests := []struct {
		name, fileMode, envMode string
		want                    int
	}{
		{"file enforce over env warn", "enforce", "warn", 65},
		{"file warn over env enforce", "warn", "enforce", 0},
		{"no file mode, env enforce", "", "enforce", 65},
		{"no file mode, env warn", "", "warn", 0},
		{"no file mode, no env: warn", "", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := polGoodTask(newTask(t, "/bin/true"))
			k.Setenv("PADDLE_POLICY_FILE", polFile(t, tt.fileMode, polSpecPolicy))
			if tt.envMode != "" {
				k.Setenv("PADDLE_LABELS_MODE", tt.envMode)
			}
			k.Setenv("PADDLE_PROJECT", "admin")
			r := k.Run()
			if r.Code != tt.want {
				t.Fatalf("exit %d, want %d; stderr:\n%s", r.Code, tt.want, r.Stderr)
			}
			if line := polLineFor(polProblemLines(r.Stderr), "PADDLE_PROJECT"); !strings.Contains(line, "deny-list") {
				t.Errorf("no problem line for PADDLE_PROJECT:\n%s", r.Stderr)
			}
		})
	}
}

// TestPolicyRequiredMustBeSetByTask: a required key's default does not
// count; the task must set it, even to the default's value.
func TestPolicyRequiredMustBeSetByTask(t *testing.T) {
	polNoSystemPolicy(t)
	file := polFile(t, "enforce", `"required": ["project", "cost_center"]`)
	tests := []struct {
		name    string
		env     []string
		want    int
		missing []string
		lines   int // problem lines in all
	}{
		{"nothing set", nil, 65, []string{"PADDLE_PROJECT", "PADDLE_LABEL_COST_CENTER"}, 2},
		{"extra missing", []string{"PADDLE_PROJECT=default"}, 65, []string{"PADDLE_LABEL_COST_CENTER"}, 1},
		{"both set, project to the default's value", []string{"PADDLE_PROJECT=default", "PADDLE_LABEL_COST_CENTER=cc-1"}, 0, nil, 0},
		// Set but rejected: reported once, for the rule it broke.
		{"set but invalid", []string{"PADDLE_PROJECT=a b", "PADDLE_LABEL_COST_CENTER=cc-1"}, 65, nil, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := newTask(t, "/bin/true")
			k.Setenv("PADDLE_POLICY_FILE", file)
			for _, kv := range tt.env {
				name, value, _ := strings.Cut(kv, "=")
				k.Setenv(name, value)
			}
			r := k.Run()
			if r.Code != tt.want {
				t.Fatalf("exit %d, want %d; stderr:\n%s", r.Code, tt.want, r.Stderr)
			}
			lines := polProblemLines(r.Stderr)
			for _, v := range tt.missing {
				if line := polLineFor(lines, v); !strings.Contains(line, "required by policy "+file) {
					t.Errorf("no line says %s is required by %s:\n%s", v, file, r.Stderr)
				}
			}
			if len(lines) != tt.lines {
				t.Errorf("%d problem lines, want %d:\n%s", len(lines), tt.lines, r.Stderr)
			}
		})
	}
}

// TestPolicyExtraLabels: no extra_labels list accepts every well-formed
// extra label; a list accepts only those listed; an empty list none. Our
// own settings never count as extra labels.
func TestPolicyExtraLabels(t *testing.T) {
	polNoSystemPolicy(t)
	tests := []struct {
		name, body string
		want       map[string]bool // label key -> written
	}{
		{"no list", ``, map[string]bool{"team": true, "cost_center": true}},
		{"listed", `"extra_labels": ["cost_center"]`, map[string]bool{"team": false, "cost_center": true}},
		{"empty list", `"extra_labels": []`, map[string]bool{"team": false, "cost_center": false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := newTask(t, "/bin/true")
			k.Setenv("PADDLE_POLICY_FILE", polFile(t, "", tt.body))
			k.Setenv("PADDLE_LABEL_TEAM", "vision")
			k.Setenv("PADDLE_LABEL_COST_CENTER", "cc-1024")
			k.Setenv("PADDLE_LABELS_MODE", "warn")
			k.Setenv("PADDLE_ENTRYPOINT_LOG", "info")
			r := k.Run()
			if r.Code != 0 {
				t.Fatalf("exit %d; stderr:\n%s", r.Code, r.Stderr)
			}
			got := labelMap(t, k.LabelsFile())
			var invalid []string
			for _, key := range []string{"cost_center", "team"} {
				if _, ok := got[key]; ok != tt.want[key] {
					t.Errorf("%s written: %v, want %v", key, ok, tt.want[key])
				}
				if !tt.want[key] {
					invalid = append(invalid, key)
				}
			}
			if got["invalid_labels"] != strings.Join(invalid, ",") {
				t.Errorf("invalid_labels=%q, want %q", got["invalid_labels"], strings.Join(invalid, ","))
			}
			for _, setting := range []string{"labels_mode", "entrypoint_log", "policy_file", "labels_file", "spool_path"} {
				if _, ok := got[setting]; ok {
					t.Errorf("setting %s counted as a label", setting)
				}
			}
		})
	}
}

// TestPolicyUnusableFile: a malformed, missing or unreadable policy file
// is an error the operator sees: a start logs it (naming the file and the
// problem) and applies the built-in rules; `labels` exits 65 with it.
func TestPolicyUnusableFile(t *testing.T) {
	polNoSystemPolicy(t)
	dir := t.TempDir()
	files := map[string]struct {
		path    string
		problem string
	}{
		"malformed":      {polFile(t, "enforce", `"labels": {"project": {"alow": ["x"]}}`), `unknown field \"labels.project.alow\"`},
		"bad mode":       {polFile(t, "strict", ``), `mode \"strict\"`},
		"bad pattern":    {polFile(t, "", `"labels": {"project": {"deny": ["adm[in"]}}`), "syntax error in pattern"},
		"missing":        {filepath.Join(dir, "absent.json"), "no such file or directory"},
		"a directory":    {dir, "not a regular file"},
		"truncated JSON": {polRaw(t, `{"mode": "enforce", "required": ["project"`), "unexpected end of JSON input"},
	}
	for name, f := range files {
		t.Run(name+"/run", func(t *testing.T) {
			k := newTask(t, bin.report)
			k.Setenv("PADDLE_POLICY_FILE", f.path)
			k.Setenv("PADDLE_PROJECT", "admin") // a broken policy cannot deny it
			r := k.Run()
			if r.Code != 0 {
				t.Fatalf("exit %d; want the command to run under the built-in rules; stderr:\n%s", r.Code, r.Stderr)
			}
			parseReport(t, r.Stdout)
			line := logLine(r.Stderr, "ERROR", "policy", f.path)
			if line == "" || !strings.Contains(line, f.problem) {
				t.Errorf("no error line naming %s and %q:\n%s", f.path, f.problem, r.Stderr)
			}
			if got := labelMap(t, k.LabelsFile())["project"]; got != "admin" {
				t.Errorf("project=%q; the built-in rules accept admin", got)
			}
		})
		t.Run(name+"/labels", func(t *testing.T) {
			k := newTask(t, "labels")
			k.Setenv("PADDLE_POLICY_FILE", f.path)
			r := k.Run()
			if r.Code != 65 || r.Stdout != "" {
				t.Fatalf("exit %d, stdout %q; want 65 and nothing printed", r.Code, r.Stdout)
			}
			if line := logLine(r.Stderr, "ERROR", f.path); !strings.Contains(line, f.problem) {
				t.Errorf("no error line naming %s and %q:\n%s", f.path, f.problem, r.Stderr)
			}
		})
	}
}

// TestPolicyLabelsCommandVetsJobSpecs: `paddle-entrypoint labels --policy`
// is what a platform team runs in CI over a job spec's environment.
func TestPolicyLabelsCommandVetsJobSpecs(t *testing.T) {
	polNoSystemPolicy(t)
	file := polFile(t, "enforce", polSpecPolicy)
	t.Run("accepted", func(t *testing.T) {
		k := polGoodTask(newTask(t, "labels", "--policy", file))
		k.Setenv("PADDLE_LABEL_COST_CENTER", "cc-1024")
		r := k.Run()
		if r.Code != 0 {
			t.Fatalf("exit %d; stderr:\n%s", r.Code, r.Stderr)
		}
		lines := strings.Split(strings.TrimSuffix(r.Stdout, "\n"), "\n")
		if len(lines) < 6 || lines[0] != "task_name=resnet50" || lines[1] != "project=search_ranking" ||
			lines[2] != "owner=alice@example.com" || !slices.Contains(lines, "cost_center=cc-1024") {
			t.Errorf("stdout:\n%s", r.Stdout)
		}
		polAbsent(t, "labels file", k.LabelsFile())
	})
	t.Run("rejected", func(t *testing.T) {
		k := newTask(t, "labels", "--policy", file)
		k.Setenv("PADDLE_PROJECT", "document_intelligence")
		k.Setenv("PADDLE_OWNER", "ai-team-ocr")
		k.Setenv("PADDLE_TASK_NAME", "x y")
		k.Setenv("PADDLE_LABEL_TEAM", "vision")
		r := k.Run()
		if r.Code != 65 || r.Stdout != "" {
			t.Fatalf("exit %d, stdout %q; stderr:\n%s", r.Code, r.Stdout, r.Stderr)
		}
		lines := polProblemLines(r.Stderr)
		if len(lines) != 2 || polLineFor(lines, "PADDLE_TASK_NAME") == "" || polLineFor(lines, "PADDLE_LABEL_TEAM") == "" {
			t.Errorf("want every problem listed:\n%s", r.Stderr)
		}
	})
	t.Run("env file setting", func(t *testing.T) {
		k := polGoodTask(newTask(t, "labels"))
		k.Setenv("PADDLE_POLICY_FILE", file)
		k.Setenv("PADDLE_OWNER", "bob@example.org")
		if r := k.Run(); r.Code != 65 {
			t.Fatalf("exit %d; stderr:\n%s", r.Code, r.Stderr)
		}
	})
}

// --- the system policy file ---

// polEtcScript runs its arguments with a private view of /etc: an overlay
// whose writes land in a tmpfs of this mount namespace only, holding $2 as
// /etc/paddle-entrypoint/policy.json ($2 a directory: policy.json is one).
const polEtcScript = `set -e
mnt=$1 src=$2
shift 2
mount -t tmpfs tmpfs "$mnt"
mkdir "$mnt/upper" "$mnt/work"
mount -t overlay overlay -o "lowerdir=/etc,upperdir=$mnt/upper,workdir=$mnt/work" /etc
mkdir -p /etc/paddle-entrypoint
rm -rf /etc/paddle-entrypoint/policy.json
if [ -d "$src" ]; then mkdir /etc/paddle-entrypoint/policy.json; else cp "$src" /etc/paddle-entrypoint/policy.json; fi
exec "$@"`

var polEtc struct {
	once sync.Once
	err  error
}

// polSystemPolicy makes k's entrypoint see src as the system policy file,
// without touching this machine's /etc: it runs in a private mount
// namespace (unshare) over an overlay of /etc. Tests that need it are
// skipped where that is impossible (not root, no unshare, no overlayfs).
func polSystemPolicy(t *testing.T, k *task, src string) {
	t.Helper()
	polEtc.once.Do(func() {
		if os.Geteuid() != 0 {
			polEtc.err = errors.New("not root")
			return
		}
		mnt, src := t.TempDir(), t.TempDir()
		out, err := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c",
			polEtcScript, "sh", mnt, src, "test", "-d", "/etc/paddle-entrypoint/policy.json").CombinedOutput()
		if err != nil {
			polEtc.err = errors.New(strings.TrimSpace(string(out)) + ": " + err.Error())
		}
	})
	if polEtc.err != nil {
		t.Skipf("cannot give the entrypoint a private /etc: %v", polEtc.err)
	}
	mnt := t.TempDir()
	k.Setup = func(c *exec.Cmd) {
		unshare, _ := harness.LookPath("unshare")
		c.Path = unshare
		c.Args = append([]string{"unshare", "-m", "--propagation", "private", "sh", "-c", polEtcScript, "sh", mnt, src, bin.entrypoint}, c.Args[1:]...)
	}
}

// TestPolicySystemFileWins: /etc/paddle-entrypoint/policy.json applies
// whenever it exists, whatever PADDLE_POLICY_FILE or --policy say, and its
// mode wins over PADDLE_LABELS_MODE.
func TestPolicySystemFileWins(t *testing.T) {
	system := polFile(t, "enforce", `"labels": {"project": {"allow": ["search_ranking"]}}`)
	permissive := polFile(t, "warn", ``)
	strict := polFile(t, "enforce", `"labels": {"project": {"deny": ["search_*"]}}`)

	t.Run("over PADDLE_POLICY_FILE and PADDLE_LABELS_MODE", func(t *testing.T) {
		k := newTask(t, bin.report)
		polSystemPolicy(t, k, system)
		k.Setenv("PADDLE_POLICY_FILE", permissive)
		k.Setenv("PADDLE_LABELS_MODE", "warn")
		k.Setenv("PADDLE_PROJECT", "admin")
		r := k.Run()
		if r.Code != 65 || r.Stdout != "" {
			t.Fatalf("exit %d, stdout %q; want the system policy's enforce; stderr:\n%s", r.Code, r.Stdout, r.Stderr)
		}
		if line := polLineFor(polProblemLines(r.Stderr), "PADDLE_PROJECT"); !strings.Contains(line, policy.SystemPath) {
			t.Errorf("rejection does not name %s:\n%s", policy.SystemPath, r.Stderr)
		}
		polAbsent(t, "labels file", k.LabelsFile())
	})
	t.Run("over --policy", func(t *testing.T) {
		k := newTask(t, "--policy", permissive, bin.report)
		polSystemPolicy(t, k, system)
		k.Setenv("PADDLE_PROJECT", "admin")
		if r := k.Run(); r.Code != 65 {
			t.Fatalf("exit %d; stderr:\n%s", r.Code, r.Stderr)
		}
	})
	t.Run("accepts what it allows", func(t *testing.T) {
		k := newTask(t, bin.report)
		polSystemPolicy(t, k, system)
		k.Setenv("PADDLE_POLICY_FILE", strict) // would deny search_ranking
		k.Setenv("PADDLE_PROJECT", "search_ranking")
		r := k.Run()
		if r.Code != 0 {
			t.Fatalf("exit %d; stderr:\n%s", r.Code, r.Stderr)
		}
		parseReport(t, r.Stdout)
		if got := labelMap(t, k.LabelsFile())["project"]; got != "search_ranking" {
			t.Errorf("project=%q", got)
		}
	})
	t.Run("labels command", func(t *testing.T) {
		k := newTask(t, "labels", "--policy", permissive)
		polSystemPolicy(t, k, system)
		k.Setenv("PADDLE_PROJECT", "admin")
		r := k.Run()
		if r.Code != 65 || r.Stdout != "" {
			t.Fatalf("exit %d, stdout %q; stderr:\n%s", r.Code, r.Stdout, r.Stderr)
		}
	})
}

// TestPolicySystemFileUnusable: a broken system policy is reported naming
// it, and the task's own PADDLE_POLICY_FILE does not take its place.
func TestPolicySystemFileUnusable(t *testing.T) {
	broken := polFile(t, "enforce", `"labels": {"project": {"allow": ["search_ranking"]}`)
	strict := polFile(t, "enforce", `"labels": {"project": {"deny": ["admin"]}}`)
	for name, src := range map[string]string{"malformed": broken, "a directory": t.TempDir()} {
		t.Run(name+"/run", func(t *testing.T) {
			k := newTask(t, bin.report)
			polSystemPolicy(t, k, src)
			k.Setenv("PADDLE_POLICY_FILE", strict)
			k.Setenv("PADDLE_PROJECT", "admin")
			r := k.Run()
			if r.Code != 0 {
				t.Fatalf("exit %d: the task's own policy took the broken system policy's place; stderr:\n%s", r.Code, r.Stderr)
			}
			if logLine(r.Stderr, "ERROR", policy.SystemPath) == "" {
				t.Errorf("no error line names %s:\n%s", policy.SystemPath, r.Stderr)
			}
		})
		t.Run(name+"/labels", func(t *testing.T) {
			k := newTask(t, "labels")
			polSystemPolicy(t, k, src)
			k.Setenv("PADDLE_POLICY_FILE", strict)
			r := k.Run()
			if r.Code != 65 || logLine(r.Stderr, "ERROR", policy.SystemPath) == "" {
				t.Fatalf("exit %d; want 65 naming %s; stderr:\n%s", r.Code, policy.SystemPath, r.Stderr)
			}
		})
	}
}

// --- sensitive data ---

// sensitiveValues are one value of each kind, in the variables a task
// would put them in by mistake, with the text that must never appear in
// the output (a distinctive part of the value).
var sensitiveValues = []struct {
	v, value, secret, kind, key string
}{
	{"PADDLE_LABEL_NOTE", "run-110101199003074514-x", "110101199003074514", "resident identity number", "note"},
	{"PADDLE_LABEL_FW", "１１０１０５１９４９１２３１００２Ｘ", "１１０１０５", "resident identity number", "fw"},
	{"PADDLE_TASK_NAME", "card-4111111111111111", "4111111111111111", "payment card number", "task_name"},
	{"PADDLE_OWNER", "password=Hunter2Secret", "Hunter2Secret", "password assignment", "owner"},
	{"PADDLE_PROJECT", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjMifQ.c2lnbmF0dXJl", "eyJzdWIiOiIxMjMifQ", "JWT", "project"},
	{"PADDLE_TASK_ID", "AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE", "cloud access key", "task_id"},
	{"PADDLE_LABEL_KEY", "-----BEGIN RSA PRIVATE KEY-----", "BEGIN RSA", "private key", "key"},
	{"PADDLE_LABEL_DB_PASSWORD", "Hunter3Secret", "Hunter3Secret", "holds a secret", "db_password"},
}

// TestSensitiveNeverWrittenSentOrLogged: in warn mode each sensitive value
// is dropped, its default kept, and it appears neither in the labels file,
// nor in the registration, nor in the logs, which name the variable and the
// kind instead. In both log formats.
func TestSensitiveNeverWrittenSentOrLogged(t *testing.T) {
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			m := newRegMonitor(t, "200")
			k := newTask(t, bin.report)
			k.Setenv("PADDLE_MONITOR_URL", m.URL)
			k.Setenv("PADDLE_ENTRYPOINT_LOG_FORMAT", format)
			k.Setenv("PADDLE_ENTRYPOINT_LOG", "debug")
			for _, s := range sensitiveValues {
				k.Setenv(s.v, s.value)
			}
			r := k.Run()
			if r.Code != 0 {
				t.Fatalf("exit %d; stderr:\n%s", r.Code, r.Stderr)
			}
			rep := parseReport(t, r.Stdout)
			labelsFile, err := os.ReadFile(k.LabelsFile())
			if err != nil {
				t.Fatal(err)
			}
			reqs := m.Requests()
			if len(reqs) != 1 {
				t.Fatalf("monitor received %d requests, want 1", len(reqs))
			}
			outputs := map[string]string{"labels file": string(labelsFile), "stderr": r.Stderr, "registration": string(reqs[0].Body)}
			for _, s := range sensitiveValues {
				for where, text := range outputs {
					if strings.Contains(text, s.secret) {
						t.Errorf("%s holds the %s from %s", where, s.kind, s.v)
					}
				}
				if !polLogNames(r.Stderr, format, s.v, s.kind) {
					t.Errorf("no log line names %s and %q", s.v, s.kind)
				}
			}
			got := labelMap(t, k.LabelsFile())
			if got["task_name"] != "unknown_task" || got["project"] != "default" || got["owner"] != "anonymous" {
				t.Errorf("defaults not kept: %v", got)
			}
			if got["invalid_labels"] != "task_name,project,owner,task_id,db_password,fw,key,note" {
				t.Errorf("invalid_labels=%q", got["invalid_labels"])
			}
			// The command's environment is its own, untouched but for the
			// fresh task id that replaced the key.
			if id, _ := rep.Getenv("PADDLE_TASK_ID"); id != got["task_id"] || id == "AKIAIOSFODNN7EXAMPLE" {
				t.Errorf("command's PADDLE_TASK_ID=%q, labels task_id=%q", id, got["task_id"])
			}
		})
	}
}

// polLogNames reports whether a log line names variable v and kind.
func polLogNames(stderr, format, v, kind string) bool {
	for _, line := range strings.Split(stderr, "\n") {
		if format == "json" {
			var rec map[string]any
			if json.Unmarshal([]byte(line), &rec) == nil && rec["var"] == v {
				if rule, _ := rec["rule"].(string); strings.Contains(rule, kind) {
					return true
				}
			}
			continue
		}
		if strings.Contains(line, "var="+v+" ") && strings.Contains(line, kind) {
			return true
		}
	}
	return false
}

// TestSensitiveEnforceRefusesStart: in enforce mode a sensitive value stops
// the start (65) with nothing written, and the value is still not logged.
func TestSensitiveEnforceRefusesStart(t *testing.T) {
	m := newRegMonitor(t, "200")
	k := newTask(t, bin.report)
	k.Setenv("PADDLE_LABELS_MODE", "enforce")
	k.Setenv("PADDLE_MONITOR_URL", m.URL)
	k.Setenv("PADDLE_LABEL_CARD", "pay-5555-5555-5555-4444")
	r := k.Run()
	if r.Code != 65 || r.Stdout != "" {
		t.Fatalf("exit %d, stdout %q; stderr:\n%s", r.Code, r.Stdout, r.Stderr)
	}
	if strings.Contains(r.Stderr, "5555") {
		t.Errorf("stderr holds the card number:\n%s", r.Stderr)
	}
	if line := polLineFor(polProblemLines(r.Stderr), "PADDLE_LABEL_CARD"); !strings.Contains(line, "payment card number") {
		t.Errorf("no line names PADDLE_LABEL_CARD and the kind:\n%s", r.Stderr)
	}
	polAbsent(t, "labels file", k.LabelsFile())
	polAbsent(t, "spool file", k.SpoolPath())
	if n := len(m.Requests()); n != 0 {
		t.Errorf("monitor received %d requests", n)
	}
}

// TestSensitiveOrdinaryNamesPass: names built from timestamps, task ids,
// UUIDs and commit ids are not mistaken for sensitive data, even in
// enforce mode.
func TestSensitiveOrdinaryNamesPass(t *testing.T) {
	values := map[string]string{
		"PADDLE_TASK_NAME":       "run-1732950000007",
		"PADDLE_TASK_ID":         "job-1732950000123456789",
		"PADDLE_PROJECT":         "ocr-20241130-153000",
		"PADDLE_OWNER":           "ai-team-1732950000",
		"PADDLE_LABEL_RUN_UUID":  "3f2b8c1e-9d4a-4f6b-8e2c-1a2b3c4d5e6f",
		"PADDLE_LABEL_COMMIT":    "0a1b2c3d4e5f60718293a4b5c6d7e8f901234567",
		"PADDLE_LABEL_STEP":      "1732950000123456",
		"PADDLE_LABEL_TOKENIZER": "bert-base-chinese",
		"PADDLE_LABEL_SECRETARY": "alice",
	}
	k := newTask(t, "/bin/true")
	k.Setenv("PADDLE_LABELS_MODE", "enforce")
	for v, value := range values {
		k.Setenv(v, value)
	}
	r := k.Run()
	if r.Code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", r.Code, r.Stderr)
	}
	got := labelMap(t, k.LabelsFile())
	for v, value := range values {
		key := strings.ToLower(strings.TrimPrefix(strings.TrimPrefix(v, "PADDLE_LABEL_"), "PADDLE_"))
		if got[key] != value {
			t.Errorf("%s=%q; want %q", key, got[key], value)
		}
	}
	if lines := polProblemLines(r.Stderr); len(lines) != 0 {
		t.Errorf("problems reported:\n%s", strings.Join(lines, "\n"))
	}
}

// --- least privilege ---

// TestPrivilegeFileModes: the labels file is 0644 whatever the umask made
// of its temporary file; a spool directory the entrypoint creates is 0700
// and the spool file 0600.
func TestPrivilegeFileModes(t *testing.T) {
	k := newTask(t, "/bin/true")
	spool := filepath.Join(k.Dir, "var", "lib", "spool-0.db")
	k.Setenv("PADDLE_SPOOL_PATH", spool)
	k.Setenv("PADDLE_MONITOR_URL", regDownURL(t))
	k.Setenv("PADDLE_REGISTER_BUDGET", "500ms")
	k.Setenv("PADDLE_LABEL_NOTE", "110101199003074514")
	r := k.Run()
	if r.Code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", r.Code, r.Stderr)
	}
	modes := map[string]fs.FileMode{
		k.LabelsFile():              0o644,
		filepath.Join(k.Dir, "var"): 0o700 | fs.ModeDir,
		filepath.Dir(spool):         0o700 | fs.ModeDir,
		spool:                       0o600,
	}
	for p, want := range modes {
		fi, err := os.Stat(p)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if got := fi.Mode() & (fs.ModePerm | fs.ModeDir); got != want {
			t.Errorf("%s: mode %v, want %v", p, got, want)
		}
	}
	for _, p := range []string{k.LabelsFile(), spool} {
		if b, _ := os.ReadFile(p); strings.Contains(string(b), "110101199003074514") {
			t.Errorf("%s holds the identity number", p)
		}
	}
}

// privDir returns a directory every user can enter, holding copies of the
// entrypoint and its probe, for starts as another user (the test binaries'
// own directory is private to root).
func privDir(t *testing.T) (dir, entrypoint string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "paddle-privilege-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bindir := filepath.Join(dir, "bin")
	os.Mkdir(bindir, 0o755)
	for _, src := range []string{bin.entrypoint, bin.probe} {
		data, err := os.ReadFile(src)
		if err != nil {
			continue // no probe built: it only costs the GPU fields
		}
		if err := os.WriteFile(filepath.Join(bindir, filepath.Base(src)), data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir, filepath.Join(bindir, filepath.Base(bin.entrypoint))
}

// nobody is the unprivileged user of the tests (nobody/nogroup).
const nobody = 65534

// TestPrivilegeNonRootNoCapabilities: the entrypoint does its whole job as
// an ordinary user with no capability and no supplementary group: it writes
// the labels file where it may, says so once where it may not, registers,
// spools into a directory it creates 0700, and execs the command, which
// runs with that user's (empty) privileges.
func TestPrivilegeNonRootNoCapabilities(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to start the entrypoint as another user")
	}
	dir, entrypoint := privDir(t)
	writable := filepath.Join(dir, "run")
	shared := filepath.Join(dir, "lib") // like a node volume provisioned 1777
	for _, d := range []string{writable, shared} {
		os.Mkdir(d, 0o755)
		os.Chmod(d, 0o777|fs.ModeSticky)
	}
	readOnly := filepath.Join(dir, "ro") // root's, 0755: not writable by nobody
	os.Mkdir(readOnly, 0o755)

	for _, tt := range []struct {
		name, labelsDir string
		written         bool
	}{
		{"writable labels directory", writable, true},
		{"unwritable labels directory", readOnly, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := newRegMonitor(t, "503")
			spool := filepath.Join(shared, strings.ReplaceAll(tt.name, " ", "-"), "spool-65534.db")
			labels := filepath.Join(tt.labelsDir, "paddle-task.labels")
			k := newTask(t, "/bin/cat", "/proc/self/status")
			k.Setenv("PADDLE_LABELS_FILE", labels)
			k.Setenv("PADDLE_SPOOL_PATH", spool)
			k.Setenv("PADDLE_MONITOR_URL", m.URL)
			k.Setenv("PADDLE_REGISTER_BUDGET", "1s")
			k.Setenv("PADDLE_PROJECT", "search_ranking")
			k.Cwd = dir
			k.Setup = func(c *exec.Cmd) {
				c.Path = entrypoint
				c.Args[0] = entrypoint
				c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{}}}
			}
			r := k.Run()
			if r.Code != 0 {
				t.Fatalf("exit %d; stderr:\n%s", r.Code, r.Stderr)
			}
			status := map[string]string{}
			for _, line := range strings.Split(r.Stdout, "\n") {
				k, v, _ := strings.Cut(line, ":")
				status[k] = strings.Join(strings.Fields(v), " ")
			}
			want := map[string]string{
				"Uid": "65534 65534 65534 65534", "Gid": "65534 65534 65534 65534", "Groups": "",
				"CapInh": "0000000000000000", "CapPrm": "0000000000000000",
				"CapEff": "0000000000000000", "CapAmb": "0000000000000000",
			}
			for key, v := range want {
				if got, ok := status[key]; !ok || got != v {
					t.Errorf("command's %s: %q, want %q", key, got, v)
				}
			}
			if len(m.Requests()) == 0 {
				t.Error("no registration attempt as an unprivileged user")
			}
			fi, err := os.Stat(spool)
			if err != nil {
				t.Fatalf("registration not spooled: %v\n%s", err, r.Stderr)
			}
			if st := fi.Sys().(*syscall.Stat_t); st.Uid != nobody || fi.Mode().Perm() != 0o600 {
				t.Errorf("spool file uid %d mode %v; want %d, 0600", st.Uid, fi.Mode().Perm(), nobody)
			}
			if di, err := os.Stat(filepath.Dir(spool)); err != nil || di.Mode().Perm() != 0o700 {
				t.Errorf("spool directory: %v, %v; want 0700", di.Mode().Perm(), err)
			}
			n := strings.Count(r.Stderr, "labels file not written")
			if tt.written {
				fi, err := os.Stat(labels)
				if err != nil || fi.Mode().Perm() != 0o644 || fi.Sys().(*syscall.Stat_t).Uid != nobody {
					t.Errorf("labels file: %v, %v", fi, err)
				} else if labelMap(t, labels)["project"] != "search_ranking" {
					t.Errorf("labels file: %v", labelMap(t, labels))
				}
				if n != 0 {
					t.Errorf("warned about the labels file:\n%s", r.Stderr)
				}
			} else {
				polAbsent(t, "labels file", labels)
				if n != 1 {
					t.Errorf("%d warnings about the labels file, want 1:\n%s", n, r.Stderr)
				}
			}
		})
	}
}

// privShellSpy builds testdata/shellspy recording into marker.
func privShellSpy(t *testing.T, dir, marker string) string {
	t.Helper()
	spy := filepath.Join(dir, "shellspy")
	out, err := exec.Command("gcc", "-O2", `-DMARKER="`+marker+`"`, "-o", spy, "testdata/shellspy/shellspy.c").CombinedOutput()
	if err != nil {
		t.Fatalf("building shellspy: %v\n%s", err, out)
	}
	return spy
}

// privSpyScript mounts $1 over every shell where one could be found, in a
// private mount namespace, then runs the rest of its arguments.
const privSpyScript = `set -e
spy=$1
shift
for f in /bin/sh /bin/bash /bin/dash /usr/bin/sh /usr/bin/bash /usr/bin/dash; do
	if [ -e "$f" ]; then mount --bind "$spy" "$f"; fi
done
exec "$@"`

// TestPrivilegeNoShell: no shell is ever invoked, and the command's argv
// reaches it byte for byte, shell syntax and all. Every shell the
// entrypoint could start is replaced by a spy: first in PATH, and, where
// the test may use a private mount namespace, at its absolute path too. A
// control run through the same trap, whose command is itself a shell,
// shows the spy would see a shell.
func TestPrivilegeNoShell(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "shell-invoked")
	spy := privShellSpy(t, dir, marker)
	fake := filepath.Join(dir, "fakebin")
	os.Mkdir(fake, 0o755)
	for _, name := range []string{"sh", "bash", "dash", "ash", "zsh"} {
		if err := os.Link(spy, filepath.Join(fake, name)); err != nil {
			t.Fatal(err)
		}
	}
	namespace := os.Geteuid() == 0 && exec.Command("unshare", "-m", "--propagation", "private", "true").Run() == nil
	if !namespace {
		t.Log("no private mount namespace: shells are trapped in PATH only")
	}
	trap := func(k *task) {
		k.Setenv("PATH", fake+":/usr/local/bin:/usr/bin:/bin")
		if namespace {
			k.Setup = func(c *exec.Cmd) {
				unshare, _ := harness.LookPath("unshare")
				c.Path = unshare
				c.Args = append([]string{"unshare", "-m", "--propagation", "private", "/bin/sh", "-c", privSpyScript, "sh", spy, bin.entrypoint}, c.Args[1:]...)
			}
		}
	}
	invoked := func() string {
		b, _ := os.ReadFile(marker)
		os.Remove(marker)
		return string(b)
	}

	t.Run("control", func(t *testing.T) {
		k := newTask(t, "sh", "-c", "true")
		trap(k)
		if r := k.Run(); r.Code != 0 {
			t.Fatalf("exit %d; stderr:\n%s", r.Code, r.Stderr)
		}
		if invoked() == "" {
			t.Fatal("the spy did not see a shell run as the command: the trap is broken")
		}
		if namespace {
			k := newTask(t, "/bin/sh", "-c", "true")
			trap(k)
			k.Run()
			if invoked() == "" {
				t.Fatal("the spy at /bin/sh did not see /bin/sh run")
			}
		}
	})

	args := []string{"--lr", "0.1", "$(touch " + filepath.Join(dir, "pwned") + ")", "a b", "", "*", ";", "|", "&&", "'", `"`, `\`, "\n", "`id`", "$HOME", "~", "-e", "--"}
	t.Run("argv unchanged", func(t *testing.T) {
		m := newRegMonitor(t, "200")
		k := newTask(t, append([]string{bin.report}, args...)...)
		trap(k)
		k.Setenv("PADDLE_MONITOR_URL", m.URL)
		k.Setenv("PADDLE_PROJECT", "search_ranking")
		r := k.Run()
		if r.Code != 0 {
			t.Fatalf("exit %d; stderr:\n%s", r.Code, r.Stderr)
		}
		rep := parseReport(t, r.Stdout)
		if !slices.Equal(rep.Argv, append([]string{bin.report}, args...)) {
			t.Errorf("argv %q, want %q", rep.Argv, append([]string{bin.report}, args...))
		}
		if s := invoked(); s != "" {
			t.Errorf("a shell was invoked: %s", s)
		}
		polAbsent(t, "file of the command substitution", filepath.Join(dir, "pwned"))
	})
	t.Run("shell syntax as the command", func(t *testing.T) {
		k := newTask(t, "echo hi; touch "+filepath.Join(dir, "pwned2"))
		trap(k)
		if r := k.Run(); r.Code != 127 {
			t.Errorf("exit %d, want 127 (no such program); stderr:\n%s", r.Code, r.Stderr)
		}
		if s := invoked(); s != "" {
			t.Errorf("a shell was invoked: %s", s)
		}
		polAbsent(t, "file of the shell command", filepath.Join(dir, "pwned2"))
	})
	t.Run("labels command", func(t *testing.T) {
		k := newTask(t, "labels")
		trap(k)
		if r := k.Run(); r.Code != 0 {
			t.Errorf("exit %d; stderr:\n%s", r.Code, r.Stderr)
		}
		if s := invoked(); s != "" {
			t.Errorf("a shell was invoked: %s", s)
		}
	})
}
