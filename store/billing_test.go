package store_test

import (
	"testing"

	"github.com/paddle-entrypoint/paddle-entrypoint/store"
	"github.com/paddle-entrypoint/paddle-entrypoint/store/storetest"
)

// TestBillingPlans: billing's reads of the roll-ups are served by the
// primary keys they name (the window's hours a range of their first
// column), on both stores, with a month of one hundred nodes of eight GPUs
// stored and statistics (a window of six of its hours: over most of a
// table a scan is the right plan).
func TestBillingPlans(t *testing.T) {
	if testing.Short() {
		t.Skip("stores a month of node reports")
	}
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := storetest.Open(t, dsn)
		loadNodeHours(t, s)
		db := store.DBForTest(s)
		for _, st := range store.BillingStatementsForTest(s, hourT0+48*3600, hourT0+54*3600) {
			t.Run(st.Name, func(t *testing.T) {
				checkPlan(t, db, s.Dialect(), st)
			})
		}
	})
}
