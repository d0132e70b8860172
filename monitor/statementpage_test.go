package monitor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/access"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/books"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/report"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// The statement page of a team shows the part of the project its reader
// may see (9a0e765): a viewer of some owners reads their hours in the
// project's row, without the project's budget (owners it may not read
// spend it). By hand, October 2026 closed with testdata's prices (a Tesla
// T4 at 2 EUR an hour) and budgets (search: 10 GPU-hours): search's ann
// held a Tesla T4 2 h (4 EUR), bob 3 h (6 EUR); the project 2 tasks,
// 5 GPU-hours, 10 EUR, half its budget.
func TestStatementPageNarrowedToOwners(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	pj, bj := read("prices.json"), read("budgets.json")
	prices, err := report.ParsePrices(strings.NewReader(string(pj)))
	if err != nil {
		t.Fatal(err)
	}
	budgets, err := report.ParseBudgets(strings.NewReader(string(bj)))
	if err != nil {
		t.Fatal(err)
	}
	in := books.Inputs{Prices: prices, Budgets: budgets, PricesJSON: pj, BudgetsJSON: bj}
	var tokens []*access.Token
	secrets := map[string]string{}
	for _, m := range []struct {
		name             string
		projects, owners []string
		admin            bool
	}{{"admin", nil, nil, true}, {"search", []string{"search"}, nil, false}, {"ann", []string{"search"}, []string{"ann"}, false},
		{"bob", []string{"*"}, []string{"bob"}, false}} {
		secret, tok, err := access.MintViewer(m.name, m.projects, m.owners)
		if m.admin {
			secret, tok, err = access.Mint(m.name, nil, nil, true)
		}
		if err != nil {
			t.Fatal(err)
		}
		tokens, secrets[m.name] = append(tokens, tok), secret
	}
	b, _ := json.Marshal(map[string]any{"tokens": tokens})
	set, err := access.Parse(b, "tokens.json")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		token string
		row   string // the project's row: tasks, GPU-hours, cost
		// budget is the page's budget line.
		budget string
	}{
		{"admin", `<td class="key">search</td><td>2</td><td>5</td><td>10.00</td>`, "Monthly budget 10 GPU-hours: used 5 (50.00 %)."},
		{"search", `<td class="key">search</td><td>2</td><td>5</td><td>10.00</td>`, "Monthly budget 10 GPU-hours: used 5 (50.00 %)."},
		{"ann", `<td class="key">search</td><td>1</td><td>2</td><td>4.00</td>`, "No budget for this project."},
		{"bob", `<td class="key">search</td><td>1</td><td>3</td><td>6.00</td>`, "No budget for this project."},
	}
	storetest.Each(t, func(t *testing.T, dsn string) {
		st := storetest.OpenWith(t, dsn, store.Options{Now: func() time.Time { return now }})
		for _, tk := range []struct {
			id, owner  string
			day, hours int
		}{{"oct-ann", "ann", 10, 2}, {"oct-bob", "bob", 11, 3}} {
			start, count, share := time.Date(2026, 10, tk.day, 10, 0, 0, 0, time.UTC).Unix(), int64(1), 1.0
			end := start + int64(tk.hours)*3600
			reg := &wire.Registration{TaskID: tk.id, TaskName: "train", Project: "search", Owner: tk.owner, StartTime: &start,
				K8sPodUID: "pod-" + tk.id, K8sNode: "decl-1", Hostname: tk.id + "-0", GPUCount: &count, Labels: wire.Labels{},
				GPUs: []wire.RegisteredGPU{{UUID: "GPU-" + tk.id, Name: "Tesla T4", MemoryTotalBytes: 1, Share: &share}}}
			if _, err := st.Register(ctx, reg, []byte(fmt.Sprintf(`{"task_id":%q}`, tk.id)), store.Sender{}); err != nil {
				t.Fatal(err)
			}
			duration, exit := float64(end-start), int64(0)
			if _, err := st.Complete(ctx, &wire.Completion{TaskID: tk.id, EndTime: &end, DurationSeconds: &duration, ExitCode: &exit},
				[]byte(fmt.Sprintf(`{"task_id":%q,"end_time":%d}`, tk.id, end)), store.Sender{}); err != nil {
				t.Fatal(err)
			}
		}
		if _, created, err := books.Close(ctx, st, "2026-10", "finance", in, time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)); err != nil || !created {
			t.Fatalf("close 2026-10: %v (created %v)", err, created)
		}
		api := monitor.New(monitor.Config{Store: st, Tokens: func() *access.Set { return set }, Now: func() time.Time { return now }})
		monitor.MountStatements(api, monitor.BooksConfig{Store: st, Inputs: in, Now: func() time.Time { return now }})
		for _, c := range cases {
			rec := get(t, api, "/statements/2026-10/search", secrets[c.token])
			page := rec.Body.String()
			if rec.Code != 200 || !strings.Contains(page, c.row) || !strings.Contains(page, c.budget) {
				t.Errorf("%s's statement page of search: %d; want the row %s and %q:\n%s", c.token, rec.Code, c.row, c.budget, page)
			}
		}
	})
}
