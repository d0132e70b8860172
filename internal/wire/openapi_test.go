package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// schemaOf binds a schema of docs/openapi.yaml to the Go type of the same
// body part, and says where a sample body (testdata) holds one: at is the
// path to the object (keys and indices), prefix the path a *FieldError
// names its fields with.
type schemaOf struct {
	schema string
	typ    reflect.Type
	sample string
	at     []any
	prefix string
	decode func([]byte) error
}

func schemas() []schemaOf {
	reg := func(b []byte) error { _, err := DecodeRegistration(b); return err }
	comp := func(b []byte) error { _, err := DecodeCompletion(b); return err }
	hb := func(b []byte) error { _, err := DecodeHeartbeat(b); return err }
	return []schemaOf{
		{"RegistrationV1", reflect.TypeFor[Registration](), "registration.json", nil, "", reg},
		{"GPU", reflect.TypeFor[RegisteredGPU](), "registration.json", []any{"gpus", 1}, "gpus[1].", reg},
		{"MIGInstance", reflect.TypeFor[MIG](), "registration.json", []any{"gpus", 1, "mig"}, "gpus[1].mig.", reg},
		{"CompletionV1", reflect.TypeFor[Completion](), "completion.json", nil, "", comp},
		{"GPUUsage", reflect.TypeFor[GPUUsage](), "completion.json", []any{"gpus", 0}, "gpus[0].", comp},
		{"Gate", reflect.TypeFor[Gate](), "completion.json", []any{"gate"}, "gate.", comp},
		{"Heartbeat", reflect.TypeFor[Heartbeat](), "heartbeat.json", nil, "", hb},
		{"HeartbeatGPU", reflect.TypeFor[HeartbeatGPU](), "heartbeat.json", []any{"gpus", 0}, "gpus[0].", hb},
	}
}

func loadOpenAPI(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromFile("../../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(openapi3.NewLoader().Context); err != nil {
		t.Fatal(err)
	}
	return doc
}

// sampleAt decodes a sample body and returns it with the object at path.
func sampleAt(t *testing.T, name string, path []any) (root any, obj map[string]any) {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(readFile(t, name)))
	d.UseNumber()
	if err := d.Decode(&root); err != nil {
		t.Fatal(err)
	}
	v := root
	for _, p := range path {
		switch p := p.(type) {
		case string:
			v = v.(map[string]any)[p]
		case int:
			v = v.([]any)[p]
		}
	}
	return root, v.(map[string]any)
}

func encode(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestOpenAPIMatchesTypes: docs/openapi.yaml describes the bodies as the
// types are: the same fields, the same required ones (a body without one
// is refused naming it, a body without any other is accepted), and every
// bound it states is one the monitor enforces (a value past it is refused
// naming the field). The samples themselves follow the schemas.
func TestOpenAPIMatchesTypes(t *testing.T) {
	doc := loadOpenAPI(t)
	for _, sc := range schemas() {
		t.Run(sc.schema, func(t *testing.T) {
			ref := doc.Components.Schemas[sc.schema]
			if ref == nil || ref.Value == nil {
				t.Fatalf("no schema %s", sc.schema)
			}
			s := ref.Value
			props := slices.Sorted(maps.Keys(s.Properties))
			fields := slices.Sorted(maps.Keys(jsonFields(sc.typ)))
			if !slices.Equal(props, fields) {
				t.Errorf("openapi properties %v\ntype's JSON fields   %v", props, fields)
			}
			root, _ := sampleAt(t, sc.sample, sc.at)
			if err := s.VisitJSON(root); sc.at == nil && err != nil {
				t.Errorf("the sample %s does not follow the schema: %v", sc.sample, err)
			}
			for _, p := range props {
				root, obj := sampleAt(t, sc.sample, sc.at)
				delete(obj, p)
				err := sc.decode(encode(t, root))
				var fe *FieldError
				switch {
				case slices.Contains(s.Required, p) && (!errors.As(err, &fe) || fe.Path != sc.prefix+p):
					t.Errorf("openapi requires %s; without it: %v", p, err)
				case !slices.Contains(s.Required, p) && err != nil:
					t.Errorf("openapi does not require %s; without it: %v", p, err)
				}
				for _, past := range pastBounds(s.Properties[p].Value) {
					root, obj := sampleAt(t, sc.sample, sc.at)
					obj[p] = past.value(obj[p])
					err := sc.decode(encode(t, root))
					if !errors.As(err, &fe) || fe.Path != sc.prefix+p {
						t.Errorf("%s %s: the monitor answers %v", p, past.what, err)
					}
				}
			}
		})
	}
}

// past is a value just past a bound a schema states.
type past struct {
	what  string
	value func(sample any) any
}

func pastBounds(s *openapi3.Schema) []past {
	var out []past
	if s.Min != nil {
		v := *s.Min - 1
		if s.ExclusiveMin.IsTrue() {
			v = *s.Min
		}
		out = append(out, past{fmt.Sprintf("%g (minimum %g)", v, *s.Min), func(any) any { return v }})
	}
	if s.Max != nil {
		v := *s.Max + 1
		if s.Type.Is("number") {
			v = *s.Max * (1 + 1e-9)
		}
		out = append(out, past{fmt.Sprintf("%g (maximum %g)", v, *s.Max), func(any) any { return v }})
	}
	if s.MaxLength != nil {
		n := int(*s.MaxLength) + 1
		out = append(out, past{fmt.Sprintf("%d characters (maxLength %d)", n, n-1), func(any) any { return strings.Repeat("a", n) }})
	}
	if s.MaxItems != nil {
		n := int(*s.MaxItems) + 1
		out = append(out, past{fmt.Sprintf("%d entries (maxItems %d)", n, n-1), func(sample any) any {
			list := sample.([]any)
			more := make([]any, n)
			for i := range more {
				more[i] = list[0]
			}
			return more
		}})
	}
	if s.MaxProps != nil {
		n := int(*s.MaxProps) + 1
		out = append(out, past{fmt.Sprintf("%d keys (maxProperties %d)", n, n-1), func(any) any {
			m := map[string]any{}
			for i := range n {
				m[fmt.Sprintf("k%d", i)] = 1
			}
			return m
		}})
	}
	return out
}
