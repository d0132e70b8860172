module github.com/paddle-entrypoint/paddle-entrypoint

go 1.26.8

require (
	github.com/NVIDIA/go-nvml v0.13.4-1
	github.com/cenkalti/backoff/v4 v4.3.0
	github.com/spf13/pflag v1.1.0
	go.etcd.io/bbolt v1.4.3
)

require (
	github.com/google/cel-go v0.31.0 // indirect
	go.yaml.in/yaml/v2 v2.4.4 // indirect
	golang.org/x/sys v0.47.0 // indirect
	k8s.io/api v0.37.2 // indirect
	k8s.io/pod-security-admission v0.37.2 // indirect
	sigs.k8s.io/yaml v1.6.0 // indirect
)
