package store_test

import (
	"fmt"
	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// BenchmarkRegister: registrations of two GPUs from parallel callers (the
// store's share of a registration; test/bench/monitorbench measures the server).
func BenchmarkRegister(b *testing.B) {
	for _, kind := range []string{"sqlite", "postgres"} {
		b.Run(kind, func(b *testing.B) {
			dsn := storetest.SQLiteDSN(b)
			if kind == "postgres" {
				dsn = storetest.PostgresDSN(b)
			}
			s := storetest.Open(b, dsn)
			var n atomic.Int64
			start := time.Now().Unix()
			b.SetParallelism(25)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := n.Add(1)
					node := i % 200
					r := reg(fmt.Sprintf("bench-%d", i), "p", "o", start+i,
						wire.RegisteredGPU{Index: ptrOf[int64](0), UUID: fmt.Sprintf("GPU-%d-0", node), Name: "A100"},
						wire.RegisteredGPU{Index: ptrOf[int64](1), UUID: fmt.Sprintf("GPU-%d-1", node), Name: "A100"})
					if _, err := register(s, r); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// BenchmarkHeartbeat: heartbeats of stored tasks from parallel callers.
func BenchmarkHeartbeat(b *testing.B) {
	for _, kind := range []string{"sqlite", "postgres"} {
		b.Run(kind, func(b *testing.B) {
			dsn := storetest.SQLiteDSN(b)
			if kind == "postgres" {
				dsn = storetest.PostgresDSN(b)
			}
			s := storetest.Open(b, dsn)
			for i := range 100 {
				if _, err := register(s, reg(fmt.Sprintf("hb-%d", i), "p", "o", 1000)); err != nil {
					b.Fatal(err)
				}
			}
			var n atomic.Int64
			b.SetParallelism(25)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := n.Add(1)
					if err := s.Heartbeat(ctx, fmt.Sprintf("hb-%d", i%100), 1000+i, nil); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
