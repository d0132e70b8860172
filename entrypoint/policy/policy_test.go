package policy

import (
	"errors"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// specExample is the policy of section 9 of the contract.
const specExample = `{
  "mode": "enforce",
  "required": ["task_name", "project", "owner"],
  "labels": {
    "project": {"allow": ["search_ranking", "document_intelligence", "ocr-*"], "deny": ["admin", "system*"]},
    "owner":   {"allow": ["*@example.com", "ai-team-*"]}
  },
  "extra_labels": ["cost_center"]
}`

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPolicyLoadSpecExample(t *testing.T) {
	p, err := Load(writeFile(t, t.TempDir(), "policy.json", specExample))
	if err != nil {
		t.Fatal(err)
	}
	if p.Mode != ModeEnforce {
		t.Errorf("Mode = %q", p.Mode)
	}
	if !slices.Equal(p.Required, []string{"task_name", "project", "owner"}) {
		t.Errorf("Required = %q", p.Required)
	}
	if !p.ExtraListed || !slices.Equal(p.ExtraLabels, []string{"cost_center"}) {
		t.Errorf("ExtraLabels = %q (listed %v)", p.ExtraLabels, p.ExtraListed)
	}
	if got := p.Labels["project"].Deny; !slices.Equal(got, []string{"admin", "system*"}) {
		t.Errorf("project deny = %q", got)
	}
	if !strings.HasSuffix(p.Source, "policy.json") {
		t.Errorf("Source = %q", p.Source)
	}
}

func TestPolicyLoadMinimal(t *testing.T) {
	for _, text := range []string{`{}`, `{"mode": null, "labels": null, "extra_labels": null}`, " {\n}\n"} {
		p, err := Parse([]byte(text))
		if err != nil {
			t.Fatalf("Parse(%q): %v", text, err)
		}
		if p.Mode != "" || p.ExtraListed || len(p.Required) != 0 || len(p.Labels) != 0 {
			t.Errorf("Parse(%q) = %+v; want an empty policy", text, p)
		}
	}
}

// Every malformed file is an error that names the file and the problem, and
// is classified by errors.Is.
func TestPolicyLoadMalformed(t *testing.T) {
	tests := []struct {
		name, text string
		want       []string // substrings of the error, besides the file name
		is         error
	}{
		{"unknown top-level field", `{"modes": "enforce"}`, []string{`unknown field "modes"`}, ErrMalformed},
		{"field differing in case", `{"Mode": "enforce"}`, []string{`unknown field "Mode"`}, ErrMalformed},
		{"unknown rule field", `{"labels": {"project": {"alow": ["a"]}}}`, []string{`unknown field "labels.project.alow"`}, ErrMalformed},
		{"repeated field", `{"mode": "enforce", "mode": "warn"}`, []string{`field "mode" given twice`}, ErrMalformed},
		{"repeated label key", `{"labels": {"project": {}, "project": {"allow": ["x"]}}}`, []string{`"labels.project" given twice`}, ErrMalformed},
		{"mode not a mode", `{"mode": "strict"}`, []string{`mode "strict"`, "warn", "enforce"}, ErrMalformed},
		{"mode in capitals", `{"mode": "Enforce"}`, []string{`mode "Enforce"`}, ErrMalformed},
		{"mode not a string", `{"mode": 1}`, []string{"mode"}, ErrMalformed},
		{"bad pattern", `{"labels": {"project": {"allow": ["ocr-["]}}}`, []string{"labels.project.allow", `"ocr-["`, "syntax error in pattern"}, path.ErrBadPattern},
		{"bad deny pattern", `{"labels": {"owner": {"deny": ["\\"]}}}`, []string{"labels.owner.deny"}, path.ErrBadPattern},
		{"empty pattern", `{"labels": {"project": {"allow": [""]}}}`, []string{"empty pattern"}, ErrMalformed},
		{"key in capitals", `{"required": ["Project"]}`, []string{`"Project"`, "lower case"}, ErrMalformed},
		{"computed key required", `{"required": ["gpu_count"]}`, []string{`"gpu_count" is computed`}, ErrMalformed},
		{"computed key restricted", `{"labels": {"hostname": {"allow": ["x"]}}}`, []string{`"hostname" is computed`}, ErrMalformed},
		{"required extra not listed", `{"required": ["team"], "extra_labels": ["cost_center"]}`, []string{`"team" can never be set`}, ErrMalformed},
		{"rule for an extra not listed", `{"labels": {"team": {}}, "extra_labels": []}`, []string{`"team" can never be set`}, ErrMalformed},
		{"built-in listed as extra", `{"extra_labels": ["project"]}`, []string{`"project" is a built-in label`}, ErrMalformed},
		{"required not a list", `{"required": "project"}`, []string{"required"}, ErrMalformed},
		{"syntax error", `{"mode": "enforce",}`, []string{"invalid character"}, ErrMalformed},
		{"not an object", `["enforce"]`, nil, ErrMalformed},
		{"null", `null`, []string{"not a JSON object"}, ErrMalformed},
		{"empty file", ``, []string{"unexpected end of JSON input"}, ErrMalformed},
		{"data after the object", `{} {}`, []string{"after top-level value"}, ErrMalformed},
		{"labels not an object", `{"labels": []}`, []string{"labels"}, ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := writeFile(t, t.TempDir(), "policy.json", tt.text)
			p, err := Load(file)
			if err == nil {
				t.Fatalf("Load accepted %s: %+v", tt.text, p)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "policy file "+file+": ") {
				t.Errorf("error does not start by naming the file: %v", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
			if !errors.Is(err, tt.is) {
				t.Errorf("error %v is not %v", err, tt.is)
			}
		})
	}
}

func TestPolicyLoadFileProblems(t *testing.T) {
	dir := t.TempDir()
	t.Run("missing", func(t *testing.T) {
		file := filepath.Join(dir, "absent.json")
		_, err := Load(file)
		if !errors.Is(err, fs.ErrNotExist) || err.Error() != "policy file "+file+": no such file or directory" {
			t.Errorf("Load(missing) = %v", err)
		}
	})
	t.Run("directory", func(t *testing.T) {
		_, err := Load(dir)
		if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), "a directory") {
			t.Errorf("Load(directory) = %v", err)
		}
	})
	t.Run("too large", func(t *testing.T) {
		big := `{"required": [` + strings.Repeat(`"project",`, MaxFileSize/10) + `"owner"]}`
		_, err := Load(writeFile(t, dir, "big.json", big))
		if !errors.Is(err, ErrTooLarge) {
			t.Errorf("Load(big) = %v", err)
		}
	})
	t.Run("named pipe does not block", func(t *testing.T) {
		fifo := filepath.Join(dir, "fifo")
		if err := syscall.Mkfifo(fifo, 0o644); err != nil {
			t.Skip("mkfifo:", err)
		}
		done := make(chan error, 1)
		go func() { _, err := Load(fifo); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), "named pipe") {
				t.Errorf("Load(fifo) = %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Load blocked on a named pipe")
		}
	})
	t.Run("device", func(t *testing.T) {
		_, err := Load("/dev/zero")
		if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), "a device") {
			t.Errorf("Load(/dev/zero) = %v", err)
		}
	})
	t.Run("unreadable", func(t *testing.T) {
		if os.Geteuid() == 0 {
			t.Skip("root reads any file")
		}
		file := writeFile(t, dir, "secret.json", "{}")
		os.Chmod(file, 0)
		_, err := Load(file)
		if !errors.Is(err, fs.ErrPermission) {
			t.Errorf("Load(unreadable) = %v", err)
		}
	})
}

