package wire

import "testing"

// BenchmarkDecodeHeartbeat: a sampled heartbeat of 8 GPUs, decoded and
// checked (the monitor's hot path).
func BenchmarkDecodeHeartbeat(b *testing.B) {
	body := []byte(`{"task_id":"job-7-worker-0","time":1796084746,"interval_seconds":60.001,"gpus":[` +
		`{"uuid":"GPU-5a3c0f0e-8a1b-2c3d-4e5f-60718293a4b0","samples":6,"util_mean":37.5},` +
		`{"uuid":"GPU-5a3c0f0e-8a1b-2c3d-4e5f-60718293a4b1","samples":6,"util_mean":37.5},` +
		`{"uuid":"GPU-5a3c0f0e-8a1b-2c3d-4e5f-60718293a4b2","samples":6,"util_mean":37.5},` +
		`{"uuid":"GPU-5a3c0f0e-8a1b-2c3d-4e5f-60718293a4b3","samples":6,"util_mean":37.5},` +
		`{"uuid":"GPU-5a3c0f0e-8a1b-2c3d-4e5f-60718293a4b4","samples":6,"util_mean":37.5},` +
		`{"uuid":"GPU-5a3c0f0e-8a1b-2c3d-4e5f-60718293a4b5","samples":6,"util_mean":37.5},` +
		`{"uuid":"GPU-5a3c0f0e-8a1b-2c3d-4e5f-60718293a4b6","samples":6,"util_mean":37.5},` +
		`{"uuid":"GPU-5a3c0f0e-8a1b-2c3d-4e5f-60718293a4b7","samples":6,"util_mean":37.5}]}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeHeartbeat(body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeRegistration: the sample registration (two GPUs, one MIG).
func BenchmarkDecodeRegistration(b *testing.B) {
	body := readFile(b, "registration.json")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeRegistration(body); err != nil {
			b.Fatal(err)
		}
	}
}
