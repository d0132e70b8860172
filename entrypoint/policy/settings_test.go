package policy

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// table is a stand-in for the entrypoint's settings: a few of its
// variables, each with its own rule.
type table map[string]func(string) error

func (t table) Has(v string) bool { _, ok := t[v]; return ok }
func (t table) Check(v, s string) error {
	return t[v](s)
}

var entrypointLike = table{
	"PADDLE_MONITOR_URL":     func(string) error { return nil },
	"PADDLE_ENTRYPOINT_MODE": oneOf("exec", "supervise"),
	"PADDLE_HEARTBEAT":       func(string) error { return nil },
	"PADDLE_OTEL":            oneOf("on", "off", "true", "false", "1", "0"),
	"PADDLE_GPU_SHARE": func(s string) error {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || f <= 0 || f > 1 {
			return errors.New("must be a number in (0, 1]")
		}
		return nil
	},
}

func init() {
	for _, v := range Accounting {
		if _, ok := entrypointLike[v]; !ok {
			entrypointLike[v] = func(string) error { return nil }
		}
	}
}

func oneOf(vals ...string) func(string) error {
	return func(s string) error {
		if !slices.Contains(vals, s) {
			return fmt.Errorf("must be one of %s", strings.Join(vals, ", "))
		}
		return nil
	}
}

