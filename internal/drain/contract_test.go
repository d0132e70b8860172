package drain

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/paddle-entrypoint/paddle-entrypoint/spool"
)

// TestContractRule: what the node agent's drainer lets through from a
// task spool. Bodies the contract accepts go with their own task_id; a
// body past a rule is refused naming the field, never repeating the value.
func TestContractRule(t *testing.T) {
	reg, err := os.ReadFile("../wire/testdata/registration.json")
	if err != nil {
		t.Fatal(err)
	}
	comp, err := os.ReadFile("../wire/testdata/completion.json")
	if err != nil {
		t.Fatal(err)
	}
	regID := between(string(reg), `"task_id":"`, `"`)
	for _, c := range []struct {
		name, body, id, fails string
	}{
		{"registration", string(reg), regID, ""},
		{"completion", string(comp), "a", ""},
		{"not JSON", `{"task_id":`, "", "payload refused"},
		{"task_id forging a line", strings.Replace(string(comp), `"task_id":"a"`, `"task_id":"a\nb=SECRETVALUE"`, 1), "", "task_id"},
		{"label breaking the name rule", strings.Replace(string(reg), `"labels":{`, `"labels":{"x":"SECRETVALUE with space",`, 1), "", "labels.x"},
		{"task_id only", `{"task_id":"t-1"}`, "", "payload refused"},
	} {
		t.Run(c.name, func(t *testing.T) {
			id, err := ContractRule([]byte(c.body))
			switch {
			case c.fails == "" && (err != nil || id != c.id):
				t.Errorf("ContractRule = %q, %v; want %q", id, err, c.id)
			case c.fails != "" && (err == nil || !strings.Contains(err.Error(), c.fails)):
				t.Errorf("ContractRule = %q, %v; want an error naming %q", id, err, c.fails)
			case err != nil && strings.Contains(err.Error(), "SECRETVALUE"):
				t.Errorf("the error repeats the value: %v", err)
			}
		})
	}
}

func between(s, from, to string) string {
	_, rest, _ := strings.Cut(s, from)
	v, _, _ := strings.Cut(rest, to)
	return v
}

// TestDrainerWithContractRule: the node agent's drainer (Check:
// ContractRule) sends a registration the contract accepts and buries one
// it does not (here a body with a task_id and nothing else), without
// sending it.
func TestDrainerWithContractRule(t *testing.T) {
	reg, err := os.ReadFile("../wire/testdata/registration.json")
	if err != nil {
		t.Fatal(err)
	}
	url, keys := monitor(t, http.StatusCreated)
	dir := t.TempDir()
	path := filepath.Join(dir, "spool-1000.db")
	fill(t, path, "bare-1") // {"task_id":"bare-1","project":"vision"}
	s := spool.New(spool.Options{Path: path})
	id := between(string(reg), `"task_id":"`, `"`)
	if _, err := s.Registrations().Enqueue(context.Background(), spool.Entry{TaskID: id, Payload: reg, Fingerprint: spool.FingerprintNone}); err != nil {
		t.Fatal(err)
	}
	d := drainer(t, url, filepath.Join(dir, "spool-0.db"))
	d.All, d.Check = true, ContractRule
	results, err := d.Pass(context.Background())
	if err != nil || len(results) != 1 || results[0].Delivered != 1 || results[0].Dead != 1 {
		t.Fatalf("pass %+v, %v; want 1 delivered, 1 dead", results, err)
	}
	if got := keys(); !slices.Equal(got, []string{id}) {
		t.Errorf("monitor got %q, want only %q", got, id)
	}
	dead, err := s.Registrations().List(context.Background(), true)
	if err != nil || len(dead) != 1 || !strings.HasPrefix(dead[0].Answer, "not sent: payload refused") {
		t.Errorf("dead letters %+v, %v; want bare-1 refused before sending", dead, err)
	}
}
