package report

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
)

// Budget kinds.
const (
	BudgetCost     = "cost"
	BudgetGPUHours = "gpu_hours"
)

// Budgets are the monthly limits of projects: a cost (in Currency) or
// GPU-hours each. An exact project name beats the longest matching glob,
// and a glob's limit applies to each matching project on its own.
type Budgets struct {
	Currency string
	limits   names[Limit]
}

// Limit is one project's monthly budget.
type Limit struct {
	Kind  string  // BudgetCost or BudgetGPUHours
	Value float64 // in Currency, or GPU-hours
}

// For returns the budget of project, if any.
func (b *Budgets) For(project string) (Limit, bool) {
	if b == nil {
		return Limit{}, false
	}
	return b.limits.lookup(project)
}

// Exact lists the projects named without a glob, in byte order (they have
// a budget even in a month they have not used a GPU yet).
func (b *Budgets) Exact() []string {
	if b == nil {
		return nil
	}
	out := make([]string, 0, len(b.limits.exact))
	for p := range b.limits.exact {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// HasCost says whether any budget is a cost.
func (b *Budgets) HasCost() bool {
	if b == nil {
		return false
	}
	return slices.ContainsFunc(b.limits.all(), func(l Limit) bool { return l.Kind == BudgetCost })
}

// ErrBadBudgets classifies every error about a budgets file's content.
var ErrBadBudgets = errors.New("bad budgets file")

type budgetsFile struct {
	Currency *string       `json:"currency"`
	Budgets  []budgetEntry `json:"budgets"`
}

type budgetEntry struct {
	Project         *string  `json:"project"`
	MonthlyCost     *float64 `json:"monthly_cost"`
	MonthlyGPUHours *float64 `json:"monthly_gpu_hours"`
}

// ParseBudgets reads a budgets file's JSON: {"currency": "CNY", "budgets":
// [{"project": "search_*", "monthly_cost": 5000}, {"project": "nlp",
// "monthly_gpu_hours": 800}]}. Each entry names a project (a name or a
// glob) and exactly one of monthly_cost and monthly_gpu_hours (a number of
// at least 0); a project twice, unknown fields and malformed globs are
// errors naming the field.
func ParseBudgets(r io.Reader) (*Budgets, error) {
	var f budgetsFile
	if err := decodeFile(r, &f, ErrBadBudgets); err != nil {
		return nil, err
	}
	if f.Budgets == nil {
		return nil, fmt.Errorf("%w: budgets: required (a list of {project, monthly_cost or monthly_gpu_hours})", ErrBadBudgets)
	}
	b := &Budgets{}
	if f.Currency != nil {
		b.Currency = strings.TrimSpace(*f.Currency)
	}
	seen := map[string]bool{}
	for i, e := range f.Budgets {
		field := fmt.Sprintf("budgets[%d]", i)
		if e.Project == nil || *e.Project == "" {
			return nil, fmt.Errorf("%w: %s.project: required (a project name or glob)", ErrBadBudgets, field)
		}
		p := *e.Project
		if seen[p] {
			return nil, fmt.Errorf("%w: %s.project: %q has a budget already", ErrBadBudgets, field, p)
		}
		seen[p] = true
		var l Limit
		switch {
		case (e.MonthlyCost == nil) == (e.MonthlyGPUHours == nil):
			return nil, fmt.Errorf("%w: %s: exactly one of monthly_cost and monthly_gpu_hours", ErrBadBudgets, field)
		case e.MonthlyCost != nil:
			l = Limit{BudgetCost, *e.MonthlyCost}
			field += ".monthly_cost"
		default:
			l = Limit{BudgetGPUHours, *e.MonthlyGPUHours}
			field += ".monthly_gpu_hours"
		}
		if l.Value < 0 || math.IsNaN(l.Value) || math.IsInf(l.Value, 0) {
			return nil, fmt.Errorf("%w: %s: a limit is a number of at least 0, not %v", ErrBadBudgets, field, l.Value)
		}
		if err := b.limits.add(p, l); err != nil {
			return nil, fmt.Errorf("%w: budgets[%d].project: %q is not a valid glob: %w", ErrBadBudgets, i, p, err)
		}
	}
	return b, nil
}

// LoadBudgets reads the budgets file at name and checks it against the
// prices in force (nil: none; pricesName is their file, for the error): a
// cost budget needs prices of the same currency. Errors name the files.
func LoadBudgets(name string, prices *Prices, pricesName string) (*Budgets, error) {
	b, err := loadFile("budgets file", name, ParseBudgets)
	if err != nil {
		return nil, err
	}
	if !b.HasCost() {
		return b, nil
	}
	switch {
	case prices == nil:
		return nil, fmt.Errorf("budgets file %s has cost budgets (monthly_cost, currency %q) but no prices file is set (--prices): a cost budget needs a prices file of the same currency",
			name, b.Currency)
	case !strings.EqualFold(prices.Currency, b.Currency):
		return nil, fmt.Errorf("budgets file %s (currency %q) and prices file %s (currency %q): a cost budget needs a prices file of the same currency",
			name, b.Currency, pricesName, prices.Currency)
	}
	return b, nil
}
