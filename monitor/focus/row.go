package focus

import (
	"encoding/json"
	"time"
)

// Row is one FOCUS row as this export fills it (docs/cost.md, "What each
// column means here"); a nil pointer is a null.
type Row struct {
	BilledCost                           float64
	BillingCurrency                      string
	BillingPeriodStart, BillingPeriodEnd time.Time
	ChargePeriodStart, ChargePeriodEnd   time.Time
	ChargeCategory                       string // Usage
	ChargeClass                          string // "" (null) or Correction
	ChargeDescription                    string
	ConsumedQuantity                     *float64
	ConsumedUnit                         string
	PricingQuantity                      *float64
	PricingUnit                          string
	ListUnitPrice                        *float64
	InvoiceID                            string // "" (null) while the month is open
	SkuID, SkuPriceID                    string
	SubAccountID                         string
	SubAccountName                       string
	Tags                                 map[string]string
	// The x_ columns.
	SplitRule           string   // equal, util, mig-slices; "" null
	AllocatedShare      *float64 // the row's share of its GPUs' seconds
	BillingBasis        string   // declared, observed; "" null (platform rows)
	LedgerState         string   // one of ledger.States; "" null (corrections)
	DeclaredOffsetHours *float64 // unobserved platform rows: GPU-hours tasks were billed declared for

	owner string // the row key's owner (Tags holds it too)
}

// Columns are the export's columns, in order: every column FOCUS 1.3
// makes mandatory, the conditional ones that apply (consumed quantity,
// unit prices, SKU, sub-account, tags; the split-allocation columns of 1.3
// present and null), the recommended ChargeFrequency, InvoiceId and
// ServiceSubcategory, then this export's x_ columns.
var Columns = []string{
	"BilledCost", "BillingAccountId", "BillingAccountName", "BillingCurrency",
	"BillingPeriodStart", "BillingPeriodEnd",
	"ChargeCategory", "ChargeClass", "ChargeDescription", "ChargeFrequency",
	"ChargePeriodStart", "ChargePeriodEnd",
	"ConsumedQuantity", "ConsumedUnit",
	"ContractedCost", "ContractedUnitPrice", "EffectiveCost",
	"HostProviderName", "InvoiceId", "InvoiceIssuerName",
	"ListCost", "ListUnitPrice",
	"PricingCategory", "PricingQuantity", "PricingUnit",
	"ProviderName", "PublisherName", "ServiceProviderName",
	"ServiceCategory", "ServiceName", "ServiceSubcategory",
	"SkuId", "SkuPriceId",
	"SubAccountId", "SubAccountName", "Tags",
	"AllocatedMethodId", "AllocatedMethodDetails", "AllocatedResourceId", "AllocatedResourceName", "AllocatedTags",
	"x_SplitRule", "x_AllocatedShare", "x_BillingBasis", "x_LedgerState", "x_DeclaredOffsetGpuHours",
}

// Fixed column values.
const (
	ServiceCategory    = "AI and Machine Learning"
	ServiceSubcategory = "Other (AI and Machine Learning)"
	ServiceName        = "GPU compute"
	UnitGPUHours       = "GPU-Hours"
	UnitInstanceHours  = "Instance-Hours"
)

// tagsJSON is the row's Tags: a JSON object with sorted keys, null when
// empty.
func (r *Row) tagsJSON() (string, bool) {
	if len(r.Tags) == 0 {
		return "", false
	}
	b, err := json.Marshal(r.Tags) // map keys are sorted
	if err != nil {
		return "", false
	}
	return string(b), true
}
