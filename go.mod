module github.com/paddle-entrypoint/paddle-entrypoint

go 1.26.8

require (
	github.com/NVIDIA/go-nvml v0.13.4-1
	github.com/cenkalti/backoff/v4 v4.3.0
	github.com/spf13/pflag v1.1.0
	go.etcd.io/bbolt v1.4.3
)

require golang.org/x/sys v0.29.0
