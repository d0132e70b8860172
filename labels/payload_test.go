package labels

import (
	"errors"
	"strings"
	"testing"

	"github.com/paddle-entrypoint/paddle-entrypoint/entrypoint/policy"
)

func TestCheckPayload(t *testing.T) {
	pol, err := policy.Parse([]byte(`{"labels":{"project":{"allow":["vision","ocr-*"]}},"extra_labels":["cost_center"]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		body, id, fails string
	}{
		{`{"task_id":"t-1","project":"vision","labels":{"cost_center":"cc-1"},"gpu_count":0,"gpus":[]}`, "t-1", ""},
		{`{"task_id":"t-2","project":"default"}`, "t-2", ""}, // a warn-mode default
		{`{"project":"vision"}`, "", "task_id"},
		{`{"task_id":"bad id"}`, "", "task_id"},
		{`[1]`, "", "not a JSON object"},
		{`{"task_id":"t","project":"admin"}`, "", "project"},
		{`{"task_id":"t","task_name":"a\nb"}`, "", "task_name breaks"},
		{`{"task_id":"t","owner":"ann@example.com"}`, "t", ""},
		{`{"task_id":"t","hostname":"4111_1111_1111_1111"}`, "", "hostname holds sensitive data"},
		{`{"task_id":"t","labels":{"db_password":"x"}}`, "", "secret"},
		{`{"task_id":"t","labels":{"other":"x"}}`, "", "extra_labels"},
		{`{"task_id":"t","labels":{"cost_center":"110101.19900307.4514"}}`, "", "sensitive"},
		{`{"task_id":"t","labels":{"cost_center":1}}`, "", "not a string"},
		{`{"task_id":"t","labels":[]}`, "", "not an object"},
	} {
		id, err := CheckPayload([]byte(c.body), pol)
		if c.fails == "" && (err != nil || id != c.id) || c.fails != "" && (err == nil || !errors.Is(err, ErrPayload) || !strings.Contains(err.Error(), c.fails)) {
			t.Errorf("CheckPayload(%s) = %q, %v; want %q, error with %q", c.body, id, err, c.id, c.fails)
		}
		if err != nil && (strings.Contains(err.Error(), "4514") || strings.Contains(err.Error(), "1111")) {
			t.Errorf("error repeats the value: %v", err)
		}
	}
}
