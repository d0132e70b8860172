package labels

import (
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/paddle-entrypoint/paddle-entrypoint/entrypoint/policy"
	"github.com/paddle-entrypoint/paddle-entrypoint/entrypoint/sensitive"
	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
)

// ErrPayload marks a stored registration body that must not be sent.
var ErrPayload = errors.New("payload refused")

// nameKeys are the top-level keys of a registration body whose values
// follow the name rule, with the extra characters each allows.
var nameKeys = map[string]string{
	"task_name": "", "project": "", "owner": "@+", "task_id": "",
	"priority": "", "env": "", "trainer_id": "", "trainers_num": "",
}

// defaults are the values a start writes when the task set none: a start
// in warn mode keeps them in place of a value it dropped, so they are not
// held against an allow-list.
var defaults = map[string]string{"task_name": DefaultTaskName, "project": DefaultProject, "owner": DefaultOwner}

// CheckPayload vets a registration body read back from a spool, before it
// is sent: a spool file is data another process wrote, perhaps an older
// version, perhaps not an entrypoint at all. The body is decoded into the
// contract's type (wire.ReadRegistration: a field of the wrong type is
// refused there), then held to the entrypoint's own rules, which the
// monitor does not know. It returns the body's task_id, which is the only
// Idempotency-Key it may be sent with, or an error wrapping ErrPayload
// that names the field and the rule broken, never the value: no task_id;
// a label value or key that breaks the name rule; a string field or a
// label that holds sensitive data; a label name that says it holds a
// secret; a value or an extra label the policy pol (nil: none) refuses.
func CheckPayload(body []byte, pol *policy.Policy) (taskID string, err error) {
	reg, err := wire.ReadRegistration(body)
	if err != nil {
		return "", shapeError(err)
	}
	// The same check vets spooled completions: their own string fields
	// (signal, gate's) are read through the completion's type.
	comp, err := wire.ReadCompletion(body)
	if err != nil {
		return "", shapeError(err)
	}
	if !wire.ValidName(reg.TaskID, "") {
		return "", fmt.Errorf("%w: task_id missing or breaking the name rule", ErrPayload)
	}
	for _, f := range stringFields(reg, comp) {
		if f.value == "" {
			continue // absent: the body's own rules say whether it may be
		}
		if err := checkValue(f.name, f.value, pol); err != nil {
			return "", err
		}
		if extra, ok := nameKeys[f.name]; ok && !wire.ValidName(f.value, extra) {
			return "", fmt.Errorf("%w: %s breaks the name rule", ErrPayload, f.name)
		}
	}
	keys := make([]string, 0, len(reg.Labels))
	for k := range reg.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := reg.Labels[k]
		switch {
		case !wire.ValidName(k, "") || reserved[k]:
			return "", fmt.Errorf("%w: label name breaks the name rule or takes a built-in key", ErrPayload)
		case sensitive.SecretName(k):
			return "", fmt.Errorf("%w: label %s says it holds a secret", ErrPayload, k)
		case !pol.AllowsExtra(k):
			return "", fmt.Errorf("%w: label %s is not in the policy's extra_labels", ErrPayload, k)
		case !wire.ValidName(v, ""):
			return "", fmt.Errorf("%w: label %s breaks the name rule", ErrPayload, k)
		}
		if err := checkValue(k, v, pol); err != nil {
			return "", err
		}
	}
	return reg.TaskID, nil
}

// shapeError says what decoding refused, naming the field but never the
// value (a refused value may be the very secret).
func shapeError(err error) error {
	var fe *wire.FieldError
	switch {
	case !errors.As(err, &fe):
		return fmt.Errorf("%w: not a JSON object", ErrPayload)
	case fe.Path == "labels":
		return fmt.Errorf("%w: labels is not an object", ErrPayload)
	case strings.HasPrefix(fe.Path, "labels."):
		return fmt.Errorf("%w: label %q is not a string", ErrPayload, strings.TrimPrefix(fe.Path, "labels."))
	}
	return fmt.Errorf("%w: %s %s", ErrPayload, fe.Path, fe.Rule)
}

// field is one top-level string field of a registration, by its JSON name.
type field struct{ name, value string }

// stringFields lists the top-level string fields of the bodies, each JSON
// name once, sorted, read from the types themselves so that a field added
// to wire.Registration or wire.Completion is vetted here without a line
// written for it.
func stringFields(bodies ...any) []field {
	seen := map[string]bool{}
	var out []field
	for _, b := range bodies {
		v := reflect.ValueOf(b).Elem()
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
			if t.Field(i).Type.Kind() != reflect.String || seen[name] {
				continue
			}
			seen[name] = true
			out = append(out, field{name, v.Field(i).String()})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

func checkValue(key, v string, pol *policy.Policy) error {
	if kind, found := sensitive.Scan(v); found {
		return fmt.Errorf("%w: %s holds sensitive data (%s)", ErrPayload, key, kind)
	}
	if defaults[key] == v {
		return nil
	}
	if err := pol.CheckValue(key, v); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrPayload, key, err)
	}
	return nil
}
