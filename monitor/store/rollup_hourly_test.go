package store_test

import (
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/books"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// TestRollupHourlyRetention: --hourly-retention deletes the hours of the
// closed October only (November is open), and October's day and month
// facts, and November's hours, answer as before.
func TestRollupHourlyRetention(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dsn string) {
		s := open(t, dsn)
		oct := time.Date(2026, 10, 30, 0, 0, 0, 0, time.UTC).Unix()
		nov := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC).Unix()
		dec := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).Unix()
		for at := oct + 1800; at <= nov+2*86400; at += 1800 {
			if _, err := s.StoreNodeReport(ctx, wholeReport("n1", at, 1800, "GPU-a", "GPU-b"), store.DefaultNodeRetire); err != nil {
				t.Fatal(err)
			}
		}
		sums := func(grain string, from, to int64) []store.FactSum {
			t.Helper()
			f, err := s.FactSums(ctx, grain, from, to)
			if err != nil {
				t.Fatal(err)
			}
			sort.Slice(f, func(i, j int) bool { return f[i].UUID+f[i].UserKey < f[j].UUID+f[j].UserKey })
			return f
		}
		days, months, novHours := sums("day", oct, nov), sums("month", oct-29*86400, nov), sums("hour", nov, dec)
		if len(days) != 4 || days[0].Observed != 2*86400 {
			t.Fatalf("October's days: %+v", days)
		}
		if _, _, err := books.Close(ctx, s, "2026-10", "test", books.Inputs{}, fixedNow()); err != nil {
			t.Fatal(err)
		}
		// 48 hours × (2 GPUs + 2 users) of October.
		n, err := s.TrimHourly(ctx, time.Unix(nov+86400, 0))
		if err != nil || n != 48*4 {
			t.Fatalf("trimmed %d rows (%v), want %d", n, err, 48*4)
		}
		if got := sums("hour", oct, nov); len(got) != 0 {
			t.Errorf("October's hours left: %+v", got)
		}
		for _, c := range []struct {
			name      string
			got, want []store.FactSum
		}{
			{"October's days", sums("day", oct, nov), days},
			{"October's month", sums("month", oct-29*86400, nov), months},
			{"November's hours", sums("hour", nov, dec), novHours},
		} {
			if !reflect.DeepEqual(c.got, c.want) {
				t.Errorf("%s after the trim: %+v, want %+v", c.name, c.got, c.want)
			}
		}
	})
}
