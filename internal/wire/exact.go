package wire

import (
	"bytes"
	"encoding/json"
	"maps"
	"reflect"
	"strings"
)

// exactKeys returns body without the keys that encoding/json would match
// to a field of t only by ignoring case ("Task_ID" for task_id): the
// contract's names are case-sensitive, so such a key is one this version
// does not know, and is ignored like any other. body is returned as it is
// when it holds none (the common case); it must be syntactically valid.
func exactKeys(body []byte, t reflect.Type) []byte {
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber() // numbers are written back as they came
	var v any
	if d.Decode(&v) != nil || !dropInexact(v, t) {
		return body
	}
	out, err := json.Marshal(v)
	if err != nil {
		return body // cannot happen: v holds only what JSON decodes to
	}
	return out
}

// dropInexact removes from v, a decoded JSON value bound for Go type t,
// the keys of t's objects that name a field only case-insensitively, and
// reports whether it removed any.
func dropInexact(v any, t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	dropped := false
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return false
		}
		fields := jsonFields(t)
		for k, x := range m {
			if ft, ok := fields[k]; ok {
				dropped = dropInexact(x, ft) || dropped
				continue
			}
			for name := range fields {
				if strings.EqualFold(k, name) {
					delete(m, k)
					dropped = true
					break
				}
			}
		}
	case reflect.Slice, reflect.Array:
		if list, ok := v.([]any); ok {
			for _, x := range list {
				dropped = dropInexact(x, t.Elem()) || dropped
			}
		}
	case reflect.Map:
		if m, ok := v.(map[string]any); ok {
			for _, x := range m {
				dropped = dropInexact(x, t.Elem()) || dropped
			}
		}
	}
	return dropped
}

// jsonFields maps the JSON names of struct type t's fields to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := make(map[string]reflect.Type, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			// encoding/json promotes an embedded struct's fields (Busy).
			maps.Copy(out, jsonFields(f.Type))
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}