// The section's example file: settings kept as text (a number and a
// boolean as written), "accounting" expanded to the documented set.
func TestPolicySettingsAndLocked(t *testing.T) {
	p, err := Load(filepath.Join("testdata", "locked-accounting.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"PADDLE_MONITOR_URL":     "https://monitor.example:8443",
		"PADDLE_ENTRYPOINT_MODE": "supervise",
		"PADDLE_HEARTBEAT":       "60s",
		"PADDLE_GPU_SHARE":       "1",
		"PADDLE_OTEL":            "false",
	}
	if len(p.Settings) != len(want) {
		t.Errorf("Settings = %q; want %q", p.Settings, want)
	}
	for k, v := range want {
		if got, ok := p.Setting(k); !ok || got != v {
			t.Errorf("Setting(%s) = %q, %v; want %q", k, got, ok, v)
		}
	}
	wantLocked := []string{
		"PADDLE_MONITOR_URL", "PADDLE_MONITOR_CA_FILE", "PADDLE_MONITOR_TOKEN_FILE",
		"PADDLE_ENTRYPOINT_MODE", "PADDLE_REGISTER_BUDGET", "PADDLE_COMPLETE_BUDGET",
		"PADDLE_HEARTBEAT", "PADDLE_ENTRYPOINT_GPU_PROBE", "PADDLE_GPU_TIMEOUT",
		"PADDLE_GPU_SHARE", "PADDLE_LABELS_FILE", "PADDLE_SPOOL_PATH",
	}
	if !slices.Equal(p.Locked, wantLocked) {
		t.Errorf("Locked = %q;\nwant %q", p.Locked, wantLocked)
	}
	for _, v := range wantLocked {
		if !p.IsLocked(v) {
			t.Errorf("IsLocked(%s) = false", v)
		}
	}
	for _, v := range []string{"PADDLE_OTEL", "PADDLE_GPU_SHARED", "PADDLE_SPOOL_MAX", "PADDLE_ENTRYPOINT_LOG"} {
		if p.IsLocked(v) {
			t.Errorf("IsLocked(%s) = true; accounting does not lock it", v)
		}
	}
	if err := p.CheckSettings(entrypointLike); err != nil {
		t.Errorf("CheckSettings: %v", err)
	}
	var none *Policy
	if none.IsLocked("PADDLE_MONITOR_URL") || none.CheckSettings(entrypointLike) != nil {
		t.Error("a nil policy locks something")
	}
	if _, ok := none.Setting("PADDLE_MONITOR_URL"); ok {
		t.Error("a nil policy sets something")
	}
}

// A list of names, "accounting" among them, each name once, in order.
func TestPolicyLockedList(t *testing.T) {
	for _, c := range []struct {
		text string
		want []string
	}{
		{`{"locked": ["PADDLE_GPU_SHARE", "PADDLE_MONITOR_URL", "PADDLE_GPU_SHARE"]}`, []string{"PADDLE_GPU_SHARE", "PADDLE_MONITOR_URL"}},
		{`{"locked": ["PADDLE_OTEL", "accounting"]}`, append([]string{"PADDLE_OTEL"}, Accounting...)},
		{`{"locked": []}`, nil},
		{`{"locked": null, "settings": null}`, nil},
		{`{}`, nil},
	} {
		p, err := Parse([]byte(c.text))
		if err != nil || !slices.Equal(p.Locked, c.want) {
			t.Errorf("Parse(%s): Locked = %q, %v; want %q", c.text, p.Locked, err, c.want)
		}
	}
}

// Every malformed settings or locked is an error naming the file and the
// key, and is ErrMalformed.
func TestPolicySettingsMalformed(t *testing.T) {
	for _, c := range []struct {
		name, text, want string
	}{
		{"settings not an object", `{"settings": ["PADDLE_MONITOR_URL"]}`, `settings: not a JSON object`},
		{"null value", `{"settings": {"PADDLE_MONITOR_URL": null}}`, `settings.PADDLE_MONITOR_URL: null is not a value`},
		{"object value", `{"settings": {"PADDLE_GPU_SHARE": {"v": 1}}}`, `settings.PADDLE_GPU_SHARE: must be a string, a number or a boolean`},
		{"list value", `{"settings": {"PADDLE_GPU_SHARE": [1]}}`, `settings.PADDLE_GPU_SHARE: must be a string, a number or a boolean`},
		{"variable twice", `{"settings": {"PADDLE_GPU_SHARE": "1", "PADDLE_GPU_SHARE": "0.1"}}`, `field "settings.PADDLE_GPU_SHARE" given twice`},
		{"lower-case name", `{"settings": {"paddle_gpu_share": "1"}}`, `settings: "paddle_gpu_share" is not a setting's variable`},
		{"not PADDLE_", `{"settings": {"CUDA_VISIBLE_DEVICES": "0"}}`, `settings: "CUDA_VISIBLE_DEVICES" is not a setting's variable`},
		{"a label", `{"locked": ["PADDLE_LABEL_TEAM"]}`, `locked: "PADDLE_LABEL_TEAM" is a label, not a setting`},
		{"the policy file", `{"settings": {"PADDLE_POLICY_FILE": "/x"}}`, `settings: "PADDLE_POLICY_FILE": the policy file cannot choose where the policy file is`},
		{"empty name", `{"locked": [""]}`, `locked: an empty variable name`},
		{"locked other word", `{"locked": "everything"}`, `locked: "everything": a string must be "accounting"`},
		{"locked a number", `{"locked": 1}`, `locked: must be "accounting" or a list of variable names`},
		{"locked list of numbers", `{"locked": [1]}`, `locked: must be "accounting" or a list of variable names`},
		{"locked in capitals", `{"Locked": "accounting"}`, `unknown field "Locked"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := writeFile(t, t.TempDir(), "policy.json", c.text)
			_, err := Load(file)
			if want := "policy file " + file + ": malformed policy: " + c.want; err == nil || !strings.HasPrefix(err.Error(), want) {
				t.Errorf("Load(%s) = %v; want %q", c.text, err, want)
			}
			if !errors.Is(err, ErrMalformed) {
				t.Errorf("%v is not ErrMalformed", err)
			}
		})
	}
}

// CheckSettings against the entrypoint's table: an unknown variable, or a
// value its setting refuses, is an error naming the file and the key.
func TestPolicyCheckSettings(t *testing.T) {
	for _, c := range []struct {
		name, text, want string
	}{
		{"unknown setting", `{"settings": {"PADDLE_GPU_SHAR": "1"}}`, `settings: "PADDLE_GPU_SHAR" is not a setting of the entrypoint`},
		{"unknown locked", `{"locked": ["PADDLE_MONITOR_URI"]}`, `locked: "PADDLE_MONITOR_URI" is not a setting of the entrypoint`},
		{"bad value", `{"settings": {"PADDLE_GPU_SHARE": 0.0}}`, `settings.PADDLE_GPU_SHARE: "0.0": must be a number in (0, 1]`},
		{"bad mode", `{"settings": {"PADDLE_ENTRYPOINT_MODE": "Supervise"}, "locked": "accounting"}`, `settings.PADDLE_ENTRYPOINT_MODE: "Supervise": must be one of exec, supervise`},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := writeFile(t, t.TempDir(), "policy.json", c.text)
			p, err := Load(file)
			if err != nil {
				t.Fatal(err)
			}
			err = p.CheckSettings(entrypointLike)
			if want := "policy file " + file + ": malformed policy: " + c.want; err == nil || err.Error() != want {
				t.Errorf("CheckSettings = %v; want %q", err, want)
			}
			if !errors.Is(err, ErrMalformed) {
				t.Errorf("%v is not ErrMalformed", err)
			}
		})
	}
}
