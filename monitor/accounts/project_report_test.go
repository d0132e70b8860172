package accounts_test

import (
	"testing"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/access"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// The statement page of a team (ProjectReport) narrows October's
// statement to the owners its reader may see. By hand: search's October is
// ann's 2 h (4 EUR) and bob's 3 h (6 EUR), 5 GPU-hours (10 EUR) of its 10
// budgeted; a reader of some owners sees their hours summed in the
// project's one row, without the budget (owners it may not read spend it).
func TestProjectReportNarrowedToOwners(t *testing.T) {
	type want struct {
		rows          int
		hours, cost   float64
		budgetedHours float64 // the budget's used; 0: no budget
	}
	cases := []struct {
		name  string
		scope *access.Scope
		want  want
	}{
		{"admin", nil, want{1, 5, 10, 5}},
		{"the project", &access.Scope{Projects: []string{"search"}}, want{1, 5, 10, 5}},
		{"every owner", &access.Scope{Projects: []string{"search"}, Owners: []string{"*"}}, want{1, 5, 10, 5}},
		{"ann", &access.Scope{Projects: []string{"search"}, Owners: []string{"ann"}}, want{1, 2, 4, 0}},
		{"bob, any project", &access.Scope{Projects: []string{"*"}, Owners: []string{"bob"}}, want{1, 3, 6, 0}},
		{"nobody of search", &access.Scope{Projects: []string{"search"}, Owners: []string{"carol"}}, want{0, 0, 0, 0}},
	}
	storetest.Each(t, func(t *testing.T, dsn string) {
		_, acc := fleet(t, dsn)
		october := facts.Month(at(10, 1, 0, 0))
		for _, c := range cases {
			rep, err := acc.ProjectReport(ctx, october, "search", c.scope, now)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if rep.Closed == nil {
				t.Fatalf("%s: October is not answered from its statement", c.name)
			}
			got := want{rows: len(rep.Rows), hours: rep.Total.GPUHours}
			if rep.Total.Cost != nil {
				got.cost = *rep.Total.Cost
			}
			if len(rep.Rows) == 1 {
				r := rep.Rows[0]
				if r.Key["project"] != "search" || r.GPUHours != rep.Total.GPUHours {
					t.Errorf("%s: row %+v, want search's, the total's figures", c.name, r)
				}
				if r.Budget != nil {
					got.budgetedHours = r.Budget.Used
				}
			}
			if got != c.want {
				t.Errorf("%s: %d row(s), %v GPU-hours, %v EUR, budget used %v; want %+v", c.name, got.rows, got.hours, got.cost, got.budgetedHours, c.want)
			}
		}
	})
}
