package facts

import (
	"strings"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
)

// LabelPrefix starts a grouping key that is an extra label: "label:NAME"
// groups by the task's PADDLE_LABEL_<NAME> (stored under the lower-cased
// NAME); tasks without it are the row whose value is "". Cost centres and
// teams need no code.
const LabelPrefix = "label:"

// LabelName returns the label a grouping key names ("cost_center" of
// "label:cost_center"), and whether it is a label key.
func LabelName(key string) (string, bool) {
	return strings.CutPrefix(key, LabelPrefix)
}

// labelKey reads "label:NAME" as the entrypoint stores the label: NAME
// lower-cased, under the labels' name rule (wire.ValidName: letters,
// digits, '.', '_', '-'); ok is false for a key that is not "label:…",
// and err says what is wrong with a NAME that breaks the rule.
func labelKey(k string) (key string, ok bool, err error) {
	name, ok := LabelName(k)
	if !ok {
		return "", false, nil
	}
	name = strings.ToLower(name)
	if !wire.ValidName(name, "") {
		return "", true, badQuery("by", "by: label key %q: NAME must be 1 to %d letters, digits, '.', '_' or '-', beginning with a letter or digit (the NAME of PADDLE_LABEL_NAME)",
			k, wire.MaxNameLen)
	}
	return LabelPrefix + name, true, nil
}
