package main

// Black-box tests of the FOCUS export (docs/cost.md, "The FOCUS export"):
// every rule of the FOCUS specification the export claims, checked on a
// month with a shared GPU, a MIG instance, undeclared use, declared use on
// a node without reports and an adjustment, on both stores; Σ BilledCost
// against the ledger and by hand.

import (
	"bytes"
	"compress/gzip"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// focusColumn is one column's rules, as the FOCUS specification's column
// files state them (FOCUS_Spec, specification/columns/*.md: "MUST be
// present", "MUST be of type", "MUST NOT be null", "MUST be one of the
// allowed values"; 1.3 adds ServiceProviderName, HostProviderName and the
// Allocated* columns).
type focusColumn struct {
	name     string
	kind     string // decimal, datetime, string, json
	nullable bool
	allowed  []string // nil: any
}

var focusRules = []focusColumn{
	{"BilledCost", "decimal", false, nil},
	{"BillingAccountId", "string", false, nil},
	{"BillingAccountName", "string", true, nil},
	{"BillingCurrency", "currency", false, nil},
	{"BillingPeriodStart", "datetime", false, nil},
	{"BillingPeriodEnd", "datetime", false, nil},
	{"ChargeCategory", "string", false, []string{"Usage", "Purchase", "Tax", "Credit", "Adjustment"}},
	{"ChargeClass", "string", true, []string{"Correction"}},
	{"ChargeDescription", "string", true, nil},
	{"ChargeFrequency", "string", false, []string{"One-Time", "Recurring", "Usage-Based"}},
	{"ChargePeriodStart", "datetime", false, nil},
	{"ChargePeriodEnd", "datetime", false, nil},
	{"ConsumedQuantity", "decimal", true, nil},
	{"ConsumedUnit", "string", true, nil},
	{"ContractedCost", "decimal", false, nil},
	{"ContractedUnitPrice", "decimal", true, nil},
	{"EffectiveCost", "decimal", false, nil},
	{"HostProviderName", "string", false, nil},
	{"InvoiceId", "string", true, nil},
	{"InvoiceIssuerName", "string", false, nil},
	{"ListCost", "decimal", false, nil},
	{"ListUnitPrice", "decimal", true, nil},
	{"PricingCategory", "string", true, []string{"Standard", "Dynamic", "Committed", "Other"}},
	{"PricingQuantity", "decimal", true, nil},
	{"PricingUnit", "string", true, nil},
	{"ProviderName", "string", false, nil},
	{"PublisherName", "string", false, nil},
	{"ServiceProviderName", "string", false, nil},
	{"ServiceCategory", "string", false, []string{"AI and Machine Learning", "Analytics", "Business Applications", "Compute",
		"Databases", "Developer Tools", "Multicloud", "Identity", "Integration", "Internet of Things", "Management and Governance",
		"Media", "Migration", "Mobile", "Networking", "Security", "Storage", "Web", "Other"}},
	{"ServiceName", "string", false, nil},
	{"ServiceSubcategory", "string", false, []string{"AI Platforms", "Bots", "Generative AI", "Machine Learning",
		"Natural Language Processing", "Other (AI and Machine Learning)"}},
	{"SkuId", "string", true, nil},
	{"SkuPriceId", "string", true, nil},
	{"SubAccountId", "string", true, nil},
	{"SubAccountName", "string", true, nil},
	{"Tags", "json", true, nil},
	{"AllocatedMethodId", "string", true, nil},
	{"AllocatedMethodDetails", "json", true, nil},
	{"AllocatedResourceId", "string", true, nil},
	{"AllocatedResourceName", "string", true, nil},
	{"AllocatedTags", "json", true, nil},
	{"x_SplitRule", "string", true, []string{"equal", "util", "mig-slices"}},
	{"x_AllocatedShare", "decimal", true, nil},
	{"x_BillingBasis", "string", true, []string{"declared", "observed"}},
	{"x_LedgerState", "string", true, []string{"attributed", "undeclared", "unattributed", "unallocated", "unobserved"}},
	{"x_DeclaredOffsetGpuHours", "decimal", true, nil},
}

var (
	focusDateTime = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$`)
	focusCurrency = regexp.MustCompile(`^[A-Z]{3}$`)
)

// focusRow is one parsed row, by column name.
type focusRow map[string]string

func (r focusRow) num(t *testing.T, col string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(r[col], 64)
	if err != nil {
		t.Fatalf("%s %q: %v", col, r[col], err)
	}
	return v
}

func (r focusRow) at(t *testing.T, col string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, r[col])
	if err != nil {
		t.Fatalf("%s %q: %v", col, r[col], err)
	}
	return v
}

// checkFocus parses an export of month and checks every rule the export
// claims; it returns the rows.
func checkFocus(t *testing.T, body, month string) []focusRow {
	t.Helper()
	recs, err := csv.NewReader(strings.NewReader(body)).ReadAll()
	if err != nil || len(recs) < 2 {
		t.Fatalf("export: %v\n%s", err, body)
	}
	head := recs[0]
	for _, c := range focusRules {
		if !slices.Contains(head, c.name) {
			t.Errorf("column %s is missing (MUST be present)", c.name)
		}
	}
	for _, h := range head {
		if !slices.ContainsFunc(focusRules, func(c focusColumn) bool { return c.name == h }) {
			t.Errorf("column %s is not a FOCUS column nor x_-prefixed", h)
		}
	}
	billing, _ := time.Parse("2006-01", month)
	billingEnd := billing.AddDate(0, 1, 0)
	var rows []focusRow
	for i, rec := range recs[1:] {
		r := focusRow{}
		for j, h := range head {
			r[h] = rec[j]
		}
		rows = append(rows, r)
		where := fmt.Sprintf("row %d (%s, %s)", i+1, r["SubAccountId"], r["ChargeDescription"])
		for _, c := range focusRules {
			v := r[c.name]
			if v == "" {
				if !c.nullable {
					t.Errorf("%s: %s is null (MUST NOT be null)", where, c.name)
				}
				continue
			}
			switch c.kind {
			case "decimal":
				if _, err := strconv.ParseFloat(v, 64); err != nil || strings.ContainsAny(v, "eE") {
					t.Errorf("%s: %s %q is not a decimal (NumericFormat)", where, c.name, v)
				}
			case "datetime":
				if !focusDateTime.MatchString(v) {
					t.Errorf("%s: %s %q is not YYYY-MM-DDTHH:mm:ssZ (DateTimeFormat)", where, c.name, v)
				}
			case "currency":
				if !focusCurrency.MatchString(v) {
					t.Errorf("%s: %s %q is not an ISO 4217 code", where, c.name, v)
				}
			case "json":
				var m map[string]any
				if err := json.Unmarshal([]byte(v), &m); err != nil {
					t.Errorf("%s: %s %q is not a JSON object (KeyValueFormat)", where, c.name, v)
				}
			}
			if c.allowed != nil && !slices.Contains(c.allowed, v) {
				t.Errorf("%s: %s %q is not an allowed value", where, c.name, v)
			}
		}
		// No discounts: the four costs are one.
		for _, c := range []string{"EffectiveCost", "ListCost", "ContractedCost"} {
			if r[c] != r["BilledCost"] {
				t.Errorf("%s: %s %s ≠ BilledCost %s", where, c, r[c], r["BilledCost"])
			}
		}
		// Periods: the billing period is the month.
		if r.at(t, "BillingPeriodStart") != billing || r.at(t, "BillingPeriodEnd") != billingEnd {
			t.Errorf("%s: billing period %s–%s, want the month", where, r["BillingPeriodStart"], r["BillingPeriodEnd"])
		}
		cs, ce := r.at(t, "ChargePeriodStart"), r.at(t, "ChargePeriodEnd")
		correction := r["ChargeClass"] == "Correction"
		if correction {
			if ce.Sub(cs) != 24*time.Hour || ce.After(billing) {
				t.Errorf("%s: a correction's charge period %s–%s is not a day of its own, before the billing period", where, cs, ce)
			}
		} else if cs.Before(billing) || ce.After(billingEnd) || ce.Sub(cs) != 24*time.Hour {
			t.Errorf("%s: charge period %s–%s is not a day inside the billing period", where, cs, ce)
		}
		// Nullability that depends on other columns.
		if (r["ConsumedQuantity"] == "") != (r["ConsumedUnit"] == "") {
			t.Errorf("%s: ConsumedUnit is null iff ConsumedQuantity is", where)
		}
		if (r["PricingQuantity"] == "") != (r["PricingUnit"] == "") {
			t.Errorf("%s: PricingUnit is null iff PricingQuantity is", where)
		}
		if !correction {
			for _, c := range []string{"ConsumedQuantity", "PricingQuantity", "ListUnitPrice"} {
				if r[c] == "" {
					t.Errorf("%s: %s is null on a Usage row that is no correction", where, c)
				}
			}
			if r["ConsumedUnit"] != "GPU-Hours" || (r["PricingUnit"] != "GPU-Hours" && r["PricingUnit"] != "Instance-Hours") {
				t.Errorf("%s: units %q %q", where, r["ConsumedUnit"], r["PricingUnit"])
			}
			// ListUnitPrice × PricingQuantity = ListCost.
			if p := r.num(t, "ListUnitPrice") * r.num(t, "PricingQuantity"); math.Abs(p-r.num(t, "ListCost")) > 1e-9*math.Max(1, math.Abs(p)) {
				t.Errorf("%s: ListUnitPrice × PricingQuantity = %v, ListCost %s", where, p, r["ListCost"])
			}
			if r["ListUnitPrice"] != r["ContractedUnitPrice"] {
				t.Errorf("%s: ContractedUnitPrice %s ≠ ListUnitPrice %s", where, r["ContractedUnitPrice"], r["ListUnitPrice"])
			}
		}
		for _, c := range []string{"AllocatedMethodId", "AllocatedMethodDetails", "AllocatedResourceId", "AllocatedResourceName", "AllocatedTags"} {
			if r[c] != "" {
				t.Errorf("%s: %s is %q; the export leaves split allocation to x_SplitRule (null)", where, c, r[c])
			}
		}
		if r["ChargeCategory"] != "Usage" || r["ServiceCategory"] != "AI and Machine Learning" || r["ServiceName"] != "GPU compute" {
			t.Errorf("%s: %s %s %s", where, r["ChargeCategory"], r["ServiceCategory"], r["ServiceName"])
		}
		for _, c := range []string{"InvoiceIssuerName", "ProviderName", "PublisherName", "ServiceProviderName", "HostProviderName", "BillingAccountId"} {
			if r[c] != "acme-gpu" {
				t.Errorf("%s: %s %q, want --focus-provider", where, c, r[c])
			}
		}
		if r["Tags"] != "" {
			var tags map[string]any
			json.Unmarshal([]byte(r["Tags"]), &tags)
			for k := range tags {
				if !strings.HasPrefix(k, "paddle/") {
					t.Errorf("%s: tag %q without the paddle/ prefix", where, k)
				}
			}
		}
	}
	return rows
}

// focusFleet is the FOCUS tests' monitor and its files: prices (an H200
// 10, its 3g.71gb instance 5, a Tesla T4 2 CNY an hour), team-b's
// namespace charged to ads_x, the provider acme-gpu; October holds one
// task on a T4 and is closed, then a late registration of October comes
// (an adjustment November carries).
type focusFleet struct {
	s               *server
	dir, prices, ns string
	flags           []string
	t4              string // the T4's GPU entry
}

func startFocusFleet(t *testing.T, dsn string) focusFleet {
	t.Helper()
	f := focusFleet{dir: t.TempDir(), t4: `{"index":0,"uuid":"GPU-t4","name":"Tesla T4","memory_total_bytes":1,"share":1}`}
	f.prices = filepath.Join(f.dir, "prices.json")
	writeFile(t, f.prices, `{"currency":"CNY","models":{"NVIDIA H200":10,"NVIDIA H200 3g.71gb":5,"Tesla T4":2}}`)
	f.ns = filepath.Join(f.dir, "namespaces.json")
	writeFile(t, f.ns, `{"team-b":"ads_x"}`)
	f.flags = []string{"--prices", f.prices, "--namespace-projects", f.ns, "--focus-provider", "acme-gpu"}
	f.s = startServer(t, dsn, append([]string{"--tokens", nodeTokens(t)}, f.flags...)...)
	oct := time.Date(2025, 10, 20, 0, 0, 0, 0, time.UTC).Unix()
	billingTask(t, f.s, "t-oct", "search_a", "", f.t4, oct, oct+3600)
	expect(t, f.s.do(t, post("/v1/statements/2025-10/close", "", "a-secret")), 201, "")
	billingTask(t, f.s, "t-late", "search_a", "", f.t4, oct, oct+2*3600)
	return f
}

func TestFocusExport(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		f := startFocusFleet(t, dsn)
		s, dir, prices, ns, flags, t4 := f.s, f.dir, f.prices, f.ns, f.flags, f.t4

		// November 10: gpu-node-1 reports [h, h+10h): GPU-a shared by the
		// pods of search_a and search_b (two users, equal split), GPU-d
		// held by search_mixed (declared share 0.5, 12 h: 2 h uncovered),
		// a 3g.71gb instance of GPU-f by search_mig, GPU-e by an
		// unregistered pod of team-b (ads_x); search_decl declared a T4
		// for 3 h on other-node, which sends no reports.
		h := time.Date(2025, 11, 10, 0, 0, 0, 0, time.UTC).Unix()
		billingTask(t, s, "t-a", "search_a", "pod-a", wholeGPU("GPU-a", 1), h, h+36000)
		billingTask(t, s, "t-b", "search_b", "pod-b", wholeGPU("GPU-a", 1), h, h+36000)
		billingTask(t, s, "t-mixed", "search_mixed", "pod-d", wholeGPU("GPU-d", 0.5), h, h+12*3600)
		mig := `{"index":0,"uuid":"GPU-f","name":"NVIDIA H200","memory_total_bytes":76000000000,
			"mig":{"uuid":"MIG-f-1","gpu_instance_id":1,"compute_instance_id":0,"profile":"3g.71gb","slices":3,"total_slices":7}}`
		billingTask(t, s, "t-mig", "search_mig", "pod-f", mig, h, h+36000)
		billingTask(t, s, "t-decl", "search_decl", "", t4, h, h+3*3600)
		billingTask(t, s, "t-decl2", "search_decl", "", wholeGPU("GPU-x", 1), h, h+3600)
		// search_dup declared GPU-x too, for the same hour: two tasks on
		// one GPU no node reports, both billed as declared (20.5).
		billingTask(t, s, "t-dup", "search_dup", "", wholeGPU("GPU-x", 1), h, h+3600)
		user := func(pod string) string {
			return fmt.Sprintf(`{"runtime":"containerd","container_id":"c-%s","pod_uid":%q,"namespace":"team-a","pod":"p","container":"paddle",
				"allocated_share":1,"seen_share":1,"busy_share":1}`, pod, pod)
		}
		instances := []string{
			`{"uuid":"GPU-a","gpu_instance_id":null,"name":"NVIDIA H200","samples":60,"busy_share":1,"busy_basis":"utilization",
			  "occupied_share":1,"energy_joules":null,"users":[` + user("pod-a") + `,` + user("pod-b") + `]}`,
			billingInstance("GPU-d", "pod-d", "team-a", 1, -1),
			billingInstance("GPU-e", "pod-e", "team-b", 1, -1),
			`{"uuid":"GPU-f","gpu_instance_id":1,"profile":"3g.71gb","slices":3,"total_slices":7,"name":"NVIDIA H200","samples":60,
			  "busy_share":1,"busy_basis":"processes","occupied_share":1,"energy_joules":null,"users":[` + user("pod-f") + `]}`,
		}
		rep := fmt.Sprintf(`{"schema_version":1,"node":"gpu-node-1","time":%d,"interval_seconds":36000,"samples":60,
			"gpus":[],"instances":[%s]}`, h+36000, strings.Join(instances, ","))
		expect(t, s.do(t, post("/v1/nodes/report", rep, "n-secret")), 201, "")

		export := append([]string{"export", "focus", "--db", dsn, "--month", "2025-11"}, flags...)
		open := mustRun(t, export...)
		rows := checkFocus(t, open, "2025-11")

		find := func(sub, state, basis, sku string) []focusRow {
			var out []focusRow
			for _, r := range rows {
				if r["SubAccountId"] == sub && r["x_LedgerState"] == state && r["x_BillingBasis"] == basis && (sku == "" || r["SkuId"] == sku) {
					out = append(out, r)
				}
			}
			return out
		}
		one := func(what string, got []focusRow) focusRow {
			t.Helper()
			if len(got) != 1 {
				t.Fatalf("%s: %d rows, want 1:\n%s", what, len(got), open)
			}
			return got[0]
		}
		// By hand (H200 10 an hour, its 3g.71gb instance 5 an
		// instance-hour, T4 2):
		// search_a and search_b split GPU-a's 10 h equally: 5 GPU-h, 50.
		for _, p := range []string{"search_a", "search_b"} {
			r := one(p, find(p, "attributed", "observed", "NVIDIA H200"))
			if r.num(t, "BilledCost") != 50 || r.num(t, "ConsumedQuantity") != 5 || r["x_SplitRule"] != "" && r["x_SplitRule"] != "equal" ||
				r["ChargePeriodStart"] != "2025-11-10T00:00:00Z" || r["Tags"] != `{"paddle/owner":"ann@example.com"}` ||
				r["SkuPriceId"] != "NVIDIA H200" || r["PricingUnit"] != "GPU-Hours" || r["ListUnitPrice"] != "10" {
				t.Errorf("%s: %v", p, r)
			}
		}
		// search_mixed: observed 10 h whole (100), declared 2 h × 0.5 (10).
		if r := one("mixed observed", find("search_mixed", "attributed", "observed", "")); r.num(t, "BilledCost") != 100 {
			t.Errorf("search_mixed observed: %v", r)
		}
		if r := one("mixed declared", find("search_mixed", "unobserved", "declared", "")); r.num(t, "BilledCost") != 10 ||
			r.num(t, "ConsumedQuantity") != 1 || r["x_AllocatedShare"] != "0.5" {
			t.Errorf("search_mixed declared: %v", r)
		}
		// search_mig: 3/7 × 10 h = 4.285714 GPU-h, 10 instance-hours at 5.
		if r := one("mig", find("search_mig", "attributed", "observed", "NVIDIA H200 3g.71gb")); r.num(t, "BilledCost") != 50 ||
			r["PricingUnit"] != "Instance-Hours" || r["ListUnitPrice"] != "5" || r.num(t, "PricingQuantity") != 10 ||
			math.Abs(r.num(t, "ConsumedQuantity")-30.0/7) > 1e-6 || r["x_SplitRule"] != "mig-slices" || r["SkuPriceId"] != "NVIDIA H200 3g.71gb" {
			t.Errorf("search_mig: %v", r)
		}
		// ads_x: GPU-e's 10 undeclared hours.
		if r := one("undeclared", find("ads_x", "undeclared", "observed", "")); r.num(t, "BilledCost") != 100 {
			t.Errorf("ads_x: %v", r)
		}
		// search_decl: 3 T4-hours and an H200-hour declared on a node
		// without reports.
		if r := one("decl", find("search_decl", "unobserved", "declared", "Tesla T4")); r.num(t, "BilledCost") != 6 {
			t.Errorf("search_decl: %v", r)
		}
		if r := one("decl H200", find("search_decl", "unobserved", "declared", "NVIDIA H200")); r.num(t, "BilledCost") != 10 {
			t.Errorf("search_decl's H200: %v", r)
		}
		if r := one("dup", find("search_dup", "unobserved", "declared", "NVIDIA H200")); r.num(t, "BilledCost") != 10 {
			t.Errorf("search_dup's H200: %v", r)
		}
		// The adjustment: t-late's 2 T4-hours of October 20 (4), a
		// correction keeping that day as its charge period (20.17).
		var corr []focusRow
		for _, r := range rows {
			if r["ChargeClass"] == "Correction" {
				corr = append(corr, r)
			}
		}
		if len(corr) != 1 || corr[0]["SubAccountId"] != "search_a" || corr[0].num(t, "BilledCost") != 4 ||
			corr[0]["ChargePeriodStart"] != "2025-10-20T00:00:00Z" || corr[0]["ChargePeriodEnd"] != "2025-10-21T00:00:00Z" ||
			!strings.Contains(corr[0]["ChargeDescription"], "late_registration") {
			t.Errorf("corrections: %v", corr)
		}
		// The platform: its rows carry no basis, and the unobserved H200
		// rows of November 10 less the declared hours of search_mixed.
		var platform, usage float64
		offset := false
		for _, r := range rows {
			if r["ChargeClass"] == "Correction" {
				continue
			}
			usage += r.num(t, "BilledCost")
			if r["SubAccountId"] == "platform" {
				platform += r.num(t, "BilledCost")
				if r["x_BillingBasis"] != "" || !slices.Contains([]string{"unattributed", "unallocated", "unobserved"}, r["x_LedgerState"]) {
					t.Errorf("platform row %v", r)
				}
				if r["x_DeclaredOffsetGpuHours"] != "" {
					offset = true
					if r["ChargePeriodStart"] != "2025-11-10T00:00:00Z" || r.num(t, "x_DeclaredOffsetGpuHours") != 1 {
						t.Errorf("the declared offset: %v", r)
					}
				}
			}
		}
		if !offset {
			t.Errorf("no platform row carries the declared offset")
		}
		// Σ BilledCost = the ledger's capacity cost + the declared cost
		// on GPUs no node reports (search_decl's 6 + 10 and search_dup's
		// 10: GPU-x's one hour billed twice, as declared; these H200-hours
		// are not taken from the platform's unobserved H200 hours of that
		// day, search_mixed's declared hour is) (MONITOR.md 20.15).
		var led struct {
			Total struct {
				CapacityCost float64 `json:"capacity_cost"`
			} `json:"total"`
		}
		lj := mustRun(t, "ledger", "--db", dsn, "--month", "2025-11", "--prices", prices, "--namespace-projects", ns, "--by", "model", "--format", "json")
		if err := json.Unmarshal([]byte(lj), &led); err != nil || led.Total.CapacityCost == 0 {
			t.Fatalf("ledger: %v %s", err, lj)
		}
		// (The ledger prints money to the cent.)
		if math.Abs(usage-(led.Total.CapacityCost+26)) > 0.005 {
			t.Errorf("Σ BilledCost %v, want the ledger's capacity cost %v + 26", usage, led.Total.CapacityCost)
		}
		// The projects' part by hand: 50 + 50 + 110 + 50 + 100 + 6 + 10 + 10 = 386.
		if math.Abs(usage-platform-386) > 1e-6 {
			t.Errorf("the projects' Σ BilledCost %v, want 386", usage-platform)
		}

		// HTTP: the same bytes; csv.gz the same CSV; a team sees its own.
		a := s.do(t, request{Method: "GET", Path: "/v1/export/focus?month=2025-11", Token: "a-secret"})
		if a.Status != 200 || string(a.Body) != open || a.Header.Get("Content-Type") != "text/csv; charset=utf-8" {
			t.Errorf("GET /v1/export/focus: %d %s", a.Status, a.Header)
		}
		gz := s.do(t, request{Method: "GET", Path: "/v1/export/focus?month=2025-11&format=csv.gz", Token: "a-secret"})
		if zr, err := gzip.NewReader(bytes.NewReader(gz.Body)); err != nil {
			t.Errorf("csv.gz: %v", err)
		} else if b, _ := io.ReadAll(zr); string(b) != open {
			t.Errorf("csv.gz is not the CSV")
		}
		team := s.do(t, request{Method: "GET", Path: "/v1/export/focus?month=2025-11", Token: "s-secret"})
		teamRows := checkFocus(t, string(team.Body), "2025-11")
		for _, r := range teamRows {
			if !strings.HasPrefix(r["SubAccountId"], "search_") {
				t.Errorf("the team's export has a row of %s", r["SubAccountId"])
			}
		}
		if len(teamRows) == 0 {
			t.Errorf("the team's export is empty")
		}
		for _, bad := range []string{"month=2025-13", "", "month=2025-11&format=xlsx", "month=2025-11&format=parquet"} {
			if a := s.do(t, get("/v1/export/focus?"+bad, "a-secret")); a.Status != 400 {
				t.Errorf("?%s: %d %s", bad, a.Status, a.Body)
			}
		}

		// Closed: generated at the close and kept; byte-identical call to
		// call, whatever arrives later.
		closeA := s.do(t, post("/v1/statements/2025-11/close", `{"reason":"November billed"}`, "a-secret"))
		if closeA.Status != 201 {
			t.Fatalf("close: %d %s", closeA.Status, closeA.Body)
		}
		first := s.do(t, request{Method: "GET", Path: "/v1/export/focus?month=2025-11", Token: "a-secret"})
		closedRows := checkFocus(t, string(first.Body), "2025-11")
		for _, r := range closedRows {
			if r["InvoiceId"] != "2025-11-v1" {
				t.Fatalf("a closed month's InvoiceId %q, want 2025-11-v1", r["InvoiceId"])
			}
		}
		billingTask(t, s, "t-later", "search_a", "", t4, h, h+3600) // late data of the closed month
		second := s.do(t, request{Method: "GET", Path: "/v1/export/focus?month=2025-11", Token: "a-secret"})
		cli := mustRun(t, export...)
		if string(first.Body) != string(second.Body) || cli != string(first.Body) {
			t.Errorf("a closed month's export changed between calls")
		}
		stopServer(t, s)

		// Usage errors: no prices, a currency that is not ISO 4217,
		// parquet, no month.
		yuan := filepath.Join(dir, "yuan.json")
		writeFile(t, yuan, `{"currency":"yuan","models":{"NVIDIA H200":10}}`)
		for _, bad := range [][]string{
			{"export", "focus", "--db", dsn, "--month", "2025-11"},
			{"export", "focus", "--db", dsn, "--month", "2025-11", "--prices", yuan},
			{"export", "focus", "--db", dsn, "--month", "2025-11", "--prices", prices, "--format", "parquet"},
			{"export", "focus", "--db", dsn, "--prices", prices},
			{"export", "csv", "--db", dsn},
		} {
			r := runMonitor(t, bad...)
			if r.code != 2 {
				t.Errorf("%q: exit %d %s", bad, r.code, r.stderr)
			}
			if slices.Contains(bad, yuan) && !strings.Contains(r.stderr, "--prices") {
				t.Errorf("a currency that is not ISO 4217: %s", r.stderr)
			}
		}
	})
}
