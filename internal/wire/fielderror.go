package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// FieldError is a body's field that breaks a rule: the monitor answers it
// 400 with its message, "field <path>: <rule>". Path names the field as the
// body spells it, entries of a list by index and nested objects by dots
// (gpus[2].mig.uuid).
type FieldError struct {
	Path string
	Rule string
}

func (e *FieldError) Error() string { return "field " + e.Path + ": " + e.Rule }

// BodyError is a body that is not one JSON object: What names the body (a
// registration, a completion, a heartbeat).
type BodyError struct {
	What string
	// Several is true when the body holds a JSON object and more after it.
	Several bool
}

func (e *BodyError) Error() string {
	if e.Several {
		return "the body holds more than one JSON value (" + e.What + ")"
	}
	return "the body is not a JSON object (" + e.What + ")"
}

// Rules of the messages, shared by the checks that give them.
const (
	ruleRequired = "is required"
	ruleInteger  = "must be an integer"
	ruleNumber   = "must be a number"
	ruleString   = "must be a string"
	ruleBool     = "must be true or false"
	ruleObject   = "must be an object"
	ruleList     = "must be a list of objects"
	ruleStrings  = "must be an object of strings"
	ruleNumbers  = "must be an object of numbers"
	ruleMIG      = "must be an object {uuid, gpu_instance_id, compute_instance_id, profile, slices, total_slices}"
	ruleGate     = "must be an object {expr, passed, reason}"
	ruleShare    = "must be a number greater than 0 and at most 1"
)

// NameRule is the rule a label value breaks: the entrypoint's name rule,
// with the further characters extra allows after the first.
func NameRule(extra string) string {
	r := "must follow the name rule (1 to 63 letters, digits, '.', '_' or '-', beginning with a letter or digit"
	if extra != "" {
		r += "; '" + strings.Join(strings.Split(extra, ""), "' and '") + "' allowed too"
	}
	return r + ")"
}

// decode reads body, one JSON object, into v (a pointer to a body type)
// with encoding/json: fields v does not know are ignored (a later schema
// version only adds fields), null reads as absent, and a value of the
// wrong type is a *FieldError naming its path.
func decode(body []byte, v any, what string) error {
	if b := bytes.TrimLeft(body, " \t\r\n"); len(b) == 0 || b[0] != '{' {
		return &BodyError{What: what}
	}
	d := json.NewDecoder(bytes.NewReader(body))
	var raw json.RawMessage
	if err := d.Decode(&raw); err != nil {
		return &BodyError{What: what}
	}
	if d.More() {
		return &BodyError{What: what, Several: true}
	}
	if err := json.Unmarshal(exactKeys(raw, reflect.TypeOf(v)), v); err != nil {
		return fieldOf("", err, what, reflect.TypeOf(v))
	}
	return nil
}

// fieldOf turns an error of encoding/json while decoding the value at
// path, a value of Go type t, into a *FieldError naming the field (a
// *FieldError of a nested decoding is returned as it is).
func fieldOf(path string, err error, what string, t reflect.Type) error {
	var fe *FieldError
	if errors.As(err, &fe) {
		return fe
	}
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		// A syntax error, or a body cut short.
		return &BodyError{What: what}
	}
	p := join(path, jsonPath(t, te.Field))
	if p == "" {
		return &BodyError{What: what}
	}
	return &FieldError{p, typeRule(te.Type)}
}

// jsonPath is encoding/json's path of a field in t as the contract names
// it: without the Go names encoding/json puts in for embedded structs
// (gpus[0].Busy.util_p95 is gpus[0].util_p95 on the wire).
func jsonPath(t reflect.Type, field string) string {
	var out []string
	for seg := range strings.SplitSeq(field, ".") {
		for t != nil && (t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice) {
			t = t.Elem()
		}
		if t == nil || t.Kind() != reflect.Struct {
			t = nil
			out = append(out, seg)
			continue
		}
		if f, ok := t.FieldByName(seg); ok && f.Anonymous && f.Tag.Get("json") == "" {
			t = f.Type
			continue
		}
		out = append(out, seg)
		t = jsonFields(t)[seg]
	}
	return strings.Join(out, ".")
}

func join(parent, field string) string {
	switch {
	case parent == "":
		return field
	case field == "":
		return parent
	}
	return parent + "." + field
}

// typeRule is the rule broken by a JSON value that does not fit Go type t.
func typeRule(t reflect.Type) string {
	switch t {
	case reflect.TypeFor[MIG]():
		return ruleMIG
	case reflect.TypeFor[Gate]():
		return ruleGate
	case reflect.TypeFor[Metrics]():
		return ruleNumbers
	case reflect.TypeFor[Labels]():
		return ruleStrings
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint32, reflect.Uint64:
		return ruleInteger
	case reflect.Float64, reflect.Float32:
		return ruleNumber
	case reflect.String:
		return ruleString
	case reflect.Bool:
		return ruleBool
	case reflect.Slice:
		if t.Elem().Kind() == reflect.String {
			return "must be a list of strings"
		}
		return ruleList
	}
	return ruleObject
}

// isObject reports whether raw, a JSON value, is an object.
func isObject(raw []byte) bool {
	b := bytes.TrimLeft(raw, " \t\r\n")
	return len(b) > 0 && b[0] == '{'
}

// GPUs is a body's gpus list. Its decoding names a bad entry's field with
// the entry's index (gpus[2].uuid), which encoding/json's errors do not,
// and refuses a list over MaxGPUList before decoding its entries.
type GPUs[T any] []T

// UnmarshalJSON reads the list; null is no list.
func (l *GPUs[T]) UnmarshalJSON(b []byte) error {
	const path = "gpus"
	if string(bytes.TrimSpace(b)) == "null" {
		*l = nil
		return nil
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(b, &raws); err != nil {
		return &FieldError{path, ruleList}
	}
	if len(raws) > MaxGPUList {
		return &FieldError{path, fmt.Sprintf("must list at most %d GPUs", MaxGPUList)}
	}
	if len(raws) == 0 {
		*l = nil // as no list: an empty one is not sent back
		return nil
	}
	out := make(GPUs[T], len(raws))
	for i, raw := range raws {
		p := fmt.Sprintf("%s[%d]", path, i)
		if !isObject(raw) {
			return &FieldError{p, ruleObject}
		}
		if err := json.Unmarshal(raw, &out[i]); err != nil {
			return fieldOf(p, err, "", reflect.TypeFor[T]())
		}
	}
	*l = out
	return nil
}

func checkGPUCount(n int) error {
	if n > MaxGPUList {
		return &FieldError{"gpus", fmt.Sprintf("must list at most %d GPUs", MaxGPUList)}
	}
	return nil
}

// read decodes body into a new T (decode's rules) without Validate.
func read[T any](body []byte, what string) (*T, error) {
	var v T
	if err := decode(body, &v, what); err != nil {
		return nil, err
	}
	return &v, nil
}

// checked passes on what read returned once it passed Validate.
func checked[T any, P interface {
	*T
	Validate() error
}](v P, err error) (*T, error) {
	if err != nil {
		return nil, err
	}
	if err := v.Validate(); err != nil {
		return nil, err
	}
	return v, nil
}