func TestPolicyResolve(t *testing.T) {
	dir := t.TempDir()
	system := writeFile(t, dir, "system.json", `{"mode": "enforce"}`)
	user := writeFile(t, dir, "user.json", `{"mode": "warn"}`)
	broken := writeFile(t, dir, "broken.json", `{"mode": "enforce"`)
	absent := filepath.Join(dir, "absent.json")
	dangling := filepath.Join(dir, "dangling.json")
	if err := os.Symlink(absent, dangling); err != nil {
		t.Fatal(err)
	}
	linked := filepath.Join(dir, "linked.json") // as a ConfigMap mounts it
	if err := os.Symlink(system, linked); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name           string
		system, user   string
		wantSource     string // "" for no policy
		wantErr        error
		wantErrMention string
	}{
		{"system wins over user", system, user, system, nil, ""},
		{"system alone", system, "", system, nil, ""},
		{"system through a link", linked, user, linked, nil, ""},
		{"user where no system file", absent, user, user, nil, ""},
		{"nothing", absent, "", "", nil, ""},
		{"user asked for but missing", absent, filepath.Join(dir, "nope.json"), "", fs.ErrNotExist, "nope.json"},
		{"broken system file does not fall back to user", broken, user, "", ErrMalformed, "broken.json"},
		{"dangling system link is an error, not absence", dangling, user, "", fs.ErrNotExist, "dangling.json"},
		{"broken user file", absent, broken, "", ErrMalformed, "broken.json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Resolve(tt.system, tt.user)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.wantErrMention) {
					t.Fatalf("Resolve = %+v, %v; want %v naming %s", p, err, tt.wantErr, tt.wantErrMention)
				}
				if p != nil {
					t.Errorf("Resolve returned a policy with its error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tt.wantSource == "" && p != nil:
				t.Errorf("Resolve = %+v; want no policy", p)
			case tt.wantSource != "" && (p == nil || p.Source != tt.wantSource):
				t.Errorf("Resolve = %+v; want the policy from %s", p, tt.wantSource)
			}
		})
	}
}

