package focus

import (
	"bytes"
	"compress/gzip"
	"encoding/csv"
	"io"
	"strconv"
	"strings"
	"time"
)

// Formats of the export.
const (
	FormatCSV   = "csv"
	FormatCSVGz = "csv.gz"
)

// WriteCSV writes the export: the column names, then one line per row.
// A null is an empty cell; decimals are written in full ('f', shortest);
// date-times in UTC as 2006-01-02T15:04:05Z (FOCUS's DateTimeFormat);
// Tags a JSON object. Text cells are neutralised against spreadsheet
// formulas (cell).
func WriteCSV(w io.Writer, e *Export, s Settings) error {
	s = s.WithDefaults()
	cw := csv.NewWriter(w)
	if err := cw.Write(Columns); err != nil {
		return err
	}
	for i := range e.Rows {
		if err := cw.Write(record(&e.Rows[i], s)); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// Write writes the export in format (FormatCSV or FormatCSVGz). The gzip
// stream carries no name and no time, so the same rows are the same bytes.
func Write(w io.Writer, e *Export, s Settings, format string) error {
	if format != FormatCSVGz {
		return WriteCSV(w, e, s)
	}
	var b bytes.Buffer
	if err := WriteCSV(&b, e, s); err != nil {
		return err
	}
	return Gzip(w, b.Bytes())
}

// Gzip compresses a CSV export deterministically (no name, no time).
func Gzip(w io.Writer, csvBytes []byte) error {
	zw, err := gzip.NewWriterLevel(w, gzip.BestCompression)
	if err != nil {
		return err
	}
	zw.ModTime = time.Time{}
	if _, err := zw.Write(csvBytes); err != nil {
		return err
	}
	return zw.Close()
}

func record(r *Row, s Settings) []string {
	num := func(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }
	opt := func(x *float64) string {
		if x == nil {
			return ""
		}
		return num(*x)
	}
	at := func(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05Z") }
	tags, _ := r.tagsJSON()
	cost := num(r.BilledCost)
	return []string{
		cost, cell(s.BillingAccount), cell(s.BillingAccount), r.BillingCurrency,
		at(r.BillingPeriodStart), at(r.BillingPeriodEnd),
		r.ChargeCategory, r.ChargeClass, cell(r.ChargeDescription), "Usage-Based",
		at(r.ChargePeriodStart), at(r.ChargePeriodEnd),
		opt(r.ConsumedQuantity), unit(r.ConsumedQuantity, r.ConsumedUnit),
		cost, opt(r.ListUnitPrice), cost,
		cell(s.HostProvider), r.InvoiceID, cell(s.Provider),
		cost, opt(r.ListUnitPrice),
		pricingCategory(r), opt(r.PricingQuantity), unit(r.PricingQuantity, r.PricingUnit),
		cell(s.Provider), cell(s.Provider), cell(s.Provider),
		ServiceCategory, ServiceName, ServiceSubcategory,
		cell(r.SkuID), cell(r.SkuPriceID),
		cell(r.SubAccountID), cell(r.SubAccountName), tags,
		"", "", "", "", "",
		r.SplitRule, opt(r.AllocatedShare), r.BillingBasis, r.LedgerState, opt(r.DeclaredOffsetHours),
	}
}

// unit is a quantity's unit: null when the quantity is.
func unit(q *float64, u string) string {
	if q == nil {
		return ""
	}
	return u
}

// pricingCategory is Standard where a unit price applies (the prices
// file's rates), null on corrections without one.
func pricingCategory(r *Row) string {
	if r.ListUnitPrice == nil {
		return ""
	}
	return "Standard"
}

// cell neutralises a text cell against CSV injection (OWASP): a cell
// beginning with = + - @, a tab or a carriage return gets a leading ', so
// that a spreadsheet shows it as text instead of running it.
// TODO(csvout): replace with monitor/csvout's cell once it is on main.
func cell(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}
