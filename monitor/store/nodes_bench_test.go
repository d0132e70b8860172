package store_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/wire"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

// BenchmarkStoreNodeReport: reports of 8 whole GPUs with 2 users each
// from parallel callers, each report a new interval of one of 1,000 nodes
// (the store's share of POST /v1/nodes/report; test/bench/monitorbench
// measures the server).
func BenchmarkStoreNodeReport(b *testing.B) {
	for _, kind := range []string{"sqlite", "postgres"} {
		b.Run(kind, func(b *testing.B) {
			dsn := storetest.SQLiteDSN(b)
			if kind == "postgres" {
				dsn = storetest.PostgresDSN(b)
			}
			s := storetest.Open(b, dsn)
			var n atomic.Int64
			start := time.Now().Add(-12*time.Hour).Unix() / 60 * 60
			b.SetParallelism(25)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := n.Add(1)
					node := fmt.Sprintf("node-%03d", i%1000)
					r := benchNodeReport(node, start+(i/1000+1)*60)
					if _, err := s.StoreNodeReport(context.Background(), r, store.DefaultNodeRetire); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

func benchNodeReport(node string, end int64) *wire.NodeReport {
	r := &wire.NodeReport{SchemaVersion: 1, Node: node, Time: end, IntervalSeconds: 60, Samples: 12}
	for g := range 8 {
		uuid := fmt.Sprintf("GPU-%s-%d", node, g)
		r.GPUs = append(r.GPUs, wire.NodeGPU{UUID: uuid, EnergyJoules: ptrOf(24000.0)})
		in := wire.NodeInstance{UUID: uuid, Name: "NVIDIA H200", Samples: 12, UtilMean: ptrOf(80.0), BusyShare: 0.9,
			BusyBasis: wire.BusyBasisUtilization, OccupiedShare: 1, EnergyJoules: ptrOf(24000.0)}
		for u := range 2 {
			in.Users = append(in.Users, wire.NodeUser{Runtime: "containerd", ContainerID: fmt.Sprintf("%s-%d-%d", node, g, u),
				PodUID: fmt.Sprintf("pod-%s-%d", node, g), Namespace: "team-a", Pod: "train", Container: fmt.Sprintf("c%d", u),
				AllocatedShare: 1, SeenShare: 1, BusyShare: 0.9, SMUtilMean: ptrOf(40.0),
				Declared: &wire.Declaration{TaskID: "t", Project: "search", Owner: "ann@example.com"}})
		}
		r.Instances = append(r.Instances, in)
	}
	return r
}
