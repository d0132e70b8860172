package labels

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/paddle-entrypoint/paddle-entrypoint/entrypoint/policy"
	"github.com/paddle-entrypoint/paddle-entrypoint/entrypoint/sensitive"
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
// version, perhaps not an entrypoint at all. It returns the body's task_id,
// which is the only Idempotency-Key it may be sent with, or an error
// wrapping ErrPayload that names the field and the rule broken, never the
// value: no task_id; a label value or key that breaks the name rule; a
// string anywhere at the top level or in "labels" that holds sensitive
// data; a label name that says it holds a secret; a value or an extra
// label the policy pol (nil: none) refuses.
func CheckPayload(body []byte, pol *policy.Policy) (taskID string, err error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil || top == nil {
		return "", fmt.Errorf("%w: not a JSON object", ErrPayload)
	}
	var id string
	if json.Unmarshal(top["task_id"], &id) != nil || !ValidName(id, "") {
		return "", fmt.Errorf("%w: task_id missing or breaking the name rule", ErrPayload)
	}
	keys := make([]string, 0, len(top))
	for k := range top {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		var v string
		if json.Unmarshal(top[k], &v) != nil {
			continue // numbers, the gpus list, the labels object
		}
		if err := checkValue(k, v, pol); err != nil {
			return "", err
		}
		if extra, ok := nameKeys[k]; ok && !ValidName(v, extra) {
			return "", fmt.Errorf("%w: %s breaks the name rule", ErrPayload, k)
		}
	}
	var extra map[string]json.RawMessage
	if raw, ok := top["labels"]; ok && json.Unmarshal(raw, &extra) != nil {
		return "", fmt.Errorf("%w: labels is not an object", ErrPayload)
	}
	keys = keys[:0]
	for k := range extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		var v string
		switch {
		case json.Unmarshal(extra[k], &v) != nil:
			return "", fmt.Errorf("%w: label %q is not a string", ErrPayload, k)
		case !ValidName(k, "") || reserved[k]:
			return "", fmt.Errorf("%w: label name breaks the name rule or takes a built-in key", ErrPayload)
		case sensitive.SecretName(k):
			return "", fmt.Errorf("%w: label %s says it holds a secret", ErrPayload, k)
		case !pol.AllowsExtra(k):
			return "", fmt.Errorf("%w: label %s is not in the policy's extra_labels", ErrPayload, k)
		case !ValidName(v, ""):
			return "", fmt.Errorf("%w: label %s breaks the name rule", ErrPayload, k)
		}
		if err := checkValue(k, v, pol); err != nil {
			return "", err
		}
	}
	return id, nil
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
