package focus

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/report"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
)

// BenchmarkGenerate is the export of PADDLE_FOCUS_BENCH_MONTH (default
// 2025-06, the month monitorbench's ledger scenario loads) from the store
// PADDLE_FOCUS_BENCH_DB, the database a `monitorbench -keep -scenarios
// ledger` run leaves behind, in process, so that -cpuprofile shows where
// the export's time goes (docs/benchmarks.md, issue 38). Skipped without
// the variable.
func BenchmarkGenerate(b *testing.B) {
	dsn := os.Getenv("PADDLE_FOCUS_BENCH_DB")
	if dsn == "" {
		b.Skip("PADDLE_FOCUS_BENCH_DB names no store")
	}
	month := os.Getenv("PADDLE_FOCUS_BENCH_MONTH")
	if month == "" {
		month = "2025-06"
	}
	ctx := context.Background()
	st, err := store.Open(ctx, dsn, store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	// monitorbench's prices (ledgerPrices).
	p, err := report.ParsePrices(strings.NewReader(`{"currency": "USD", "default": 3.0, "models": {"NVIDIA H200*": 3.0}}`))
	if err != nil {
		b.Fatal(err)
	}
	cfg := Config{Source: st, Books: st, Ledger: st, Prices: p}
	b.ResetTimer()
	for range b.N {
		if _, err := Generate(ctx, cfg, month, nil); err != nil {
			b.Fatal(err)
		}
	}
}
