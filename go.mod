module github.com/paddle-entrypoint/paddle-entrypoint

go 1.26.8

require (
	github.com/NVIDIA/go-nvml v0.13.4-1
	github.com/cenkalti/backoff/v4 v4.3.0
	github.com/prometheus/client_model v0.6.3
	github.com/prometheus/common v0.73.1
	github.com/spf13/pflag v1.1.0
	go.etcd.io/bbolt v1.4.3
)

require (
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/pandatix/go-abnf v0.5.3 // indirect
	golang.org/x/sys v0.49.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)
