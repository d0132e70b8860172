package entrypoint

// Black-box tests of the sensitive-data guard on labels (docs/security.md,
// Sensitive data).

import (
	"strings"
	"testing"
)

// Every separator the name rule allows hides nothing: identity and card
// numbers written with '_' or '.' are caught like those with '-'.
func TestSensitiveSeparators(t *testing.T) {
	for _, v := range []string{
		"110101_19900307_4514", "110101.19900307.4514", "110101-19900307-4514",
		"4111_1111_1111_1111", "4111.1111.1111.1111", "4111-1111-1111-1111",
	} {
		t.Run(v, func(t *testing.T) {
			k := newTask(t, "labels")
			k.Setenv("PADDLE_LABELS_MODE", "enforce")
			k.Setenv("PADDLE_LABEL_NOTE", v)
			r := k.Run()
			if r.Code != 65 {
				t.Errorf("exit %d, want 65 (sensitive data refused)\nstdout %q\nstderr %q", r.Code, r.Stdout, r.Stderr)
			}
			if strings.Contains(r.Stdout+r.Stderr, v) {
				t.Errorf("the value was printed")
			}
		})
	}
}