func TestPolicyCheckValue(t *testing.T) {
	p, err := Parse([]byte(specExample))
	if err != nil {
		t.Fatal(err)
	}
	p.Source = "/etc/paddle-entrypoint/policy.json"
	tests := []struct {
		key, value string
		want       error // nil, ErrDenied or ErrNotAllowed
	}{
		{"project", "search_ranking", nil},
		{"project", "SEARCH_RANKING", nil},
		{"project", "Document_Intelligence", nil},
		{"project", "ocr-v2", nil},
		{"project", "OCR-zh", nil},
		{"project", "ocr", ErrNotAllowed},
		{"project", "admin", ErrDenied},
		{"project", "ADMIN", ErrDenied},
		{"project", "system", ErrDenied},
		{"project", "System-ops", ErrDenied},
		{"project", "search_ranking2", ErrNotAllowed},
		{"project", "default", ErrNotAllowed},
		// Cyrillic а (U+0430) for Latin a: not the denied word, and not in
		// the allow-list either, which is what stops it.
		{"project", "\u0430dmin", ErrNotAllowed},
		{"project", "se\u0430rch_ranking", ErrNotAllowed},
		{"owner", "alice@example.com", nil},
		{"owner", "Alice@EXAMPLE.com", nil},
		{"owner", "ai-team-nlp", nil},
		{"owner", "alice@example.com.evil", ErrNotAllowed},
		{"owner", "mallory@evil.com", ErrNotAllowed},
		{"task_name", "anything", nil}, // no rule for the key
		{"cost_center", "cc-1", nil},
	}
	for _, tt := range tests {
		err := p.CheckValue(tt.key, tt.value)
		switch {
		case tt.want == nil && err != nil:
			t.Errorf("CheckValue(%s, %q) = %v; want allowed", tt.key, tt.value, err)
		case tt.want != nil && !errors.Is(err, tt.want):
			t.Errorf("CheckValue(%s, %q) = %v; want %v", tt.key, tt.value, err, tt.want)
		case err != nil && !strings.Contains(err.Error(), p.Source):
			t.Errorf("CheckValue(%s, %q) = %v; does not name the policy file", tt.key, tt.value, err)
		}
	}
	if err := p.CheckValue("project", "admin"); err == nil || !strings.Contains(err.Error(), `pattern "admin"`) {
		t.Errorf("deny error does not name the pattern: %v", err)
	}
}

// A deny-list alone cannot stop look-alike letters; this is why the docs
// tell administrators to use allow-lists.
func TestPolicyDenyListMissesLookAlikes(t *testing.T) {
	p, err := Parse([]byte(`{"labels": {"project": {"deny": ["admin"]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.CheckValue("project", "admin"); !errors.Is(err, ErrDenied) {
		t.Fatalf("admin not denied: %v", err)
	}
	if err := p.CheckValue("project", "\u0430dmin"); err != nil {
		t.Fatalf("expected the deny-list to miss Cyrillic \u0430dmin, got %v", err)
	}
}

func TestPolicyNilAllowsEverything(t *testing.T) {
	var p *Policy
	if err := p.CheckValue("project", "admin"); err != nil {
		t.Error(err)
	}
	if !p.AllowsExtra("anything") {
		t.Error("nil policy refused an extra label")
	}
}

func TestPolicyAllowsExtra(t *testing.T) {
	tests := []struct {
		text string
		key  string
		want bool
	}{
		{`{}`, "team", true},
		{`{"extra_labels": null}`, "team", true},
		{`{"extra_labels": []}`, "team", false},
		{`{"extra_labels": ["cost_center"]}`, "cost_center", true},
		{`{"extra_labels": ["cost_center"]}`, "team", false},
	}
	for _, tt := range tests {
		p, err := Parse([]byte(tt.text))
		if err != nil {
			t.Fatal(err)
		}
		if got := p.AllowsExtra(tt.key); got != tt.want {
			t.Errorf("%s: AllowsExtra(%q) = %v; want %v", tt.text, tt.key, got, tt.want)
		}
	}
}

// FuzzPolicyParse checks that Parse never panics, and that a policy it
// accepts never fails on a pattern later: every accepted pattern is usable.
func FuzzPolicyParse(f *testing.F) {
	f.Add(specExample)
	f.Add(`{"labels": {"project": {"allow": ["[a-z]*"], "deny": ["\\*"]}}}`)
	f.Add(`{"mode": "warn", "required": ["owner"], "extra_labels": []}`)
	f.Add(`{"settings": {"PADDLE_GPU_SHARE": 0.5, "PADDLE_MONITOR_URL": "https://m"}, "locked": ["accounting", "PADDLE_OTEL"]}`)
	f.Add(`{"locked": "accounting"}`)
	f.Fuzz(func(t *testing.T, text string) {
		p, err := Parse([]byte(text))
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, path.ErrBadPattern) {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		for key, r := range p.Labels {
			for _, pat := range append(r.Allow, r.Deny...) {
				if _, err := path.Match(pat, "x"); err != nil {
					t.Fatalf("accepted bad pattern %q for %s", pat, key)
				}
			}
		}
		if p.Mode != "" && p.Mode != ModeWarn && p.Mode != ModeEnforce {
			t.Fatalf("accepted mode %q", p.Mode)
		}
		for _, v := range append(slices.Collect(maps.Keys(p.Settings)), p.Locked...) {
			if checkVariable(v) != nil {
				t.Fatalf("accepted variable %q", v)
			}
		}
	})
}
